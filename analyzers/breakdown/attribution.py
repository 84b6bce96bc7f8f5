"""Step-time attribution (docs/attribution.md): materialized per run, read as frames.

`materialize` runs inside the ingest transaction (it writes recompute_ops,
collective_waits and step_attribution); the readers work on read-only connections.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING

import duckdb

from stepscope.analyzers import clocks
from stepscope.analyzers._sql import run_script, sql
from stepscope.analyzers.comm.local_ops import local_op_keys
from stepscope.analyzers.results import CATEGORIES
from stepscope.ingest.db import fit_memory_limit, threads_for, threads_limit

if TYPE_CHECKING:
    import polars as pl

__all__ = ["CATEGORIES", "SHORT_GAP_NS", "materialize", "rank_batches", "trace_breakdown"]


# An idle gap this short, and this much of a longer gap after the launch call, is launch
# overhead (docs/attribution.md, "Idle: why the GPU waited").
SHORT_GAP_NS = 30_000


# The per-rank attribution runs on batches of consecutive ranks: at most this many ranks
# and, past the first rank, about this many trace events (a 35 MB real trace has ~110k),
# so its scratch holds one batch whatever the job's size; the writer's memory
# limit is sized to the largest batch (ingest.db.fit_memory_limit).
BATCH_RANKS = 64
BATCH_EVENTS = 1_000_000
# The range of DuckDB's INTEGER, the type of `rank`.
INT_MIN, INT_MAX = -(2**31), 2**31 - 1


def materialize(con: duckdb.DuckDBPyConnection, run: str, batch_ranks: int = BATCH_RANKS,
                batch_events: int = BATCH_EVENTS) -> None:
    """Compute and store the attribution tables of `run` (replacing earlier rows; the
    tables are part of the schema, ingest/sql/schema/derived.sql and the migrations).

    First the cross-rank part, the instances of every rank's collectives and their
    shortest durations (`match_collectives`: attribution/collective_match.sql, itself
    per batch of ranks), then per batch of ranks the rest (attribution.sql), and the
    split of its idle time (idle.sql, which reads attribution.sql's scratch); last the
    clock alignment (analyzers/clocks.py, per batch of whole hosts, in the room it
    needs). A batch's intermediate results
    are Parquet files in a private temporary folder (attribution/scratch.sql says why),
    overwritten by the next batch. The memory limit and the thread count are sized to the
    largest batch (ingest.db.fit_memory_limit, threads_for). Every step of the batch
    part is per rank, so the results do not depend on the batching. Only the macros the
    attribution uses (cpu_self_time; blocking_copies, the idle split's CPU waits shared
    with the critical path) are installed: the analyzers' others cost 10 ms here for
    nothing, and every reader installs what it uses (`install_macros`)."""
    run_script(con, "attribution/macros.sql", {})
    run_script(con, "waits/macros.sql", {})
    batches = rank_batches(con, run, batch_ranks, batch_events)
    largest = max((events for _, _, events in batches), default=0)
    with tempfile.TemporaryDirectory(prefix="stepscope-attribution-") as scratch, \
            fit_memory_limit(con, largest) as room, \
            threads_limit(con, threads_for(largest)):
        run_script(con, "attribution/scratch.sql", {"dir": scratch})
        match_collectives(con, run, [(lo, hi) for lo, hi, _ in batches], room.shed)
        for lo, hi, _ in batches:
            room.shed()  # what the steps before cached, kept, grew with the ranks
            params = {"run": run, "lo": lo, "hi": hi}
            run_script(con, "attribution/attribution.sql", params)
            run_script(con, "attribution/idle.sql", {**params, "short_gap_ns": SHORT_GAP_NS})
        run_script(con, "attribution/scratch_reset.sql", {})
        room.shed()
        clocks.materialize(con, run, room, batch_ranks)
        room.shed()  # the commit starts from the run, not from the attribution's cache


def match_collectives(con: duckdb.DuckDBPyConnection, run: str,
                      batches: list[tuple[int, int]], shed: Callable[[], None]) -> None:
    """The cross-rank matching of `run`'s collective calls into collective_waits
    (attribution/collective_match.sql says how), one batch of ranks at a time: each
    instance's parts per batch, then the instances, then each batch's waits, with DuckDB's
    cache shed before each batch, so that the matching holds one batch's calls and a
    narrow row per instance, not every call of the run. The ranges are widened to meet
    (`covering`), so that every call is in one, whatever ranks the batches name."""
    ranges = covering(batches)
    params = {"run": run, "local_ops": local_op_keys()}
    run_script(con, "attribution/collective_match.sql", params)
    for step in ("attribution/collective_parts.sql", "attribution/collective_waits.sql"):
        for lo, hi in ranges:
            shed()
            run_script(con, step, {**params, "lo": lo, "hi": hi})
        if step.endswith("parts.sql"):
            run_script(con, "attribution/collective_instances.sql", {})
    run_script(con, "attribution/collective_match_end.sql", {})


def covering(batches: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """`batches` (ascending rank ranges) widened to cover every rank value: the first from
    the least INTEGER, each next one from the rank after the one before, the last to the
    greatest INTEGER; one range of all when there is none."""
    if not batches:
        return [(INT_MIN, INT_MAX)]
    ends = [hi for _, hi in batches[:-1]] + [INT_MAX]
    return [(INT_MIN if i == 0 else ends[i - 1] + 1, hi) for i, hi in enumerate(ends)]


def rank_batches(con: duckdb.DuckDBPyConnection, run: str, max_ranks: int,
                 max_events: int) -> list[tuple[int, int, int]]:
    """Consecutive ranks of `run` as (first, last, events) ranges of at most `max_ranks`
    ranks and at most `max_events` events (a bigger rank alone)."""
    batches: list[list[int]] = []  # [first, last, ranks, events]
    for rank, size in con.execute(sql("attribution/rank_sizes.sql"), {"run": run}).fetchall():
        last = batches[-1] if batches else None
        if last is None or last[2] >= max_ranks or last[3] + size > max_events:
            batches.append([rank, rank, 1, size])
        else:
            last[1], last[2], last[3] = rank, last[2] + 1, last[3] + size
    return [(first, last, events) for first, last, _, events in batches]


def trace_breakdown(con: duckdb.DuckDBPyConnection, run: str,
                    hta_window: bool = True) -> pl.DataFrame:
    """Whole-trace GPU breakdown per rank with HTA's temporal-breakdown definitions
    (span, busy, compute, non-compute, idle in ns); `hta_window` keeps only GPU ops
    launched before the last step, as HTA's loader does."""
    return con.sql(sql("attribution/trace_breakdown.sql"),
                   params={"run": run, "hta_window": hta_window}).pl()
