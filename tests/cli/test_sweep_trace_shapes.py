"""Traces of pathological but valid shapes (issue 43, the pre-audit sweep): an event far in
the future or lasting centuries, events before the epoch, many zero-length events, deeply
nested CPU ops. Each ingests, or fails alone with one line naming the file and the field,
in bounded CPU time.

First run, before this branch: an event whose `ts` (or `dur`) fits 64 bits of ns alone but
overflows once the trace's base time is added (ts 9e15 µs, the year 2255) failed with
"could not be analysed (Out of Range Error: Overflow in addition of INT64 …)", DuckDB's
words; it now says which fields are out of range, as a `ts` beyond 64 bits did already.

Pinned elsewhere: `export` (and the Timeline's segments) of a step of 200,000 distinct
1 ns kernels ran past 5 minutes (the segments' name lookup, analyzers/sql/detail/timeline.sql,
joined each segment to every interval of its rank and category); the lookup is now
O(n log n) and tests/analyzers/test_timeline_many_kernels.py checks a step of 150,000.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from audit8_inputs import cli, raw_controls
from conftest import kineto_trace, q, write_trace


def _cpu(name: str, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 100, "tid": 100, "ts": ts,
            "dur": dur, "args": {}}


def _kernel(name: str, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts,
            "dur": dur, "args": {"device": 0, "stream": 7}}


OUT_OF_RANGE = "an event's time (ts or dur) is not a number or out of range"
# name -> (extra events, None when it ingests, else the start of its one line's problem)
SHAPES: dict[str, tuple[list[dict[str, Any]], str | None]] = {
    "cpu op in the year 2255": ([_cpu("far", 9.0e15, 1.0)], OUT_OF_RANGE),
    "kernel in the year 2255": ([_kernel("far", 9.0e15, 1.0)], OUT_OF_RANGE),
    "cpu op lasting 285 years": ([_cpu("long", 1001.0, 9.0e15)], OUT_OF_RANGE),
    "cpu op before the epoch": ([_cpu("early", -5.0e12, 1.0)], None),
    "50,000 zero-length cpu ops": ([_cpu("z", 1500.0, 0.0)] * 50_000, None),
    "5,000 nested cpu ops": ([_cpu(f"n{i}", 1001.0 + i * 0.01, 800.0 - i * 0.02)
                              for i in range(5_000)], None),
    "20,000 distinct zero-length kernels": ([_kernel(f"k{i}", 1500.0, 0.0)
                                             for i in range(20_000)], None),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_pathological_shape_is_bounded(shape: str, tmp_path: Path) -> None:
    extra, problem = SHAPES[shape]
    trace = kineto_trace(rank=0, world_size=1, steps=2, extra_events=extra)
    path = write_trace(tmp_path / "t" / "rank0.json", trace)
    db = tmp_path / "s.duckdb"
    started = time.process_time()
    rc, err, out = cli(("ingest", str(path.parent), "--db", str(db), "--run", "r", "--quiet"))
    assert time.process_time() - started < 60
    assert not raw_controls("\n".join(err)) and "Traceback" not in "\n".join(err)
    if problem is None:
        assert rc == 0, err
        assert q(db, "SELECT count(*) FROM steps WHERE run = 'r'") == [(2,)]
        rc, err, out = cli(("report", "r", "--db", str(db), "--format", "json"))
        assert rc == 0 and out.startswith("{"), err
    else:
        assert rc == 1 and len(err) == 2, err
        assert err[0].startswith(f"error: {path}: {problem}"), err
        assert err[1].startswith("error: nothing ingested into run 'r'"), err
        assert not db.exists() or q(db, "SELECT count(*) FROM runs") == [(0,)]
