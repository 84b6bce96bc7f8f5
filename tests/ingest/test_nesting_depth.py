"""CPU-op depth (ingest/sql/read/rank_tables.sql, cpu_depth): the number of ops open when an
op starts, i.e. the ops before it on its thread in (start, end DESC, op_id) order that end
after its start. Checked against that definition counted pair by pair (a polars join of
every op with every op of its thread: quadratic, independent of the SQL's edge sweep), on
real traces with runs of zero-length ops at one instant, and on a hand-made thread."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from conftest import REPO, write_trace

from stepscope.ingest import read_trace

HTA = REPO / "tests" / "data" / "traces" / "HolisticTraceAnalysis" / "tests" / "data"
# 728 CPU ops (124 zero-length, 12 instants with several), 2,245 (1,479; 79): small
# enough to count every pair of a thread
REAL = [HTA / "critical_path" / "alexnet" / "benchmark_result_2869224_1695835535_trace.json.gz",
        HTA / "cupti_profiler" / "benchmark_result_924719_1679055439_trace.json.gz"]


def cpu_ops(path: Path) -> pl.DataFrame:
    frame = pl.from_arrow(read_trace(path).tables["cpu_ops"])
    assert isinstance(frame, pl.DataFrame)
    return frame


def depth_by_pairs(cpu: pl.DataFrame) -> pl.DataFrame:
    """op_id and the count of the ops of its thread before it that are still open."""
    ops = cpu.select("op_id", "pid", "tid", "start_ns", "end_ns")
    pairs = ops.join(ops, on=["pid", "tid"], suffix="_y").filter(
        ((pl.col("start_ns_y") < pl.col("start_ns"))
         | ((pl.col("start_ns_y") == pl.col("start_ns"))
            & ((pl.col("end_ns_y") > pl.col("end_ns"))
               | ((pl.col("end_ns_y") == pl.col("end_ns"))
                  & (pl.col("op_id_y") < pl.col("op_id"))))))
        & (pl.col("end_ns_y") > pl.col("start_ns")))
    counted = pairs.group_by("op_id").agg(pl.len().alias("expected"))
    return ops.select("op_id").join(counted, on="op_id", how="left").with_columns(
        pl.col("expected").fill_null(0))


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.parent.name)
def test_depth_counts_the_ops_open_at_each_start(path: Path) -> None:
    cpu = cpu_ops(path)
    zero = cpu.filter(pl.col("dur_ns") == 0)
    assert zero.group_by("pid", "tid", "start_ns").len().filter(pl.col("len") > 1).height > 5
    assert cpu.filter(pl.col("pid").is_null() | pl.col("tid").is_null()).height == 0
    got = cpu.select("op_id", "depth").join(depth_by_pairs(cpu), on="op_id")
    assert got.height == cpu.height
    assert (got["depth"] == got["expected"]).all()
    assert got["depth"].max() >= 3


def test_zero_length_runs_and_touching_ops(tmp_path: Path) -> None:
    """A [0, 10] holds D [2, 5], which holds the zero-length B and C at 2 µs; E starts
    where A ends (A does not enclose it)."""
    def op(name: str, ts: float, dur: float) -> dict[str, object]:
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 7,
                "ts": ts, "dur": dur, "args": {}}

    trace = {"traceEvents": [op("A", 0, 10), op("B", 2, 0), op("C", 2, 0), op("D", 2, 3),
                             op("E", 10, 5)]}
    cpu = cpu_ops(write_trace(tmp_path / "rank0.json", trace))
    rows = {r["name"]: r for r in cpu.iter_rows(named=True)}
    assert {n: r["depth"] for n, r in rows.items()} == {"A": 0, "D": 1, "B": 2, "C": 2, "E": 0}
    assert rows["D"]["parent_id"] == rows["A"]["op_id"]
    assert rows["B"]["parent_id"] == rows["D"]["op_id"] == rows["C"]["parent_id"]
    assert rows["A"]["parent_id"] is None and rows["E"]["parent_id"] is None
