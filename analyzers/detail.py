"""Detail behind the report for the dashboard's drill-down pages: the rank x step grid,
one step's attribution as time segments (the Timeline), and the top kernels.

These are raw-data views, not new report numbers: each reads the tables `stepscope
ingest` wrote with one SQL file (analyzers/sql/) and returns a small typed, bounded
structure (columns as tuples). The timeline's segments add up, per rank, exactly to the
rank's `step_attribution` row (tests check it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import duckdb

from stepscope.analyzers._sql import install_macros, sql

CATEGORY_CODES = {1: "compute", 2: "recompute", 3: "exposed_comm", 4: "straggler_wait",
                  5: "bubble", 6: "memory", 7: "idle"}
MAX_RECTANGLES = 50_000
MAX_TIMELINE_RANKS = 16


@dataclass(frozen=True)
class RankStepGrid:
    """Long-format rank x step grid of one run (one entry per rank and step)."""

    rank: tuple[int, ...]
    host: tuple[str | None, ...]
    step: tuple[int, ...]
    complete: tuple[bool, ...]
    step_ms: tuple[float, ...]
    wait_suffered_ms: tuple[float, ...]  # the rank's attributed straggler wait
    wait_caused_ms: tuple[float, ...]    # others' collective wait where it arrived last


@dataclass(frozen=True)
class StepTimeline:
    """One step of selected ranks as rectangles (start/end in ms from each rank's own
    window start: hosts' clocks differ). `bin_ms` is set when the exact segments would
    exceed the rectangle budget and the window was cut into equal bins instead, each
    shown as the category that holds most of its time."""

    run: str
    step: int
    ranks: tuple[int, ...]
    window_ms: tuple[float, ...]  # per rank in `ranks`
    rank: tuple[int, ...]
    start_ms: tuple[float, ...]
    end_ms: tuple[float, ...]
    category: tuple[str, ...]
    bin_ms: float | None
    label: tuple[str | None, ...] = ()  # what ran: the GPU op or the collective and group

    @property
    def rectangles(self) -> int:
        return len(self.rank)


@dataclass(frozen=True)
class KernelRow:
    """One GPU kernel (or memory op): mean ms per step over ranks and its spread."""

    name: str
    kind: str
    mean_ms: float
    min_ms: float
    max_ms: float
    std_ms: float
    calls_per_step: float
    slowest_rank: int
    fastest_rank: int
    share_of_gpu_time: float


def rank_step_grid(con: duckdb.DuckDBPyConnection, run: str) -> RankStepGrid:
    rows = con.execute(sql("detail/rank_steps.sql"), {"run": run}).fetchall()
    cols = list(zip(*rows, strict=True)) if rows else [()] * 7
    return RankStepGrid(rank=tuple(cols[0]), host=tuple(cols[1]), step=tuple(cols[2]),
                        complete=tuple(cols[3]), step_ms=tuple(cols[4]),
                        wait_suffered_ms=tuple(cols[5]), wait_caused_ms=tuple(cols[6]))


def step_timeline(con: duckdb.DuckDBPyConnection, run: str, step: int,
                  ranks: Sequence[int], max_rectangles: int = MAX_RECTANGLES) -> StepTimeline:
    """The attributed segments of `step` on `ranks` (at most MAX_TIMELINE_RANKS), exact
    when they fit in `max_rectangles`, else binned to fit."""
    chosen = sorted(set(ranks))[:MAX_TIMELINE_RANKS]
    params = {"run": run, "step": step, "ranks": chosen}
    windows = con.execute(sql("detail/step_windows.sql"), params).fetchall()
    install_macros(con)
    query = sql("detail/timeline.sql")
    rows = con.execute(query, {**params, "bins": None}).fetchmany(max_rectangles + 1)
    bins = None
    if len(rows) > max_rectangles:
        bins = max(1, max_rectangles // max(1, len(chosen)))
        rows = con.execute(query, {**params, "bins": bins}).fetchall()
    window_ms = tuple(w / 1e6 for _, w in windows)
    longest = max(window_ms, default=0.0)
    return StepTimeline(
        run=run, step=step, ranks=tuple(r for r, _ in windows), window_ms=window_ms,
        rank=tuple(r[0] for r in rows), start_ms=tuple(r[1] / 1e6 for r in rows),
        end_ms=tuple(r[2] / 1e6 for r in rows),
        category=tuple(CATEGORY_CODES[r[3]] for r in rows),
        bin_ms=None if bins is None else longest / bins, label=tuple(r[4] for r in rows))


def top_kernels(con: duckdb.DuckDBPyConnection, run: str, limit: int = 30,
                ) -> tuple[KernelRow, ...]:
    """The GPU ops with the most time per step (mean over ranks), with their spread."""
    rows = con.execute(sql("detail/kernels.sql"), {"run": run, "limit": limit}).fetchall()
    return tuple(KernelRow(*row) for row in rows)


def timeline_ranks(stragglers: Sequence[int], stage_ranks: Sequence[Sequence[int]],
                   all_ranks: Sequence[int], limit: int = MAX_TIMELINE_RANKS) -> list[int]:
    """Default ranks for the Timeline: the stragglers, the first rank of every pipeline
    stage, then the lowest ranks, up to `limit`."""
    chosen: list[int] = []
    for rank in [*stragglers, *(s[0] for s in stage_ranks if s), *sorted(all_ranks)]:
        if rank in all_ranks and rank not in chosen and len(chosen) < limit:
            chosen.append(rank)
    return sorted(chosen)
