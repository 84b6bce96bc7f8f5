"""Ground truth of the idle split (docs/attribution.md, "Idle: why the GPU waited") for
the GPU-job simulator, from the simulator's own knowledge: the idle gaps of each step
window, when the host launched the GPU op that ends each gap, which gaps follow a
synchronization it modelled, and when the host was loading data. Independent of
stepscope's SQL (analyzers/sql/attribution.sql)."""

from __future__ import annotations

SHORT_GAP_NS = 30_000  # a gap this short, or this much after the launch, is launch overhead

Interval = tuple[int, int]


def idle_gaps(busy: list[Interval], ws: int, we: int) -> list[Interval]:
    """Maximal intervals of [ws, we) where no GPU interval of `busy` runs."""
    gaps, t = [], ws
    for s, e in sorted((s, e) for s, e in busy if e > ws and s < we and e > s):
        if s > t:
            gaps.append((t, min(s, we)))
        t = max(t, e)
        if t >= we:
            break
    if t < we:
        gaps.append((t, we))
    return gaps


def split_gap(s: int, e: int, launch: tuple[int, int] | None) -> tuple[int, int, int]:
    """(host_bound, launch_overhead, other) of one idle gap [s, e) whose ending GPU op was
    launched by a runtime call running over `launch` (None: unknown). The launch point is
    the call's start, or SHORT_GAP_NS before its end when the call itself is longer."""
    gap = e - s
    if gap <= SHORT_GAP_NS:
        return 0, gap, 0
    point = None if launch is None else max(launch[0], launch[1] - SHORT_GAP_NS)
    host = 0 if point is None else min(gap, max(0, point - s))
    after = gap - host
    short = min(after, SHORT_GAP_NS)
    return host, short, after - short


def overlap(a: Interval, spans: list[Interval]) -> int:
    """Time of `a` covered by `spans` (disjoint intervals)."""
    return sum(max(0, min(a[1], e) - max(a[0], s)) for s, e in spans)


def window_split(busy: list[Interval], starts: dict[int, Interval], ws: int, we: int,
                 syncs_end: set[int], loader: list[Interval]) -> dict[str, int]:
    """The idle split of one window. `starts` maps a GPU start time to the launch call (start,
    end) with the earliest launch point of the ops starting then; `syncs_end` holds the
    end times of GPU ops the host
    synchronized on (a gap starting there follows a sync); `loader` the host's data
    loading spans."""
    out = dict.fromkeys(("idle_host_ns", "idle_launch_ns", "idle_other_ns",
                         "idle_host_sync_ns", "idle_host_loader_ns"), 0)
    for s, e in idle_gaps(busy, ws, we):
        host, launch, other = split_gap(s, e, starts.get(e))
        out["idle_host_ns"] += host
        out["idle_launch_ns"] += launch
        out["idle_other_ns"] += other
        if host and s in syncs_end:
            out["idle_host_sync_ns"] += host
        out["idle_host_loader_ns"] += overlap((s, s + host), loader)
    return out
