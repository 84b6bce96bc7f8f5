"""The counted ops of a run (their FLOPs, analyzers/sql/mfu/flops.sql) derived once, a
batch of ranks at a time, into the temporary table counted_ops (docs/scale.md, "Memory").

MFU, the implausible-shape bound, the roofline, the advisor and the planner's calibration
all read the per-op FLOPs (the model_flops macro reads counted_ops). Derived over the
whole run at once, each of them held the working memory of the whole run's matmul, ancestor
and kernel joins, which grew with the ranks; a batch of RANKS_PER_BATCH ranks holds only
those ranks', and every join of the derivation is within a rank, so the rows are those of
the whole run. install_macros creates the table empty; `with counted_ops(con, run):` fills
it for `run` unless an enclosing block already did (the report fills it once for all its
sections) and removes the run's rows when the outermost block ends, so nothing outlives a
report or goes stale when a run is ingested again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import duckdb

from stepscope.analyzers._memory import release
from stepscope.analyzers._sql import install_macros, run_script, sql

RANKS_PER_BATCH = 64  # ranks whose counted ops are derived in one statement

_holders: dict[int, Counter[str]] = {}  # per connection: open blocks per run
_fills: dict[tuple[int, str], int] = {}  # (connection, run) -> the fill it holds now
_fill_count = [0]                        # fills so far, in this process


@contextmanager
def counted_ops(con: duckdb.DuckDBPyConnection, run: str,
                ranks_per_batch: int = RANKS_PER_BATCH) -> Iterator[None]:
    """Within the block, counted_ops holds every counted op of `run` (see the module
    docstring); the macros are installed."""
    install_macros(con)
    held = _holders.setdefault(id(con), Counter())
    try:
        if not held[run]:
            fill(con, run, ranks_per_batch)
            _fill_count[0] += 1
            _fills[(id(con), run)] = _fill_count[0]
        held[run] += 1
        yield
    finally:
        _release(con, run, held)


def _release(con: duckdb.DuckDBPyConnection, run: str, held: Counter[str]) -> None:
    """One block of `run` ended: the last one removes its rows (the table stays, empty:
    the model_flops macro reads it)."""
    held[run] -= 1
    if held[run] > 0:
        return
    del held[run]
    _fills.pop((id(con), run), None)
    run_script(con, "counted_ops/forget.sql", {"run": run})
    if not held:
        _holders.pop(id(con), None)


def current_fill(con: duckdb.DuckDBPyConnection, run: str) -> int | None:
    """Which fill of `run`'s counted ops an open block holds (None: no block is open), so
    that what is derived from them (the roofline's kernel table, read by MFU and the
    roofline) is derived once per fill and never reused after the run's rows went."""
    return _fills.get((id(con), run))


def fill(con: duckdb.DuckDBPyConnection, run: str, ranks_per_batch: int) -> None:
    """Add `run`'s counted ops to counted_ops, `ranks_per_batch` ranks per statement."""
    for lo, hi in rank_batches(con, run, ranks_per_batch):
        run_script(con, "counted_ops/fill.sql", {"run": run, "lo": lo, "hi": hi})
        release(con)  # what the batch freed, not kept for the next (analyzers/_memory.py)


def rank_batches(con: duckdb.DuckDBPyConnection, run: str,
                 ranks_per_batch: int) -> list[tuple[int, int]]:
    """(lo, hi) rank ranges, both included, of `ranks_per_batch` ranks each (the last
    fewer) that together hold every rank of `run` with CPU or GPU ops."""
    rows = con.execute(sql("counted_ops/batches.sql"),
                       {"run": run, "per": max(1, ranks_per_batch)}).fetchall()
    return [(int(lo), int(hi)) for lo, hi in rows]
