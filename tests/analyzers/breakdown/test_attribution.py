"""Step-time attribution against ground truth (simulator) and real CPU traces."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from conftest import REPO, kineto_trace, write_trace

import stepscope
from stepscope.analyzers.breakdown.attribution import CATEGORIES
from stepscope.analyzers.report import build_report
from stepscope.analyzers.results import REPORT_SCHEMA_VERSION, to_builtins

SIMULATED = REPO / "sample_traces" / "simulated"
SIM_SETS = sorted(p.name for p in SIMULATED.iterdir() if (p / "ground_truth.json").exists())


@pytest.fixture
def db(sample_db: Path) -> Path:
    """Every bundled run (CPU samples as cpu-<name>, simulated sets by name), ingested
    once per session (conftest.sample_db)."""
    return sample_db


def report(db: Path, run: str) -> dict[str, Any]:
    with stepscope.open(db) as store:
        return to_builtins(build_report(store.con, run))


def attribution(db: Path, run: str) -> pl.DataFrame:
    with stepscope.open(db) as store:
        return store.table("step_attribution", run=run)


def test_simulated_sets_exist() -> None:
    assert set(SIM_SETS) >= {"healthy", "straggler", "recompute", "recompute_reentrant",
                             "input_bound", "tp_across_nodes", "deep_pipeline"}


@pytest.mark.parametrize("name", SIM_SETS)
def test_matches_ground_truth_within_1_percent_of_step(db: Path, name: str) -> None:
    truth = json.loads((SIMULATED / name / "ground_truth.json").read_text())
    got = attribution(db, name)
    rows = 0
    for rank, steps in truth["per_rank"].items():
        for t in steps:
            (g,) = got.filter((pl.col("rank") == int(rank)) & (pl.col("step") == t["step"])
                              ).iter_rows(named=True)
            step_ns = t["window_end_ns"] - t["window_start_ns"]
            assert g["step_ns"] == step_ns
            assert g["has_successor"] == t["has_successor"]
            for cat in CATEGORIES:
                err = abs(g[f"{cat}_ns"] - t[f"{cat}_ns"])
                assert err <= 0.01 * step_ns, (rank, t["step"], cat)
            rows += 1
    assert rows == got.height


@pytest.mark.parametrize("run", ["cpu-ddp", "cpu-pipeline", "healthy", "recompute"])
def test_categories_sum_to_the_window(db: Path, run: str) -> None:
    a = attribution(db, run)
    total = sum(a[f"{c}_ns"] for c in CATEGORIES)
    assert (total == a["step_ns"]).all()
    assert (a["idle_ns"] >= 0).all()


def test_truth_has_each_phenomenon() -> None:
    """The simulated sets really contain what they are named after."""
    def share(name: str, cat: str) -> float:
        truth = json.loads((SIMULATED / name / "ground_truth.json").read_text())
        rows = [r for steps in truth["per_rank"].values() for r in steps if r["has_successor"]]
        return sum(r[f"{cat}_ns"] for r in rows) / sum(
            r["window_end_ns"] - r["window_start_ns"] for r in rows)
    assert share("recompute", "recompute") > 0.05
    assert share("recompute_reentrant", "recompute") > 0.05
    assert share("healthy", "recompute") == 0
    assert share("input_bound", "idle") > 0.3
    assert share("straggler", "straggler_wait") > 0.03
    assert share("deep_pipeline", "bubble") > 0.2
    assert share("tp_across_nodes", "exposed_comm") > 0.3


def test_synthetic_trace_exact_breakdown(tmp_path: Path) -> None:
    """Two identical ranks: GEMM 200 µs, memcpy 20 µs, all-reduce 400 µs in a 1000 µs step."""
    for r in range(2):
        write_trace(tmp_path / "j" / f"rank{r}.json.gz", kineto_trace(rank=r, steps=3))
    db = tmp_path / "s.duckdb"
    stepscope.ingest_run(tmp_path / "j", db=db, run="s")
    a = attribution(db, "s").filter(pl.col("step") == 1).sort("rank")
    for row in a.iter_rows(named=True):
        assert row["step_ns"] == 1_000_000 and row["has_successor"]
        assert (row["compute_ns"], row["memory_ns"], row["exposed_comm_ns"]) == (
            200_000, 20_000, 400_000)
        assert row["straggler_wait_ns"] == 0 and row["idle_ns"] == 380_000
    last = attribution(db, "s").filter(pl.col("step") == 3)
    # the last step has no successor: first GPU start to last GPU end of its own ops
    assert not last["has_successor"].any() and (last["step_ns"] == 670_000).all()


def test_cpu_straggler_found_and_healthy_runs_clean(db: Path) -> None:
    found = report(db, "cpu-straggler")["stragglers"]
    assert [s["rank"] for s in found] == [2]
    assert found[0]["host"] == "vm" and found[0]["waited_on_ms"] > 100
    for run in ("cpu-ddp", "cpu-ckpt", "cpu-ckpt_reent", "cpu-fsdp2", "cpu-pipeline",
                "healthy", "recompute", "deep_pipeline", "input_bound"):
        assert report(db, run)["stragglers"] == [], run


def test_simulated_straggler_found(db: Path) -> None:
    found = report(db, "straggler")["stragglers"]
    assert [s["rank"] for s in found] == [3]
    assert found[0]["host"] == "node000"


def test_recompute_only_where_checkpointing(db: Path) -> None:
    for run in ("cpu-ckpt", "cpu-ckpt_reent"):
        assert report(db, run)["breakdown_ms"]["recompute"] > 0.5, run
    for run in ("cpu-ddp", "cpu-straggler", "cpu-fsdp2", "cpu-pipeline"):
        assert report(db, run)["breakdown_ms"]["recompute"] == 0, run
    with stepscope.open(db) as store:
        per_step = store.sql(
            "SELECT rank, count(*) AS n FROM recompute_ops r "
            "JOIN cpu_ops o USING (run, rank, op_id) WHERE run = 'cpu-ckpt' "
            "AND o.name = 'aten::linear' AND o.step = 3 GROUP BY rank")
    # 2 blocks x 4 linear layers re-run in each step's backward, on every rank
    assert sorted(per_step["n"].to_list()) == [8, 8, 8, 8]


def test_pipeline_detection(db: Path) -> None:
    cpu = report(db, "cpu-pipeline")["pipeline"]
    assert (cpu["stages"], cpu["microbatches"]) == (2, 4)
    assert cpu["bubble_theory"] == pytest.approx(1 / 5)
    assert cpu["bubble_fraction"] > 0.05
    deep = report(db, "deep_pipeline")["pipeline"]
    assert (deep["stages"], deep["microbatches"]) == (4, 4)
    assert deep["bubble_theory"] == pytest.approx(3 / 7)
    assert [s["ranks"] for s in deep["per_stage"]] == [[0], [1], [2], [3]]
    assert report(db, "cpu-ddp")["pipeline"] is None


def test_layout(db: Path) -> None:
    lay = report(db, "healthy")["layout"]
    assert (lay["tp"], lay["pp"], lay["dp"]) == (2, 2, 2)
    lay = report(db, "tp_across_nodes")["layout"]
    assert (lay["tp"], lay["pp"], lay["dp"], lay["gpus_per_node"], lay["nodes"]) == (
        4, 1, 2, 2, 4)
    lay = report(db, "cpu-pipeline")["layout"]
    assert (lay["tp"], lay["pp"], lay["dp"]) == (1, 2, 2)


def test_report_json_shape(db: Path) -> None:
    r = report(db, "straggler")
    assert r["schema_version"] == REPORT_SCHEMA_VERSION
    assert r["run"]["name"] == "straggler" and r["run"]["world_size"] == 8
    assert r["run"]["device"] == "NVIDIA H100 80GB HBM3"
    assert set(r["breakdown_ms"]) == set(CATEGORIES)
    assert abs(sum(r["breakdown_ms"].values()) - r["step_time_ms"]) < 1e-6
    assert len(r["per_rank"]) == 8 and {p["rank"] for p in r["per_rank"]} == set(range(8))
    assert [s["step"] for s in r["per_step"]] == [1, 2, 3]
    assert r["per_step"][-1]["complete"] is False
    json.dumps(r)


def test_nccl_seq_is_the_preferred_match_key(tmp_path: Path) -> None:
    """With Kineto's `Seq` arg, instances match on (group, Seq) even when one rank's
    trace starts a call later (its ordinal would be off by one)."""
    for r in range(2):
        trace = kineto_trace(rank=r, steps=2)
        seq = 7 if r == 0 else 8  # rank 1's window began one collective later
        for e in trace["traceEvents"]:
            if e.get("name") == "record_param_comms" or "ncclDevKernel" in e.get("name", ""):
                e["args"]["Seq"] = seq
                if e.get("cat") == "kernel":
                    seq += 1
        write_trace(tmp_path / "j" / f"rank{r}.json.gz", trace)
    db = tmp_path / "s.duckdb"
    stepscope.ingest_run(tmp_path / "j", db=db, run="s")
    with stepscope.open(db) as store:
        waits = store.table("collective_waits", run="s").sort("rank", "coll_id")
    assert set(waits["match_method"]) == {"nccl_seq"}
    keys = waits.group_by("rank").agg(pl.col("instance_key")).sort("rank")["instance_key"]
    assert list(keys[0]) == ["pg 0 seq 7", "pg 0 seq 8"]
    assert list(keys[1]) == ["pg 0 seq 8", "pg 0 seq 9"]
    # only seq 8 exists on both ranks: one matched instance of two ranks
    assert sorted(waits["n_ranks"].to_list()) == [1, 1, 2, 2]
