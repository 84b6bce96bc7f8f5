"""The per-rank passes the report reads in batches of ranks (analyzers/flops/counted_ops.py,
docs/scale.md "Memory"): the counted ops (mfu/flops.sql), the roofline's kernels
(roofline/kernels.sql) and the critical-path graph (critical_path/graph.sql) one rank at a
time are row for row those of every rank at once, a report leaves counted_ops empty, and
nested blocks derive a run's ops once."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest

import stepscope
from stepscope.analyzers.critical_path import graph as cp_graph
from stepscope.analyzers.flops import counted_ops as co
from stepscope.analyzers.flops.roofline import kernel_table
from stepscope.analyzers.report import build_report
from stepscope.targets import plan

# shaped ops on several ranks, recompute (two flavours), a pipeline, GPU-less CPU ops
RUNS = ("recompute", "recompute_reentrant", "hidden_straggler", "diff_scaled",
        "moe_roofline", "pipeline_imbalance", "fp32_v100", "cpu-ckpt")
ALL_AT_ONCE = 1 << 20
BOUND = 2e15  # FLOP/s: a bound that leaves some ops out would show a batch's mistakes


def _rows(con: duckdb.DuckDBPyConnection, query: str) -> list[tuple[Any, ...]]:
    return sorted(con.execute(query).fetchall(), key=repr)


def _counted(con: duckdb.DuckDBPyConnection, run: str, per: int) -> list[tuple[Any, ...]]:
    with co.counted_ops(con, run, ranks_per_batch=per):
        return _rows(con, "SELECT * FROM counted_ops")


def _kernels(con: duckdb.DuckDBPyConnection, run: str, per: int) -> list[tuple[Any, ...]]:
    kernel_table(con, run, BOUND, ranks_per_batch=per)
    return _rows(con, "SELECT * FROM rf_kernels")


@pytest.mark.parametrize("run", RUNS)
def test_one_rank_at_a_time_gives_the_rows_of_all_ranks_at_once(sample_db: Path,
                                                                 run: str) -> None:
    with stepscope.open(sample_db) as store:
        con = store.con
        assert len(co.rank_batches(con, run, 1)) > 1
        whole = _counted(con, run, ALL_AT_ONCE)
        assert whole == _counted(con, run, 1)
        assert whole or run.startswith("cpu-")
        assert _kernels(con, run, ALL_AT_ONCE) == _kernels(con, run, 1)


# collectives across ranks, send/recv pairs across stages, CPU waits, many names and ops
GRAPH_RUNS = ("hidden_straggler", "pipeline_imbalance", "moe_roofline", "diff_scaled",
              "recompute", "fp32_v100", "cpu-ckpt")


@pytest.mark.parametrize("run", GRAPH_RUNS)
def test_the_graph_one_rank_at_a_time_is_the_graph_of_all_ranks_at_once(
        sample_db: Path, run: str) -> None:
    """Every array of the graph, the names and ops dictionaries and the CPU waits found:
    the batches' node numbers, codes and collective instances are the run's."""
    with stepscope.open(sample_db) as store:
        whole, whole_edges = cp_graph.load(store.con, run, ranks_per_batch=ALL_AT_ONCE)
        one, one_edges = cp_graph.load(store.con, run, ranks_per_batch=1)
    assert whole.n or run.startswith("cpu-")
    pairs: list[tuple[Any, Any]] = [(whole, one), (whole_edges, one_edges)]
    for field, got, want in [(f, p, q) for p, q in pairs for f in dataclasses.fields(p)]:
        a, b = getattr(got, field.name), getattr(want, field.name)
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and np.array_equal(a, b), field.name
        else:
            assert a == b, field.name
    if run == "pipeline_imbalance":  # send/recv pairs across batches
        assert (whole.inst >= 0).any() and (whole.kind == cp_graph.NODE_KINDS.index("p2p")).any()


def test_the_graph_is_the_same_when_its_reserved_arrays_grow(
        sample_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no room reserved for edges, the edge arrays grow batch after batch (copying)
    and hold the same edges."""
    with stepscope.open(sample_db) as store:
        _, reserved = cp_graph.load(store.con, "pipeline_imbalance", ranks_per_batch=1)
        monkeypatch.setattr(cp_graph, "EDGES_PER_NODE", 0)
        _, grown = cp_graph.load(store.con, "pipeline_imbalance", ranks_per_batch=1)
    for field in dataclasses.fields(reserved):
        assert np.array_equal(getattr(reserved, field.name), getattr(grown, field.name))
    assert reserved.dst.size > 1


def test_batches_cover_every_rank_once(sample_db: Path) -> None:
    with stepscope.open(sample_db) as store:
        batches = co.rank_batches(store.con, "hidden_straggler", 5)
        (ranks,), = store.con.execute(
            "SELECT list(DISTINCT rank ORDER BY rank) FROM gpu_ops WHERE run = $run",
            {"run": "hidden_straggler"}).fetchall()
    assert [len([r for r in ranks if lo <= r <= hi]) for lo, hi in batches] == [5] * 6 + [2]
    assert batches[0][0] == min(ranks) and batches[-1][1] == max(ranks)


@pytest.fixture
def fills(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The runs whose counted ops are derived (counted_ops.fill), in order."""
    seen: list[str] = []
    real_fill = co.fill

    def fill(con: duckdb.DuckDBPyConnection, run: str, per: int) -> None:
        seen.append(run)
        real_fill(con, run, per)

    monkeypatch.setattr(co, "fill", fill)
    return seen


def test_a_report_derives_the_ops_once_and_leaves_none(sample_db: Path,
                                                       fills: list[str]) -> None:
    with stepscope.open(sample_db) as store:
        build_report(store.con, "recompute")
        (left,), = store.con.execute("SELECT count(*) FROM counted_ops").fetchall()
    assert fills == ["recompute"]  # MFU, the bound, the roofline and the advisor share it
    assert left == 0
    assert not co._holders


def test_a_calibrated_plan_derives_the_ops_once(sample_db: Path, fills: list[str]) -> None:
    """`plan --from`: the report it calibrates on and the calibration's kernel rates read
    the same counted ops, derived once; none are left after."""
    built = plan("diff_base", db=sample_db)
    assert built.plan.calibration is not None and built.plan.plans
    assert fills == ["diff_base"]
    assert not co._holders
