"""The Timeline's segments (detail/timeline.sql, also the export's breakdown) on a step of
150,000 kernels of distinct names: the name of each segment used to come from a join of
every segment to every interval of its category, quadratic (50,000 kernels 10.4 s a step,
this step over 60 s, 200,000 over 5 minutes for an export); it is now found in
O(n log n), this test in seconds. It pins what the segments are, not how long they take."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest
from conftest import kineto_trace, write_trace

from stepscope import ingest_run
from stepscope.analyzers._sql import install_macros, sql

N = 150_000
FIRST_US, PERIOD_US, DUR_US = 1710.0, 0.002, 0.001  # after the step's NCCL kernel
LONG_US = (1750.0, 1800.0)  # one long kernel on another stream, over 25,000 short ones


def _kernels() -> list[dict[str, object]]:
    """N short kernels of distinct names on stream 9, one long one on stream 11."""
    events: list[dict[str, object]] = [
        {"ph": "X", "cat": "kernel", "name": f"short_{i:05d}", "pid": 0, "tid": 9,
         "ts": round(FIRST_US + i * PERIOD_US, 3), "dur": DUR_US,
         "args": {"device": 0, "stream": 9}} for i in range(N)]
    events.append({"ph": "X", "cat": "kernel", "name": "long", "pid": 0, "tid": 11,
                   "ts": LONG_US[0], "dur": LONG_US[1] - LONG_US[0],
                   "args": {"device": 0, "stream": 11}})
    return events


@pytest.fixture(scope="module")
def segments(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, np.ndarray], int]:
    """Rank 0's segments of step 1 and its window's length (ns)."""
    root = tmp_path_factory.mktemp("many")
    write_trace(root / "t" / "rank0.json", kineto_trace(rank=0, world_size=1, steps=2,
                                                        extra_events=_kernels()))
    db = root / "db.duckdb"
    ingest_run([root / "t"], db=db, run="many")
    con = duckdb.connect(str(db), read_only=True)
    try:
        install_macros(con)
        (ws, we), = con.execute("SELECT window_start_ns, window_end_ns FROM step_attribution "
                                "WHERE run = 'many' AND step = 1 AND rank = 0").fetchall()
        seg = con.execute(sql("detail/timeline.sql"),
                          {"run": "many", "step": 1, "ranks": [0]}).fetchnumpy()
    finally:
        con.close()
    return {k: np.asarray(v) for k, v in seg.items()}, int(we - ws)


def _rel_ns(us: float, base_us: float) -> int:
    return round((us - base_us) * 1000)


def test_every_short_kernel_is_its_own_segment(segments) -> None:
    seg, _ = segments
    names = seg["name"].astype(object)
    short = np.array([isinstance(n, str) and n.startswith("short_") for n in names])
    assert short.sum() == N
    assert len(set(names[short])) == N
    idx = np.array([int(n[6:]) for n in names[short]])
    start, end = seg["start_ns"][short], seg["end_ns"][short]
    # each short kernel lasts 1 ns, one every 2 ns, named even where `long` runs too
    # (it started later, so it is the one named)
    assert np.all(end - start == 1)
    assert np.all(np.diff(start[np.argsort(idx)]) == 2)
    assert np.all(seg["cat"][short] == 1)


def test_gaps_under_the_long_kernel_are_named_after_it(segments) -> None:
    seg, _ = segments
    names = seg["name"].astype(object)
    short = np.array([isinstance(n, str) and n.startswith("short_") for n in names])
    long = names == "long"
    s0 = int(seg["start_ns"][short].min())  # FIRST_US on the window's clock
    lo, hi = (s0 + _rel_ns(t, FIRST_US) for t in LONG_US)
    # the gaps between short kernels as laid out, and those under the long kernel
    gap_s = s0 + np.arange(N - 1) * 2 + 1
    under = (gap_s >= lo) & (gap_s + 1 <= hi)
    assert under.sum() == 25_000
    # each gap under it is one segment named `long`; nothing else is
    assert long.sum() == under.sum()
    assert np.array_equal(np.sort(seg["start_ns"][long]), gap_s[under])
    assert np.all(seg["end_ns"][long] - seg["start_ns"][long] == 1)
    # identity: the long kernel's time is its named gaps plus the short kernels in it
    inside = short & (seg["start_ns"] >= lo) & (seg["end_ns"] <= hi)
    assert (seg["end_ns"][long] - seg["start_ns"][long]).sum() + \
        (seg["end_ns"][inside] - seg["start_ns"][inside]).sum() == hi - lo
    # the other gaps between short kernels are idle (7) and unnamed
    idle = (seg["cat"] == 7) & (seg["start_ns"] > s0) & (seg["end_ns"] < s0 + 2 * N)
    assert idle.sum() == (N - 1) - under.sum()
    assert all(n is None for n in names[idle])


def test_segments_tile_the_window(segments) -> None:
    seg, window = segments
    order = np.argsort(seg["start_ns"])
    start, end = seg["start_ns"][order], seg["end_ns"][order]
    assert start[0] == 0 and end[-1] == window
    assert np.array_equal(start[1:], end[:-1])
