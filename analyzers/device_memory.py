"""Memory per rank (docs/memory.md): the peak allocated and reserved device memory of each
rank and step from the allocator's `[memory]` events (profile_memory=True), against the
device's memory (deviceProperties totalGlobalMem), and the ops whose allocations are live
at the peak. The advisor's ZeRO and recompute memory checks read it."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from stepscope.analyzers._sql import fetch_rows, run_script
from stepscope.analyzers.results import MemoryOp, MemorySection, MemoryStep, RankMemory

if TYPE_CHECKING:
    from stepscope.analyzers.context import RunContext

OPS_AT_PEAK = 5
NO_EVENTS = ("no memory events in the traces (profile with profile_memory=True): peak "
             "memory per rank is not known")
DELTA = ("the traces carry only each event's Bytes (the 2021 format, no Total Allocated / "
         "Reserved): allocated memory is counted from the trace's start, whose own "
         "allocations are unknown, so the peak is a rise over that start; reserved memory "
         "and the live allocations at the peak (no addresses) are not known")


class _Rank(TypedDict):
    """A row of analyzers/sql/memory/ranks.sql."""
    rank: int
    host: str | None
    source: str
    events: int
    peak_allocated: int
    peak_reserved: int | None
    peak_event: int
    peak_ts_ns: int
    peak_step: int | None
    op_at_peak: str | None
    device_memory: int | None


class _Step(TypedDict):
    """A row of analyzers/sql/memory/steps.sql."""
    rank: int
    step: int
    peak_allocated: int | None
    peak_reserved: int | None


class _Live(TypedDict):
    """A row of analyzers/sql/memory/at_peak.sql."""
    rank: int
    op: str
    bytes: int
    allocations: int


def memory_section(ctx: RunContext) -> MemorySection | None:
    """The `memory` section, or None when the run has no GPU memory events (the report
    then says so in a note)."""
    con, run = ctx.con, ctx.run
    run_script(con, "memory/timeline.sql", {"run": run})
    ranks = fetch_rows(con, "memory/ranks.sql", {"run": run}, _Rank)
    if not ranks:
        return None
    steps = fetch_rows(con, "memory/steps.sql", {}, _Step)
    peaks = [{"rank": r["rank"], "ts_ns": r["peak_ts_ns"], "event_id": r["peak_event"]}
             for r in ranks if r["source"] == "totals"]
    live = (fetch_rows(con, "memory/at_peak.sql", {"run": run, "peaks": peaks,
                                                  "top": OPS_AT_PEAK}, _Live)
            if peaks else [])
    steps_of: dict[int, list[_Step]] = {}
    for st in steps:
        steps_of.setdefault(int(st["rank"]), []).append(st)
    live_of: dict[int, list[_Live]] = {}
    for x in live:
        live_of.setdefault(int(x["rank"]), []).append(x)
    rows = tuple(_rank(r, steps_of.get(int(r["rank"]), []), live_of.get(int(r["rank"]), []))
                 for r in ranks)
    top = max(rows, key=lambda r: (r.peak_reserved_bytes or r.peak_allocated_bytes,
                                   r.peak_allocated_bytes, -r.rank))
    delta = any(r["source"] == "bytes_delta" for r in ranks)
    return MemorySection(
        source="bytes_delta" if delta else "totals",
        peak_allocated_bytes=max(r.peak_allocated_bytes for r in rows),
        peak_reserved_bytes=max((r.peak_reserved_bytes for r in rows
                                 if r.peak_reserved_bytes is not None), default=None),
        peak_rank=top.rank, device_memory_bytes=top.device_memory_bytes, ranks=rows,
        message=_message(rows, delta, len(ranks), ctx.info.ranks))


def _rank(r: _Rank, steps: list[_Step], live: list[_Live]) -> RankMemory:
    total = r["device_memory"]
    reserved = r["peak_reserved"] if r["source"] == "totals" else None
    allocated = max(0, int(r["peak_allocated"]))
    used = reserved if reserved is not None else None
    return RankMemory(
        rank=int(r["rank"]), host=r["host"], device_memory_bytes=total,
        peak_allocated_bytes=allocated, peak_reserved_bytes=reserved,
        peak_step=r["peak_step"],
        reserved_share=used / total if used is not None and total else None,
        headroom_bytes=total - used if used is not None and total else None,
        op_at_peak=r["op_at_peak"],
        ops_at_peak=tuple(MemoryOp(op=x["op"], bytes=int(x["bytes"]),
                                   allocations=int(x["allocations"])) for x in live),
        steps=tuple(MemoryStep(step=int(s["step"]), peak_allocated_bytes=_int(s["peak_allocated"]),
                               peak_reserved_bytes=(_int(s["peak_reserved"])
                                                    if reserved is not None else None))
                    for s in steps))


def _int(value: int | float | None) -> int | None:
    return None if value is None else int(value)


def _message(rows: tuple[RankMemory, ...], delta: bool, n_ranks: int,
             traced: int | None) -> str | None:
    out = []
    if delta:
        out.append(DELTA)
    if any(r.device_memory_bytes is None for r in rows):
        out.append("some ranks' traces give no device memory (deviceProperties "
                   "totalGlobalMem): their share of it is unknown")
    if traced and n_ranks < traced:
        out.append(f"memory events on {n_ranks} of {traced} ranks")
    return "; ".join(out) or None
