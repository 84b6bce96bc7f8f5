"""Layouts whose numbers multiply out (issue 20, section 2): hosts from tensorboard file
names only when the name's pid is the trace's own, the one-node signature of distinct
GPUs, a partial rank set of a large job, and TP x PP x DP x CP (EP) from process-group
descriptions, checked against the world size; conflicts say which source won."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, kineto_trace, write_trace

import stepscope
from stepscope.analyzers.parallel.layout import group_degrees
from stepscope.analyzers.report import build_report
from stepscope.analyzers.results import Layout, to_builtins
from stepscope.dashboard.render.format import layout_degrees, layout_nodes
from stepscope.dashboard.render.report import report_markdown

SIM = REPO / "sample_traces" / "simulated"
FR = "nvidia-resiliency-ext/tests/attribution/unit/fr_traces/gpu_error_1st"


def rewrite(src: Path, dst: Path, name: Any, edit: Any = None) -> Path:
    """A simulated set without host_name/traceName, each file renamed by `name(doc)`."""
    dst.mkdir(parents=True, exist_ok=True)
    for f in sorted(src.glob("*.json.gz")):
        doc = json.loads(gzip.decompress(f.read_bytes()))
        doc.pop("host_name", None)
        doc.pop("traceName", None)
        if edit:
            edit(doc)
        (dst / name(doc)).write_bytes(gzip.compress(json.dumps(doc).encode()))
    return dst


def report(db: Path, run: str) -> dict[str, Any]:
    with stepscope.open(db) as store:
        return to_builtins(build_report(store.con, run))


def multiplies_out(r: dict[str, Any]) -> None:
    lay, world = r["layout"], r["run"]["world_size"]
    assert lay["consistent"]
    assert lay["tp"] * lay["pp"] * lay["dp"] * lay["cp"] == world
    if lay["nodes"] and lay["gpus_per_node"]:
        assert lay["nodes"] * lay["gpus_per_node"] == world


def rank_of(doc: dict[str, Any]) -> int:
    return int(doc["distributedInfo"]["rank"])


def pid_of(doc: dict[str, Any]) -> int:
    return int(next(e["pid"] for e in doc["traceEvents"] if e.get("cat") == "cpu_op"))


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory, sample_db: Path) -> Path:
    """A copy of the sample database (it holds tb_names) plus the renamed sets below."""
    tmp = tmp_path_factory.mktemp("layout")
    path = tmp / "l.duckdb"
    shutil.copyfile(sample_db, path)
    # the real DLRM job's names: tensorboard worker `worker{i}_step_12`, one 8-GPU box
    dlrm = rewrite(SIM / "healthy", tmp / "dlrm",
                   lambda d: f"worker{rank_of(d)}_step_12.{1767189312000 + rank_of(d)}"
                             ".pt.trace.json.gz")
    stepscope.ingest_run(dlrm, db=path, run="dlrm")
    # default worker names whose pid matches, but one name per rank on one box
    per_rank = rewrite(SIM / "healthy", tmp / "per_rank",
                       lambda d: f"rank{rank_of(d)}_{pid_of(d)}.1767189312000.pt.trace.json.gz")
    stepscope.ingest_run(per_rank, db=path, run="per_rank")
    # rank 0 alone of a 32-rank job on 8-GPU nodes (host_name kept)
    stepscope.ingest_run(SIM / "hidden_straggler" / "rank0.json.gz", db=path, run="rank0")
    return path


def test_dlrm_worker_names_are_not_hosts(db: Path) -> None:
    r = report(db, "dlrm")
    assert r["run"]["host_source"] == "inferred" and r["run"]["hosts"] == ["node0"]
    lay = r["layout"]
    assert (lay["nodes"], lay["gpus_per_node"], lay["node_gpus"]) == (1, 8, 8)
    assert lay["node_source"] == "device_properties"
    (note,) = lay["notes"]
    assert "worker0_step_12" in note and "ends in _12" in note and "7 more" in note
    assert not any(c["crosses_nodes"] for c in r["collectives"])
    multiplies_out(r)
    text = report_markdown(build_report_model(db, "dlrm"))
    assert "8 per node, 1 node(s)" in text and "layout note: file name" in text


def build_report_model(db: Path, run: str) -> Any:
    with stepscope.open(db) as store:
        return build_report(store.con, run)


def test_distinct_gpus_of_one_box_are_one_node(db: Path) -> None:
    """`rank3_<pid>` names carry the right pid, but 8 ranks on the distinct GPUs 0..7 of
    identical 8-GPU nodes are one node: the names are not taken as hosts."""
    r = report(db, "per_rank")
    assert r["run"]["hosts"] == ["node0"]
    assert (r["layout"]["nodes"], r["layout"]["gpus_per_node"]) == (1, 8)
    assert any("as on one node" in n for n in r["layout"]["notes"])
    multiplies_out(r)


def test_default_worker_names_still_give_hosts(db: Path) -> None:
    r = report(db, "tb_names")
    assert r["run"]["host_source"] == "file_name" and len(r["run"]["hosts"]) == 4
    assert (r["layout"]["nodes"], r["layout"]["gpus_per_node"]) == (4, 2)
    assert r["layout"]["node_source"] == "host_names" and r["layout"]["notes"] == []
    multiplies_out(r)


def test_one_rank_of_a_large_job_counts_its_nodes(db: Path) -> None:
    r = report(db, "rank0")
    assert r["run"]["world_size"] == 32 and r["run"]["hosts"] == ["node000"]
    lay = r["layout"]
    assert (lay["nodes"], lay["gpus_per_node"]) == (4, 8)
    assert any("the 1 rank(s) traced ran on 1 host(s)" in n for n in lay["notes"])
    multiplies_out(r)


@pytest.mark.slow
def test_names_that_put_two_ranks_on_one_gpu_lose(tmp_path: Path) -> None:
    """Every rank named `bignode`, each seeing 2 GPUs: ranks 0, 2, 4, 6 would share GPU 0;
    deviceProperties win: 4 nodes of 2."""
    def one_host(doc: dict[str, Any]) -> None:
        doc["host_name"] = "bignode"

    d = rewrite(SIM / "tb_names", tmp_path / "one", lambda d: f"r{rank_of(d)}.json.gz",
                one_host)
    stepscope.ingest_run(d, db=tmp_path / "o.duckdb", run="one")
    r = report(tmp_path / "o.duckdb", "one")
    lay = r["layout"]
    assert (lay["nodes"], lay["gpus_per_node"], lay["node_source"]) == (4, 2,
                                                                          "device_properties")
    assert any("deviceProperties win" in n for n in lay["notes"])
    multiplies_out(r)


# ------------------------------------------------------------------ degrees
MOE = [("TENSOR_MODEL_PARALLEL_GROUP", 2), ("PIPELINE_MODEL_PARALLEL_GROUP", 2),
       ("CONTEXT_PARALLEL_GROUP", 2), ("DATA_PARALLEL_GROUP", 8),
       ("DATA_PARALLEL_GROUP_WITH_CP", 16), ("TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP", 32),
       ("EXPERT_MODEL_PARALLEL_GROUP", 8), ("EXPERT_DATA_PARALLEL_GROUP", 2),
       ("default_pg", 64)]


def moe_rank0(tmp_path: Path, groups: list[tuple[str, int]]) -> dict[str, Any]:
    """Rank 0 of a 64-rank MoE job on 8-GPU nodes, with these Megatron groups."""
    trace = kineto_trace(rank=0, world_size=64)
    trace["deviceProperties"] = [{"id": i, "name": "NVIDIA H800", "numSms": 132}
                                 for i in range(8)]
    trace["distributedInfo"]["pg_config"] = [
        {"pg_name": str(i), "pg_desc": desc, "backend_config": "cuda:nccl", "pg_size": size,
         "ranks": list(range(size))} for i, (desc, size) in enumerate(groups)]
    path = write_trace(tmp_path / "moe" / "rank0.json.gz", trace)
    db = tmp_path / "m.duckdb"
    stepscope.ingest_run(path, db=db, run="moe")
    return report(db, "moe")


def test_moe_rank0_degrees_and_nodes(tmp_path: Path) -> None:
    r = moe_rank0(tmp_path, MOE)
    lay = r["layout"]
    assert (lay["tp"], lay["pp"], lay["dp"], lay["cp"], lay["ep"]) == (2, 2, 8, 2, 8)
    assert (lay["nodes"], lay["gpus_per_node"]) == (8, 8)
    assert lay["source"] == "process_group_descriptions"
    multiplies_out(r)


def test_composite_groups_give_the_missing_degrees() -> None:
    """Without DATA_PARALLEL_GROUP / CONTEXT_PARALLEL_GROUP, the composite groups give
    them; torch DeviceMesh's mesh_<dim> names too."""
    composite = [("TENSOR_MODEL_PARALLEL_GROUP", 2), ("TENSOR_AND_CONTEXT_PARALLEL_GROUP", 4),
                 ("DATA_PARALLEL_GROUP_WITH_CP", 16)]
    assert group_degrees(composite) == ({"tp": 2, "cp": 2, "dp": 8}, [])
    mesh = [("mesh_tp", 4), ("mesh_dp_replicate", 2), ("mesh_dp_shard", 8), ("mesh_cp", 2)]
    known, _ = group_degrees(mesh)
    assert (known["tp"], known["dp"], known["cp"]) == (4, 16, 2)
    _, notes = group_degrees([("TENSOR_MODEL_PARALLEL_GROUP", 2),
                              ("PIPELINE_MODEL_PARALLEL_GROUP", 4),
                              ("MODEL_PARALLEL_GROUP", 16)])
    assert notes and "has 16 ranks, not 8" in notes[0]


def test_world_size_wins_over_a_wrong_group(tmp_path: Path) -> None:
    groups = [g for g in MOE if g[0] != "DATA_PARALLEL_GROUP"] + [("DATA_PARALLEL_GROUP", 4)]
    groups = [g for g in groups if "WITH_CP" not in g[0]]
    r = moe_rank0(tmp_path, groups)
    assert r["layout"]["dp"] == 8
    assert any("world size (distributedInfo) wins" in n for n in r["layout"]["notes"])
    multiplies_out(r)


def test_factors_that_cannot_multiply_out_are_not_a_layout() -> None:
    lay = Layout(tp=3, pp=1, dp=1, cp=1, ep=1, gpus_per_node=None, nodes=None,
                 source="process_group_descriptions", consistent=False)
    assert "do not multiply out" in layout_degrees(lay) and " x " not in layout_degrees(lay)
    assert layout_nodes(lay) == "nodes unknown"


@pytest.mark.slow
def test_real_megatron_groups_multiply_out(real_traces: Path, tmp_path: Path) -> None:
    """Real Flight Recorder dumps of a 16-rank Megatron job (TP 2, PP 4, EP 4): the
    composite groups (TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP of 4, ...) are not DP."""
    stepscope.ingest_run(real_traces / FR, db=tmp_path / "f.duckdb", run="fr")
    r = report(tmp_path / "f.duckdb", "fr")
    lay = r["layout"]
    assert (lay["tp"], lay["pp"], lay["dp"], lay["cp"], lay["ep"]) == (2, 4, 2, 1, 4)
    multiplies_out(r)
