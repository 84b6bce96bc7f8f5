"""CPU-op nesting (ingest/nesting.py, read/cpu_depth.sql): the depth, the number of ops open
when an op starts, i.e. the ops before it on its thread in (start, end DESC, op_id) order
that end after its start; and the parent, the latest-starting op one level up (two levels
up for a span that outlives that one, when it encloses the span's end). Checked against
those definitions counted pair by pair (a polars join of every op with every op of its
thread: quadratic, independent of the edge sweep), on real traces with runs of
zero-length ops at one instant, and on hand-made threads."""

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


def parent_by_pairs(cpu: pl.DataFrame) -> pl.DataFrame:
    """op_id and its parent by the definition: among the ops of its thread one level up
    that started before it (at its start: before it in start order), the latest; for a
    span ending after that one, the latest two levels up if that one encloses its end."""
    ops = cpu.select("op_id", "pid", "tid", "start_ns", "end_ns", "depth")

    def latest_above(up: int) -> pl.DataFrame:
        pairs = ops.join(ops, on=["pid", "tid"], suffix="_y").filter(
            (pl.col("depth_y") == pl.col("depth") - up)
            & ((pl.col("start_ns_y") < pl.col("start_ns"))
               | ((pl.col("start_ns_y") == pl.col("start_ns"))
                  & ((pl.col("end_ns_y") > pl.col("end_ns"))
                     | ((pl.col("end_ns_y") == pl.col("end_ns"))
                        & (pl.col("op_id_y") < pl.col("op_id")))))))
        latest = pairs.sort("start_ns_y", "end_ns_y", "op_id_y",
                            descending=[False, True, False]).group_by("op_id").last()
        return latest.select("op_id", pl.col("op_id_y").alias(f"up{up}"),
                             pl.col("end_ns_y").alias(f"up{up}_end"))

    both = ops.join(latest_above(1), on="op_id", how="left").join(
        latest_above(2), on="op_id", how="left")
    outlives = pl.col("up1_end") < pl.col("end_ns")
    return both.select("op_id", pl.when(outlives & (pl.col("up2_end") >= pl.col("end_ns")))
                       .then(pl.col("up2")).otherwise(pl.col("up1")).alias("expected"))


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.parent.name)
def test_parent_is_the_latest_op_one_level_up(path: Path) -> None:
    cpu = cpu_ops(path)
    got = cpu.select("op_id", "parent_id").join(parent_by_pairs(cpu), on="op_id")
    assert got.height == cpu.height
    assert got.filter(pl.col("parent_id").ne_missing(pl.col("expected"))).height == 0
    assert got["parent_id"].null_count() < cpu.height // 2


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


def test_spans_that_outlive_their_parent_and_ops_without_a_thread(tmp_path: Path) -> None:
    """Thread 7: A [0, 100] holds S [10, 30]; R [20, 50] starts inside S and outlives it,
    so it takes A (which encloses its end). Thread 8: B [0, 40] holds T [10, 30]; U [20, 50]
    outlives both, so it keeps T. An op whose tid is no number nests on no thread."""
    def op(name: str, tid: object, ts: float, dur: float) -> dict[str, object]:
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid,
                "ts": ts, "dur": dur, "args": {}}

    trace = {"traceEvents": [op("A", 7, 0, 100), op("S", 7, 10, 20), op("R", 7, 20, 30),
                             op("B", 8, 0, 40), op("T", 8, 10, 20), op("U", 8, 20, 30),
                             op("N", "main", 5, 10)]}
    cpu = cpu_ops(write_trace(tmp_path / "rank0.json", trace))
    rows = {r["name"]: r for r in cpu.iter_rows(named=True)}
    assert {n: r["depth"] for n, r in rows.items()} == {
        "A": 0, "S": 1, "R": 2, "B": 0, "T": 1, "U": 2, "N": 0}
    ids = {n: r["op_id"] for n, r in rows.items()}
    assert {n: r["parent_id"] for n, r in rows.items()} == {
        "A": None, "S": ids["A"], "R": ids["A"], "B": None, "T": ids["B"], "U": ids["T"],
        "N": None}
    assert rows["N"]["tid"] is None
