"""The report's memory section (analyzers.results.MemorySection) as a render block: peak
allocated and reserved per rank against the device, the ops live at the peak
(docs/memory.md)."""

from __future__ import annotations

from stepscope.analyzers.results import MemorySection, RankMemory
from stepscope.dashboard.render.blocks import Section, Table, gb, pct, rows

RANKS_SHOWN = 16
NO_EVENTS = ("no memory events in the traces (profile with profile_memory=True): the peak "
             "memory per rank is not known")


def memory_block(section: MemorySection | None, gpu: bool = True,
                 note: str | None = None) -> Section | None:
    """`note`: why there are no memory events when the traces say profile_memory=1
    (Report.memory_note); NO_EVENTS otherwise."""
    if section is None:
        return Section("Memory per rank", "memory", (note or NO_EVENTS,)) if gpu else None
    top = next(r for r in section.ranks if r.rank == section.peak_rank)
    lines = [_headline(section, top)]
    if top.ops_at_peak:
        ops = ", ".join(f"{o.op} {o.bytes / 1e9:.2f} GB ({o.allocations})" for o in top.ops_at_peak)
        lines.append(f"live at rank {top.rank}'s peak (step {top.peak_step}, in "
                     f"{top.op_at_peak or 'no op'}), by allocating op: {ops}")
    if section.message:
        lines.append(f"note: {section.message}")
    shown = sorted(section.ranks, key=lambda r: -(r.peak_reserved_bytes
                                                  or r.peak_allocated_bytes))[:RANKS_SHOWN]
    title = (f"The {len(shown)} ranks with the most memory" if len(section.ranks) > len(shown)
             else None)
    table = Table(("rank", "host", "peak allocated GB", "peak reserved GB", "of device",
                   "headroom GB", "peak step", "op at peak"),
                  rows([_row(r) for r in sorted(shown, key=lambda r: r.rank)]),
                  numeric=(0, 2, 3, 4, 5, 6), title=title)
    return Section("Memory per rank", "memory", tuple(lines), (table,))


def _headline(section: MemorySection, top: RankMemory) -> str:
    device = (f" of {top.device_memory_bytes / 1e9:.1f} GB ({pct(top.reserved_share, 1)} "
              "reserved)" if top.device_memory_bytes and top.reserved_share is not None
              else "")
    reserved = (f", reserved {gb(section.peak_reserved_bytes)} GB"
                if section.peak_reserved_bytes is not None else "")
    return (f"peak allocated {gb(section.peak_allocated_bytes)} GB{reserved}; most on rank "
            f"{top.rank}{device} (source: {section.source})")


def _row(r: RankMemory) -> list[str]:
    return [str(r.rank), r.host or "-", gb(r.peak_allocated_bytes), gb(r.peak_reserved_bytes),
            pct(r.reserved_share, 1), gb(r.headroom_bytes),
            "-" if r.peak_step is None else str(r.peak_step), r.op_at_peak or "-"]
