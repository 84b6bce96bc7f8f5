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
from typing import Any

import duckdb
import numpy as np
import numpy.typing as npt

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
    # per rank in `ranks`: where its window starts on the aligned clock (docs/timeline.md),
    # in ms after the earliest of them
    offset_ms: tuple[float, ...] = ()

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
                  ranks: Sequence[int], max_rectangles: int = MAX_RECTANGLES,
                  pixels: int | None = None) -> StepTimeline:
    """The attributed segments of `step` on `ranks` (at most MAX_TIMELINE_RANKS): exact
    when they fit in `max_rectangles` and (given `pixels`, the chart's width) none is
    thinner than a pixel; else drawn by time in equal bins (`draw_by_time`), so that each
    category's share of what is drawn is its share of the time."""
    chosen = sorted(set(ranks))[:MAX_TIMELINE_RANKS]
    params = {"run": run, "step": step, "ranks": chosen}
    windows = con.execute(sql("detail/step_windows.sql"), params).fetchall()
    install_macros(con)
    seg = con.execute(sql("detail/timeline.sql"), params).fetchnumpy()
    window_ns = np.array([w for _, w, _ in windows], dtype=np.int64)
    longest = int(window_ns.max()) if window_ns.size else 0
    n = int(seg["rank"].size)
    bins = None
    if n > max_rectangles:
        bins = max(1, max_rectangles // max(1, len(chosen)))
    if pixels and n and longest and bool(
            ((seg["end_ns"] - seg["start_ns"]) * pixels < longest).any()):
        bins = min(bins or pixels, pixels)
    lanes = tuple(int(r) for r, _, _ in windows)
    window_ms = tuple(w / 1e6 for _, w, _ in windows)
    offset_ms = tuple(o / 1e6 for _, _, o in windows)
    if bins is None:
        return StepTimeline(
            run=run, step=step, ranks=lanes, window_ms=window_ms, offset_ms=offset_ms,
            rank=tuple(int(r) for r in seg["rank"]),
            start_ms=tuple(float(v) / 1e6 for v in seg["start_ns"]),
            end_ms=tuple(float(v) / 1e6 for v in seg["end_ns"]),
            category=tuple(CATEGORY_CODES[int(c)] for c in seg["cat"]), bin_ms=None,
            label=tuple(seg["name"].tolist()))
    width = longest / bins
    rank, start, end, cat, label = draw_by_time(seg, lanes, width, bins)
    return StepTimeline(run=run, step=step, ranks=lanes, window_ms=window_ms,
                        offset_ms=offset_ms, rank=rank, start_ms=start, end_ms=end,
                        category=cat, bin_ms=width / 1e6, label=label)


def bin_times(s: npt.NDArray[np.int64], e: npt.NDArray[np.int64], cat: npt.NDArray[Any],
              edges: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Time (ns) of each category code 1-7 in each bin between `edges`, from one rank's
    segments (non-overlapping): the covered time of a category up to x is the sum of
    clip(x - s, 0, e - s) over its segments, read at the edges (sorted, cumulative)."""
    out = np.zeros((edges.size - 1, len(CATEGORY_CODES)))
    for code in CATEGORY_CODES:
        pick = cat == code
        if not pick.any():
            continue
        cs, ce = s[pick].astype(np.float64), e[pick].astype(np.float64)
        order = np.argsort(cs)
        cs, ce = cs[order], ce[order]
        before = np.concatenate([[0.0], np.cumsum(ce - cs)])
        i = np.searchsorted(cs, edges, side="right") - 1
        j = np.maximum(i, 0)
        covered = np.where(i >= 0, before[j] + np.clip(edges - cs[j], 0, ce[j] - cs[j]), 0.0)
        out[:, code - 1] = np.diff(covered)
    return out


def dither(times: npt.NDArray[np.float64], full: float) -> npt.NDArray[np.int64]:
    """One category per bin (-1: an empty bin) such that the bins of each category track
    its time: each bin adds its categories' shares to a running credit and goes to the
    category with most credit, which pays the bin's fill back (error diffusion; `full`: a
    whole bin's ns). Every category's drawn width is its time within one bin, thin
    categories included (a majority rule would drop a 6 µs collective from every bin; a
    bar per segment would draw it a pixel wide)."""
    width = times.sum(axis=1)
    credit = np.zeros(times.shape[1])
    out = np.full(times.shape[0], -1, dtype=np.int64)
    for b in range(times.shape[0]):  # one step per bin (a pixel), never per event
        if width[b] <= 0:
            continue
        credit += times[b] / full
        pick = int(np.argmax(credit))
        credit[pick] -= width[b] / full
        out[b] = pick + 1
    return out


def draw_by_time(seg: dict[str, Any], ranks: Sequence[int], width: float, bins: int,
                 ) -> tuple[tuple[int, ...], tuple[float, ...], tuple[float, ...],
                            tuple[str, ...], tuple[str | None, ...]]:
    """The segments as rectangles of whole bins of `width` ns, a category per bin
    (`dither`), adjacent bins of one category merged: (rank, start ms, end ms, category,
    label), a rectangle's label the name of the op of its category with most time in it."""
    out: list[tuple[int, float, float, str, str | None]] = []
    edges = np.arange(bins + 1, dtype=np.float64) * width
    for r in ranks:
        pick = seg["rank"] == r
        s, e, c, names = seg["start_ns"][pick], seg["end_ns"][pick], seg["cat"][pick], \
            seg["name"][pick]
        drawn = dither(bin_times(s, e, c, edges), width)
        cut = np.flatnonzero(np.diff(drawn) != 0) + 1
        for lo, hi in zip(np.r_[0, cut], np.r_[cut, drawn.size], strict=True):
            if drawn[lo] > 0:
                out.append((int(r), lo * width / 1e6, hi * width / 1e6,
                            CATEGORY_CODES[int(drawn[lo])],
                            _main_op(s, e, c, names, int(drawn[lo]), lo * width, hi * width)))
    cols = list(zip(*out, strict=True)) if out else [(), (), (), (), ()]
    return tuple(cols[0]), tuple(cols[1]), tuple(cols[2]), tuple(cols[3]), tuple(cols[4])


def _main_op(s: npt.NDArray[np.int64], e: npt.NDArray[np.int64], cat: npt.NDArray[Any],
             names: npt.NDArray[Any], code: int, lo: float, hi: float) -> str | None:
    """The name of the segment of category `code` with most time within [lo, hi), else
    (a bin given the category by dithering, its time just outside) the nearest one."""
    mine = cat == code
    if not mine.any():
        return None
    overlap = np.where(mine, np.minimum(e, hi) - np.maximum(s, lo), -np.inf)
    name = names[int(np.argmax(overlap))]
    return None if name is None else str(name)


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
