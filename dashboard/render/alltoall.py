"""The report's all_to_all section (analyzers.results.AllToAll) as a render block: traffic,
imbalance and its cost per group, the ranks that receive the most (docs/alltoall.md)."""

from __future__ import annotations

from stepscope.analyzers.results import AllToAll
from stepscope.dashboard.render.blocks import Section, Table, num, rows

HEAVIEST_SHOWN = 5


def alltoall_block(section: AllToAll | None) -> Section | None:
    if section is None:
        return None
    lines = []
    heavy = sorted((r for r in section.ranks if r.received_vs_mean >= 1.05),
                   key=lambda r: -r.received_bytes)[:HEAVIEST_SHOWN]
    if heavy:
        lines.append("receive the most: " + ", ".join(
            f"rank {r.rank} {r.received_vs_mean:.2f}× the mean"
            + (f" ({r.tokens_received:,.0f} tokens/step)" if r.tokens_received is not None
               else "") for r in heavy))
    if section.message:
        lines.append(f"note: {section.message}")
    table = Table(("group", "library", "calls/step", "MB sent per rank", "imbalance (mean)",
                   "imbalance (max)", "transfer ms", "imbalance cost ms", "wait ms",
                   "receives most", "splits"),
                  rows([[g.group_label, g.library, f"{g.calls_per_step:.1f}",
                         f"{g.bytes_per_rank / 1e6:.1f}", num(g.imbalance, ".2f"),
                         num(g.imbalance_max, ".2f"), f"{g.transfer_ms:.3f}",
                         f"{g.imbalance_cost_ms:.3f}", f"{g.wait_ms:.3f}",
                         "-" if g.heaviest_rank is None else
                         f"rank {g.heaviest_rank} ({num(g.heaviest_vs_mean, '.2f')}×)", g.splits]
                        for g in section.groups]),
                  numeric=(2, 3, 4, 5, 6, 7, 8))
    return Section("all_to_all traffic and imbalance (per rank and step)", "all-to-all",
                   tuple(lines), (table,) if section.groups else ())
