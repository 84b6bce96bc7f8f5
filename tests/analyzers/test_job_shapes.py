"""Shapes real jobs write (issue 8), each on its simulated set with ground truth: hosts
without host_name, torch <= 2.3 point-to-point peers, steps without ProfilerStep#N, the
one definition of a complete step, and run-name-or-path arguments."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, kineto_trace

import stepscope
from stepscope.analyzers.comm.roles import assign_roles
from stepscope.analyzers.flops.mfu import peak_for_dtype
from stepscope.analyzers.flops.peaks import lookup
from stepscope.analyzers.plan.layouts import bubble_theory
from stepscope.analyzers.report import build_report
from stepscope.analyzers.results import CollectiveStat, Layout, to_builtins
from stepscope.cli import main

SIM = REPO / "sample_traces" / "simulated"


def _rewrite(src: Path, dst: Path, edit: Any, rename: Any = None) -> Path:
    """Copy a simulated set, editing each trace document (and maybe its file name)."""
    dst.mkdir(parents=True, exist_ok=True)
    for f in sorted(src.glob("*.json.gz")):
        doc = json.loads(gzip.decompress(f.read_bytes()))
        edit(doc)
        name = rename(doc) if rename else f.name
        (dst / name).write_bytes(gzip.compress(json.dumps(doc).encode()))
    return dst


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory, sample_db: Path) -> Path:
    """A copy of the sample database (tb_names, pipeline_torch23, no_profilerstep, healthy
    and the rest) plus the edited sets below."""
    tmp = tmp_path_factory.mktemp("shapes")
    path = tmp / "s.duckdb"
    shutil.copyfile(sample_db, path)

    def drop_names(doc: dict[str, Any]) -> None:
        doc.pop("host_name", None)
        doc.pop("traceName", None)

    inferred = _rewrite(SIM / "tb_names", tmp / "inferred", drop_names,
                        lambda d: f"rank{d['distributedInfo']['rank']}.json.gz")
    stepscope.ingest_run(inferred, db=path, run="inferred")

    def drop_pg_config(doc: dict[str, Any]) -> None:
        doc["distributedInfo"].pop("pg_config")

    args_only = _rewrite(SIM / "pipeline_torch23", tmp / "args_only", drop_pg_config)
    stepscope.ingest_run(args_only, db=path, run="p2p_args_only")
    stepscope.ingest_run(SIM / "no_profilerstep", db=path, run="marker", step_marker="train_step")

    def no_steps(doc: dict[str, Any]) -> None:
        doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("name") != "train_step"]

    whole = _rewrite(SIM / "no_profilerstep", tmp / "whole", no_steps)
    stepscope.ingest_run(whole, db=path, run="whole")
    return path


def report(db: Path, run: str) -> dict[str, Any]:
    with stepscope.open(db) as store:
        return to_builtins(build_report(store.con, run))


def truth(name: str) -> dict[str, Any]:
    return json.loads((SIM / name / "ground_truth.json").read_text())


# ------------------------------------------------------------------ hosts
def test_hosts_from_tensorboard_file_names(db: Path) -> None:
    r = report(db, "tb_names")
    assert r["run"]["host_source"] == "file_name"
    assert r["run"]["hosts"] == ["node000", "node001", "node002", "node003"]
    assert (r["layout"]["nodes"], r["layout"]["gpus_per_node"]) == (4, 2)
    tp = next(c for c in r["collectives"] if c["group_label"] == "TENSOR_MODEL_PARALLEL_GROUP")
    assert tp["crosses_nodes"] and tp["link"] == "network"
    assert [x["id"] for x in r["recommendations"]] == ["tp-spans-nodes"]


def test_hosts_inferred_from_device_count(db: Path) -> None:
    r = report(db, "inferred")
    assert r["run"]["host_source"] == "inferred"
    assert r["run"]["hosts"] == ["node0", "node1", "node2", "node3"]
    assert [p["host"] for p in r["per_rank"]] == [f"node{k // 2}" for k in range(8)]
    assert "tp-spans-nodes" in {x["id"] for x in r["recommendations"]}


def test_host_name_wins_and_is_labelled(db: Path) -> None:
    r = report(db, "healthy")
    assert r["run"]["host_source"] == "host_name" and r["run"]["hosts"] == ["node000"]


@pytest.mark.slow
def test_group_larger_than_a_node_crosses_nodes(tmp_path: Path) -> None:
    """Every rank on one named host, but the TP group (4) exceeds the 2 GPUs it sees."""
    def one_host(doc: dict[str, Any]) -> None:
        doc["host_name"] = "bignode"

    d = _rewrite(SIM / "tb_names", tmp_path / "one", one_host)
    stepscope.ingest_run(d, db=tmp_path / "o.duckdb", run="one")
    r = report(tmp_path / "o.duckdb", "one")
    assert r["run"]["hosts"] == ["bignode"]
    tp = next(c for c in r["collectives"] if c["group_label"] == "TENSOR_MODEL_PARALLEL_GROUP")
    assert tp["crosses_nodes"]


# ------------------------------------------------------------------ point-to-point peers
@pytest.mark.parametrize("run", ["pipeline_torch23", "p2p_args_only"])
def test_torch23_peers_give_the_pipeline(db: Path, run: str) -> None:
    cfg = truth("pipeline_torch23")["config"]
    r = report(db, run)
    pipe = r["pipeline"]
    assert pipe is not None
    assert (pipe["stages"], pipe["microbatches"], pipe["pipelines"]) == (4, 6, 2)
    assert pipe["bubble_theory"] == pytest.approx(bubble_theory(4, cfg["microbatches"]))
    stages = {s["stage"]: s["ranks"] for s in pipe["per_stage"]}
    assert stages == {0: [0, 1], 1: [2, 3], 2: [4, 5], 3: [6, 7]}
    assert "pipeline-bubble" in {x["id"] for x in r["recommendations"]}
    with stepscope.open(db) as store:
        peers = store.sql("SELECT DISTINCT rank, peer_rank FROM collectives "
                          "WHERE run = $run AND is_p2p ORDER BY 1, 2", {"run": run}).rows()
    # TP=2: rank r's pipeline neighbours are r +- 2 (global ranks, not group indices)
    assert peers == [(0, 2), (1, 3), (2, 0), (2, 4), (3, 1), (3, 5), (4, 2), (4, 6),
                     (5, 3), (5, 7), (6, 4), (7, 5)]


def test_bubble_matches_ground_truth(db: Path) -> None:
    t = truth("pipeline_torch23")
    full = [s for steps in t["per_rank"].values() for s in steps if s["has_successor"]]
    expect = sum(s["bubble_ns"] for s in full) / len(full) / 1e6
    step = sum(s["window_end_ns"] - s["window_start_ns"] for s in full) / len(full) / 1e6
    r = report(db, "pipeline_torch23")
    assert r["breakdown_ms"]["bubble"] == pytest.approx(expect, abs=0.01 * step)


# ------------------------------------------------------------------ steps without ProfilerStep
@pytest.mark.parametrize(("run", "source"), [("no_profilerstep", "annotation:train_step"),
                                             ("marker", "marker:train_step")])
def test_steps_from_annotations_match_truth(db: Path, run: str, source: str) -> None:
    t = truth("no_profilerstep")
    r = report(db, run)
    assert r["run"]["step_source"] == source
    assert any("train_step" in n for n in r["notes"])
    full = [s for steps in t["per_rank"].values() for s in steps if s["has_successor"]]
    step = sum(s["window_end_ns"] - s["window_start_ns"] for s in full) / len(full) / 1e6
    assert r["step_time_ms"] == pytest.approx(step, rel=1e-6)
    for cat, ms in r["breakdown_ms"].items():
        expect = sum(s[f"{cat}_ns"] for s in full) / len(full) / 1e6
        assert ms == pytest.approx(expect, abs=0.01 * step), cat
    assert r["mfu"]["mfu"] == pytest.approx(t["mfu"]["mfu"], rel=0.02)


def test_whole_window_is_the_last_resort(db: Path) -> None:
    t = truth("no_profilerstep")
    r = report(db, "whole")
    assert r["run"]["step_source"] == "whole_window"
    assert any("whole profiled window" in n for n in r["notes"])
    assert [p["n_steps"] for p in r["per_rank"]] == [1, 1, 1, 1]
    # the window spans the GPU work of all profiled steps
    rows = t["per_rank"]["0"]
    span = (rows[-1]["window_end_ns"] - rows[0]["window_start_ns"]) / 1e6
    assert r["per_rank"][0]["step_time_ms"] == pytest.approx(span, rel=1e-6)
    assert r["breakdown_ms"]["compute"] > 0 and r["mfu"]["mfu"] is not None


def test_partial_rank_set_is_attributed_with_a_note(tmp_path: Path) -> None:
    src = next(SIM.joinpath("healthy").glob("rank3.json.gz"))
    stepscope.ingest_run(src, db=tmp_path / "p.duckdb", run="r3")
    r = report(tmp_path / "p.duckdb", "r3")
    assert [p["rank"] for p in r["per_rank"]] == [3]
    assert r["breakdown_ms"]["compute"] > 0
    assert any("only 1 of 8 ranks" in n for n in r["notes"])


# ------------------------------------------------------------------ complete steps
def test_complete_steps_is_the_one_definition(db: Path, tmp_path: Path) -> None:
    with stepscope.open(db) as store:
        got = store.sql("SELECT count(*) FROM complete_steps WHERE run = 'healthy'").item()
        expect = store.sql("SELECT count(*) FROM step_attribution "
                           "WHERE run = 'healthy' AND has_successor").item()
        whole = store.sql("SELECT count(*) FROM complete_steps WHERE run = 'whole'").item()
    assert got == expect == 8 * 2 and whole == 4
    path = tmp_path / "one.json"
    path.write_text(json.dumps(kineto_trace(rank=0, world_size=1, steps=1)))
    stepscope.ingest_run(path, db=tmp_path / "one.duckdb", run="one")
    r = report(tmp_path / "one.duckdb", "one")
    assert r["per_rank"][0]["n_steps"] == 1 and r["step_time_ms"] > 0


# ------------------------------------------------------------------ run name or path
def test_run_name_that_is_also_a_path_says_which(db: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(SIM)
    assert main(["report", "healthy", "--db", str(db), "--format", "json"]) == 0
    err = capsys.readouterr().err
    assert "'healthy' is both a run in" in err and "using the path" in err
    assert err.count("\n") == 1
    assert main(["report", "healthy", "--db", str(tmp_path / "none.duckdb"),
                 "--format", "json"]) == 0
    assert "both a run" not in capsys.readouterr().err


# ------------------------------------------------------------------ the dtype of MFU
@pytest.fixture(scope="module")
def fp32_db(sample_db: Path) -> Path:
    return sample_db  # holds the run fp32_v100


def test_fp32_matmuls_use_the_fp32_peak(fp32_db: Path) -> None:
    t = truth("fp32_v100")["mfu"]
    m = report(fp32_db, "fp32_v100")["mfu"]
    assert (m["dtype"], m["dtype_source"], m["peak_dtype"]) == ("fp32", "ops", "fp32")
    assert m["dtype_share"] == pytest.approx(1.0)
    assert m["device"] == "NVIDIA V100 SXM2" and m["peak_flops_per_gpu"] == t["peak_flops_per_gpu"]
    assert "no TF32" in m["peak_reason"]
    assert m["mfu"] == pytest.approx(t["mfu"], rel=0.02)


def test_dtype_flag_overrides(fp32_db: Path) -> None:
    with stepscope.open(fp32_db) as store:
        m = build_report(store.con, "fp32_v100", dtype="fp16").mfu
    assert (m.dtype, m.dtype_source, m.peak_flops_per_gpu) == ("fp16", "flag", 125e12)


def test_dtype_from_kernel_names_when_ops_have_no_types(db: Path) -> None:
    m = report(db, "healthy")["mfu"]  # the bundled set predates Input type
    assert (m["dtype"], m["dtype_source"], m["peak_dtype"]) == ("bf16", "kernels", "bf16")


def test_fp32_on_ampere_is_tf32_only_when_tf32_kernels_ran() -> None:
    a100 = lookup("NVIDIA A100-SXM4-80GB")
    assert a100 is not None
    dtype, reason = peak_for_dtype("fp32", "ops", 1.0, a100, {"fp32": 5.0})
    assert dtype == "fp32" and "allow_tf32" in reason
    dtype, reason = peak_for_dtype("fp32", "ops", 1.0, a100, {"tf32": 9.0, "fp32": 1.0})
    assert dtype == "tf32" and "90% of GEMM kernel time" in reason
    v100 = lookup("Tesla V100-SXM2-32GB")
    assert peak_for_dtype("fp32", "kernels", 1.0, v100, {"tf32": 9.0})[0] == "fp32"
    assert peak_for_dtype("bf16", "default", None, a100, {})[0] == "bf16"


# ------------------------------------------------------------------ hidden stragglers
def test_hidden_straggler_is_named_with_evidence(sample_db: Path) -> None:
    cfg = truth("hidden_straggler")["config"]
    r = report(sample_db, "hidden_straggler")
    assert [s["rank"] for s in r["stragglers"]] == [cfg["slow_rank"]] == [13]
    s = r["stragglers"][0]
    assert s["hidden"] and s["host"] == "node001"
    assert s["arrived_last"] == s["matched_collectives"] > 0
    assert s["compute_ms"] / s["peer_compute_ms"] == pytest.approx(cfg["slow_factor"], rel=0.03)
    # its TP group (7 ranks) and its DP group (3 ranks) waited for it
    assert s["waiting_ranks"] == 10
    per_rank = {p["rank"]: p for p in r["per_rank"]}
    tp_peers = [8, 9, 10, 11, 12, 14, 15]
    for p in tp_peers:  # visible: ~9% of the step as straggler wait
        assert per_rank[p]["breakdown_ms"]["straggler_wait"] > 0.05 * r["step_time_ms"]
    # ... but its own time is the median rank's: the old rule alone could not see it
    own = per_rank[13]["step_time_ms"] - per_rank[13]["breakdown_ms"]["straggler_wait"]
    assert own == pytest.approx(per_rank[0]["step_time_ms"], rel=0.01)
    assert "straggler" in {x["id"] for x in r["recommendations"]}


# ------------------------------------------------------------------ collective roles
def _row(op: str, label: str, size: int | None, calls: float = 1.0) -> CollectiveStat:
    return CollectiveStat(
        collective=op, group_label=label, group_size=size, calls_per_step=calls,
        is_p2p=op in ("send", "recv"), crosses_nodes=False, bytes_per_step=0.0,
        time_ms=0.0, exposed_ms=0.0, bus_bw_gbs=None, link="nvlink", link_peak_gbs=None,
        link_utilization=None)


def _layout(tp: int, dp: int) -> Layout:
    return Layout(tp=tp, pp=1, dp=dp, cp=1, ep=1, gpus_per_node=None, nodes=None,
                  source="inferred")


def test_roles_from_labels_and_guesses() -> None:
    lay = _layout(tp=2, dp=4)
    rows = assign_roles((
        _row("all_reduce", "TENSOR_MODEL_PARALLEL_GROUP", 2),
        _row("all_gather", "DATA_PARALLEL_GROUP", 4),
        _row("all_to_all", "group of 8", 8),
        _row("all_reduce", "group of 2", 2),
        _row("all_reduce", "unknown group", None),
        _row("broadcast", "default_pg", 8),
        _row("recv", "group of 2", 2),
    ), world=8, layout=lay)
    assert [(r.role, r.role_source) for r in rows] == [
        ("tensor_parallel", "label"), ("dp_param_gather", "label"),
        ("embedding_or_expert_exchange", "guess"), ("tensor_parallel", "guess"),
        ("dp_gradients", "guess"), ("parameter_broadcast", "guess"), ("pipeline", "guess")]
    fsdp = assign_roles((_row("all_gather", "default_pg", 4, 12),
                         _row("reduce_scatter", "default_pg", 4, 12)), world=4,
                        layout=_layout(tp=1, dp=4))
    assert {r.role for r in fsdp} == {"fsdp_shards"}


def test_fsdp_sample_gets_fsdp_advice(sample_db: Path) -> None:
    r = report(sample_db, "cpu-fsdp2")
    assert {c["role"] for c in r["collectives"]} == {"fsdp_shards"}
    (rec,) = [x for x in r["recommendations"] if x["id"] == "exposed-dp-comm"]
    assert "FSDP" in rec["title"] and "guessed" in rec["evidence"]


def test_dlrm_all_to_all_is_not_called_gradient_traffic(real_traces: Path,
                                                        tmp_path: Path) -> None:
    """A real DLRM rank (HTA trace_filter, 2 of 128 ranks): the exposed all_to_all is the
    embedding exchange; no advice to overlap data-parallel gradients because of it."""
    src = real_traces / "HolisticTraceAnalysis/tests/data/trace_filter/sampled_rank-0.json.gz"
    stepscope.ingest_run(src, db=tmp_path / "d.duckdb", run="d")
    r = report(tmp_path / "d.duckdb", "d")
    roles = {c["collective"]: (c["role"], c["role_source"]) for c in r["collectives"]}
    assert roles["all_to_all"] == ("embedding_or_expert_exchange", "guess")
    ids = [x["id"] for x in r["recommendations"]]
    assert "exposed-a2a-comm" in ids
    for rec in r["recommendations"]:
        if rec["id"] == "exposed-dp-comm":
            assert "all_to_all" not in rec["evidence"].split(":")[1]
