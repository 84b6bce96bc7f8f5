"""The idle split of a run (docs/attribution.md, "Idle: why the GPU waited"): host-bound,
launch overhead and other, as means like `breakdown_ms`, with the evidence the advisor
needs (gaps after synchronizations, data loading, short gaps) and what the host ran
while the GPU waited. The split itself is materialized per step by
analyzers/sql/attribution/idle.sql; this module only reads it."""

from __future__ import annotations

from typing import TypedDict

from stepscope.analyzers._sql import fetch_rows
from stepscope.analyzers.breakdown.attribution import SHORT_GAP_NS
from stepscope.analyzers.context import RunContext
from stepscope.analyzers.results import HostActivity, IdleBreakdown, IdleSplit

HOST_ACTIVITY_ROWS = 10


class _EvidenceRow(TypedDict):
    """The row of analyzers/sql/idle/evidence.sql."""
    after_sync_ms: float | None
    data_loader_ms: float | None
    gaps_per_step: float | None
    short_gaps_per_step: float | None


class _ActivityRow(TypedDict):
    """A row of analyzers/sql/idle/host_activity.sql."""
    name: str
    kind: str
    thread: str
    ms: float


def mean_split(splits: list[IdleSplit]) -> IdleSplit:
    """Mean over ranks of their splits (each part like breakdown_ms: the parts still sum
    to the mean idle)."""
    n = len(splits)
    return IdleSplit(host_bound=sum(s.host_bound for s in splits) / n,
                     launch_overhead=sum(s.launch_overhead for s in splits) / n,
                     other=sum(s.other for s in splits) / n)


def idle_section(ctx: RunContext) -> IdleBreakdown | None:
    """The report's idle_split; None without attributed ranks, or for a run attributed
    before the split existed."""
    splits = [r.idle_split_ms for r in ctx.attribution.per_rank]
    if not splits or any(s is None for s in splits):
        return None
    params = {"run": ctx.run, "short_gap_ns": SHORT_GAP_NS}
    (ev,) = fetch_rows(ctx.con, "idle/evidence.sql", params, _EvidenceRow)
    rows = fetch_rows(ctx.con, "idle/host_activity.sql",
                      {"run": ctx.run, "limit": HOST_ACTIVITY_ROWS}, _ActivityRow)
    return IdleBreakdown(
        split_ms=mean_split([s for s in splits if s is not None]),
        host_bound_after_sync_ms=float(ev["after_sync_ms"] or 0.0),
        host_bound_data_loader_ms=float(ev["data_loader_ms"] or 0.0),
        gaps_per_step=float(ev["gaps_per_step"] or 0.0),
        short_gaps_per_step=float(ev["short_gaps_per_step"] or 0.0),
        short_gap_us=SHORT_GAP_NS / 1e3,
        host_activity=tuple(HostActivity(name=r["name"], kind=r["kind"], thread=r["thread"],
                                         ms=float(r["ms"])) for r in rows))
