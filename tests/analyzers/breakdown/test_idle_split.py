"""Host-bound steps and the idle category (issue 20, section 3): idle split into waiting
for the host, launch overhead and other, against the simulator's ground truth on every
set, summing exactly to idle on every set and real trace; the host activity the report
names; the advice that fires where the split says and nowhere else."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, real_run, real_trace_files

import stepscope
from stepscope.analyzers.report import build_report
from stepscope.analyzers.results import Report
from stepscope.dashboard.render.report import report_markdown

SIM = REPO / "sample_traces" / "simulated"
SETS = sorted(p.name for p in SIM.iterdir() if (p / "ground_truth.json").exists())
CPU_SETS = sorted(f"cpu-{p.name}" for p in (REPO / "sample_traces" / "cpu").iterdir()
                  if p.is_dir())
PARTS = {"idle_host_ns": "host_bound_ns", "idle_launch_ns": "launch_overhead_ns"}
HOST_ADVICE = {"input-bound", "host-bound", "launch-bound"}
# the one host-side advice each set is built for (none for the others)
EXPECTED = {"host_bound": {"host-bound"}, "input_bound": {"input-bound"},
            "launch_bound": {"launch-bound"},
            # decode steps replayed as graphs after 4 ms of CPU work (host_ms)
            "cuda_graph": {"host-bound"}, "hip_graph": {"host-bound"}}


def truth(name: str) -> dict[str, Any]:
    return json.loads((SIM / name / "ground_truth.json").read_text())


def typed(db: Path, run: str) -> Report:
    with stepscope.open(db) as store:
        return build_report(store.con, run)


def rows(db: Path, query: str, run: str) -> list[tuple[Any, ...]]:
    with stepscope.open(db) as store:
        return store.sql(query, {"run": run}).rows()


@pytest.mark.parametrize("name", SETS)
def test_split_matches_ground_truth(sample_db: Path, name: str) -> None:
    """Each part of idle (and its evidence) per rank and step within 1% of the step of
    the simulator's own split, and the three parts sum exactly to idle."""
    got = {(r, s): v for r, s, *v in rows(sample_db, """
        SELECT a.rank, a.step, a.step_ns, a.idle_ns, a.idle_host_ns, a.idle_launch_ns,
            a.idle_other_ns, coalesce(sum(g.loader_ns), 0),
            coalesce(sum(g.host_bound_ns) FILTER (WHERE g.after_sync), 0),
            coalesce(sum(g.end_ns - g.start_ns), 0)
        FROM step_attribution a LEFT JOIN idle_gaps g USING (run, rank, step)
        WHERE a.run = $run GROUP BY ALL""", name)}
    n = 0
    for rank, steps in truth(name)["per_rank"].items():
        for t in steps:
            step_ns, idle, host, launch, other, loader, synced, gaps = got[(int(rank), t["step"])]
            assert host + launch + other == idle and gaps == idle  # exactly
            tol = 0.01 * step_ns
            for value, key in ((host, "idle_host_ns"), (launch, "idle_launch_ns"),
                               (other, "idle_other_ns"), (loader, "idle_host_loader_ns"),
                               (synced, "idle_host_sync_ns")):
                assert value == pytest.approx(t[key], abs=tol), (name, rank, t["step"], key)
            n += 1
    assert n == len(got)


def test_each_part_is_covered_on_its_own(sample_db: Path) -> None:
    """host_bound holds all three parts and syncs; launch_bound only launch overhead;
    input_bound waits for the DataLoader: each part has ground truth where it matters."""
    def share(name: str, key: str) -> float:
        full = [s for steps in truth(name)["per_rank"].values() for s in steps
                if s["has_successor"]]
        return sum(s[key] for s in full) / sum(s["window_end_ns"] - s["window_start_ns"]
                                                for s in full)
    assert share("host_bound", "idle_host_ns") > 0.4
    assert share("host_bound", "idle_host_sync_ns") > 0.4
    assert 0.02 < share("host_bound", "idle_launch_ns") < 0.10
    assert share("host_bound", "idle_other_ns") > 0.05
    assert share("launch_bound", "idle_launch_ns") > 0.4
    assert share("launch_bound", "idle_host_ns") < 0.05
    assert share("launch_bound", "idle_other_ns") == 0
    assert share("input_bound", "idle_host_loader_ns") > 0.4


@pytest.mark.parametrize("name", [*SETS, *CPU_SETS])
def test_report_split_sums_to_idle(sample_db: Path, name: str) -> None:
    r = typed(sample_db, name)
    assert r.idle_split is not None
    split = r.idle_split.split_ms
    parts = split.host_bound + split.launch_overhead + split.other
    assert parts == pytest.approx(r.breakdown_ms.idle, rel=1e-9, abs=1e-9)
    for p in r.per_rank:
        assert p.idle_split_ms is not None
        s = p.idle_split_ms
        assert s.host_bound + s.launch_overhead + s.other == pytest.approx(
            p.breakdown_ms.idle, rel=1e-9, abs=1e-9)
    if name.startswith("cpu-"):  # a CPU timeline has no launches to wait for
        assert split.host_bound == split.launch_overhead == 0 and not r.idle_split.host_activity
    assert {x.id for x in r.recommendations} & HOST_ADVICE == EXPECTED.get(name, set())


def test_host_bound_names_what_the_host_ran(sample_db: Path) -> None:
    r = typed(sample_db, "host_bound")
    idle = r.idle_split
    assert idle is not None
    top = idle.host_activity[0]
    cfg = truth("host_bound")["config"]
    # 3 microbatches, each followed by .item() and sync_host_us of aten::index
    expect_ms = cfg["microbatches"] * cfg["sync_host_us"] / 1e3
    assert (top.name, top.kind, top.thread) == ("aten::index", "cpu_op", "python")
    assert top.ms == pytest.approx(expect_ms, rel=0.01)
    assert idle.host_bound_after_sync_ms > 0.9 * idle.split_ms.host_bound
    (rec,) = [x for x in r.recommendations if x.id == "host-bound"]
    assert "synchroniz" in rec.title and "aten::index" in rec.evidence
    assert rec.expected_gain_ms == pytest.approx(idle.split_ms.host_bound, rel=0.05)
    text = report_markdown(r)
    assert "### Idle: why the GPU waited" in text and "| `aten::index` | cpu_op |" in text


@pytest.mark.parametrize("name", ["cuda_graph", "hip_graph"])
def test_host_work_between_graph_replays(sample_db: Path, name: str) -> None:
    """A step that already replays a graph gets no "use CUDA graphs" advice: its host
    time (host_ms of CPU work before the replay) is between replays."""
    cfg = truth(name)["config"]
    r = typed(sample_db, name)
    assert r.idle_split is not None
    assert r.idle_split.split_ms.host_bound == pytest.approx(cfg["host_ms"], rel=0.02)
    rec = next(x for x in r.recommendations if x.id == "host-bound")
    assert "already replays CUDA/HIP graphs" in rec.detail
    assert "torch.cuda.graphs" not in rec.detail


def test_input_bound_names_the_data_loader(sample_db: Path) -> None:
    r = typed(sample_db, "input_bound")
    assert r.idle_split is not None
    (rec,) = [x for x in r.recommendations if x.id == "input-bound"]
    assert "DataLoader" in rec.evidence and "num_workers" in rec.detail
    assert r.idle_split.host_activity[0].kind == "data_loader"


# ------------------------------------------------------------------ real traces
def _real(name: str) -> Path:
    """The real trace named `name` (its run in the session's real database: real_run)."""
    (path,) = [p for p in real_trace_files() if p.name == name]
    return path


@pytest.mark.slow
def test_real_traces_split_and_layout_add_up(real_db: Path,
                                            real_report: Callable[[Path], Report]) -> None:
    """On every real trace: the idle split sums to idle on every step, and the layout's
    factors multiply out to the world size (section 2)."""
    for path in real_trace_files():
        bad = rows(real_db, """SELECT count(*) FROM step_attribution WHERE run = $run
            AND (idle_host_ns + idle_launch_ns + idle_other_ns <> idle_ns
                 OR least(idle_host_ns, idle_launch_ns, idle_other_ns) < 0)""", real_run(path))
        assert bad == [(0,)]
        r = real_report(path)
        lay, world = r.layout, r.run.world_size or r.run.ranks or 1
        assert lay.consistent and lay.tp * lay.pp * lay.dp * lay.cp == world
        if lay.nodes and lay.gpus_per_node:
            assert lay.nodes * lay.gpus_per_node == world
        if r.idle_split is not None:
            s = r.idle_split.split_ms
            assert s.host_bound + s.launch_overhead + s.other == pytest.approx(
                r.breakdown_ms.idle, rel=1e-9, abs=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "expected"), [
    # torch 1.9 ResNet-50 with num_workers=0: the GPU waits for the DataLoader
    ("worker0.1623143089861.pt.trace.json.gz", {"input-bound"}),
    # a DDP job whose host runs `## backward ##` while the GPU waits (A100)
    ("nccl_data.json.gz", {"host-bound"}),
    # eager vLLM inference on a B200: Python-bound, and many microsecond kernels
    ("eager_trace.json.gz", {"host-bound", "launch-bound"}),
    # the MI300X ResNet: the GPU is busy (its idle is 0.5%); the CPU runs ~30 ms ahead
    ("resnet_act_checkpoint.json.gz", set()),
    ("rank0.json.gz", set()),
    # one ROCm step whose first hipLaunchKernel runs 6.5 ms (lazy code loading)
    ("mi250_minitoy_train_ROCm6_2_kineto.json.gz", {"host-bound"}),
])
def test_real_host_advice(real_report: Callable[[Path], Report], name: str,
                          expected: set[str]) -> None:
    r = real_report(_real(name))
    assert {x.id for x in r.recommendations} & HOST_ADVICE == expected
    if "host-bound" in expected:
        rec = next(x for x in r.recommendations if x.id == "host-bound")
        assert r.idle_split is not None and r.idle_split.host_activity
        assert r.idle_split.host_activity[0].name in rec.evidence


@pytest.mark.slow
def test_a_slow_launch_call_is_host_time(real_db: Path,
                                        real_report: Callable[[Path], Report]) -> None:
    """MI250 minitoy: a 6.6 ms gap ends in a kernel whose hipLaunchKernel call ran 6.5 ms;
    the GPU waited for the host (the launch point is 30 us before the call returned)."""
    path = _real("mi250_minitoy_train_ROCm6_2_kineto.json.gz")
    ((host, other),) = rows(real_db, """SELECT host_bound_ns, other_ns FROM idle_gaps
        WHERE run = $run ORDER BY end_ns - start_ns DESC LIMIT 1""", real_run(path))
    assert host > 6_500_000 and other < 10_000
    r = real_report(path)
    assert r.idle_split is not None
    launch = [a for a in r.idle_split.host_activity if a.name == "hipLaunchKernel"]
    assert launch and launch[0].kind == "launch" and launch[0].ms > 6.0
    rec = next(x for x in r.recommendations if x.id == "host-bound")
    assert "warm-up" in rec.detail


def test_a_version_4_file_reads_without_the_split_and_migrates(sample_db: Path,
                                                              tmp_path: Path) -> None:
    """A file of schema version 4 (before migration 5): read-only, the report has no idle
    split and the same breakdown; its next write adds the columns and tables."""
    import shutil

    import duckdb

    from stepscope.ingest import schema
    from stepscope.ingest.db import connect_write

    db = tmp_path / "v4.duckdb"
    shutil.copyfile(sample_db, db)
    with duckdb.connect(str(db)) as con:
        con.execute("DROP VIEW run_nodes")  # version 4's has other columns
        for table in ("idle_gaps", "host_activity"):
            con.execute(f"DROP TABLE {table}")
            con.execute("DELETE FROM stepscope_tables WHERE table_name = $t", {"t": table})
        for column in ("idle_host_ns", "idle_launch_ns", "idle_other_ns"):
            con.execute(f"ALTER TABLE step_attribution DROP COLUMN {column}")
        con.execute("ALTER TABLE ranks DROP COLUMN host_note")
        con.execute("UPDATE schema_info SET value = '4' WHERE key = 'schema_version'")
    old = typed(db, "host_bound")
    new = typed(sample_db, "host_bound")
    assert old.idle_split is None and all(p.idle_split_ms is None for p in old.per_rank)
    assert old.breakdown_ms == new.breakdown_ms
    connect_write(db).close()
    with duckdb.connect(str(db), read_only=True) as con:
        version = con.execute("SELECT value FROM schema_info").fetchall()
        owned = {t for (t,) in con.execute("SELECT table_name FROM stepscope_tables").fetchall()}
    assert version == [(str(schema.SCHEMA_VERSION),)] and {"idle_gaps", "host_activity"} <= owned
