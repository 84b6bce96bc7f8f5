"""What changed between two runs, and what it cost in MFU (docs/diff.md).

The MFU change is split over the stages of the MFU waterfall (kernel efficiency, then
each non-compute category): each run's waterfall adds up exactly to its MFU, so the
per-stage differences add up exactly to the MFU change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from stepscope.analyzers import numbers
from stepscope.analyzers.results import (
    CATEGORIES,
    DIFF_SCHEMA_VERSION,
    STAGES,
    Breakdown,
    CollectiveChange,
    CollectiveSide,
    CollectiveStat,
    Diff,
    DiffSide,
    Expected,
    Fact,
    OpChange,
    Report,
    SetupChange,
    StagePoints,
    StragglerBrief,
    StragglerChanges,
)

__all__ = ["DIFF_SCHEMA_VERSION", "STAGES", "build_diff"]

# the narrative's words for each cause (the narrative is a documented field of the model)
CAUSE_WORDS = {"kernel_efficiency": "kernel efficiency", "compute": "compute",
               "recompute": "recompute", "exposed_comm": "exposed communication",
               "straggler_wait": "straggler wait", "bubble": "pipeline bubble",
               "memory": "memory copies", "idle": "idle"}
NARRATIVE_SETUP = ("world_size", "nodes", "device", "tp", "pp", "dp", "microbatches")


def summarize(report: Report) -> DiffSide:
    """The part of a report that a diff shows for each side."""
    return DiffSide(
        run=report.run.name, world_size=report.run.world_size, hosts=len(report.run.hosts),
        device=report.run.device, layout=report.layout, step_time_ms=report.step_time_ms,
        breakdown_ms=report.breakdown_ms, mfu=report.mfu.mfu, hfu=report.mfu.hfu,
        model_flops_per_step=report.mfu.model_flops_per_step,
        microbatches=report.pipeline.microbatches if report.pipeline else None,
        stragglers=tuple(StragglerBrief(rank=s.rank, host=s.host, waited_on_ms=s.waited_on_ms)
                         for s in report.stragglers))


def _waterfall_points(report: Report) -> dict[str, float] | None:
    if report.mfu.mfu is None:
        return None
    return {w.name: w.points for w in report.mfu.waterfall}


def mfu_points_by_category(a: Report, b: Report) -> StagePoints | None:
    wa, wb = _waterfall_points(a), _waterfall_points(b)
    if wa is None or wb is None:
        return None
    return StagePoints(**{stage: wb[stage] - wa[stage] for stage in STAGES})


def _microbatches(report: Report) -> int | None:
    return report.pipeline.microbatches if report.pipeline else None


def setup_changes(a: Report, b: Report) -> tuple[SetupChange, ...]:
    """Every setup fact that differs: world, hosts, GPU, layout degrees, microbatches,
    process-group sizes."""
    la, lb = a.layout, b.layout
    facts: list[tuple[str, Fact, Fact]] = [
        ("world_size", a.run.world_size, b.run.world_size),
        ("nodes", la.nodes, lb.nodes),
        ("gpus_per_node", la.gpus_per_node, lb.gpus_per_node),
        ("device", a.run.device, b.run.device),
        *[(k, getattr(la, k), getattr(lb, k)) for k in ("tp", "pp", "dp", "cp", "ep")],
        ("microbatches", _microbatches(a), _microbatches(b)),
    ]
    sizes_a = {c.group_label: c.group_size for c in a.collectives}
    sizes_b = {c.group_label: c.group_size for c in b.collectives}
    for label in sorted(set(sizes_a) | set(sizes_b)):
        facts.append((f"group size {label}", sizes_a.get(label), sizes_b.get(label)))
    return tuple(SetupChange(what=what, a=va, b=vb) for what, va, vb in facts if va != vb)


def _side(c: CollectiveStat | None) -> CollectiveSide | None:
    if c is None:
        return None
    return CollectiveSide(
        calls_per_step=c.calls_per_step, bytes_per_step=c.bytes_per_step, time_ms=c.time_ms,
        exposed_ms=c.exposed_ms, straggler_wait_ms=c.straggler_wait_ms,
        bubble_ms=c.bubble_ms, overlapped_ms=c.overlapped_ms, bus_bw_gbs=c.bus_bw_gbs,
        link=c.link,
        link_peak_gbs=c.link_peak_gbs, link_utilization=c.link_utilization,
        group_size=c.group_size)


def collective_changes(a: Report, b: Report) -> tuple[CollectiveChange, ...]:
    ca = {(c.collective, c.group_label): c for c in a.collectives}
    cb = {(c.collective, c.group_label): c for c in b.collectives}
    out = []
    for key in sorted(set(ca) | set(cb)):
        ra, rb = ca.get(key), cb.get(key)
        out.append(CollectiveChange(
            collective=key[0], group=key[1], a=_side(ra), b=_side(rb),
            exposed_delta_ms=(rb.exposed_ms if rb else 0.0) - (ra.exposed_ms if ra else 0.0)))
    return tuple(sorted(out, key=lambda c: -abs(c.exposed_delta_ms)))


def op_changes(ops_a: Mapping[str, float], ops_b: Mapping[str, float],
               top: int = 10) -> tuple[OpChange, ...]:
    rows = [OpChange(op=op, a_ms=ops_a.get(op, 0.0), b_ms=ops_b.get(op, 0.0),
                     delta_ms=ops_b.get(op, 0.0) - ops_a.get(op, 0.0))
            for op in set(ops_a) | set(ops_b)]
    return tuple(sorted(rows, key=lambda r: (-abs(r.delta_ms), r.op))[:top])


def straggler_changes(a: Report, b: Report) -> StragglerChanges:
    ra = {s.rank: s for s in a.stragglers}
    rb = {s.rank: s for s in b.stragglers}
    return StragglerChanges(new=tuple(rb[r] for r in sorted(set(rb) - set(ra))),
                            resolved=tuple(ra[r] for r in sorted(set(ra) - set(rb))),
                            persisting=tuple(rb[r] for r in sorted(set(ra) & set(rb))))


def build_diff(a: Report, b: Report, ops_a: Mapping[str, float],
               ops_b: Mapping[str, float], expected: Expected | None = None) -> Diff:
    """The diff model (times ms, MFU points = percentage points); `expected` is B as
    predicted from A's calibration (analyzers.plan.expected), when there is one."""
    mfu_a, mfu_b = a.mfu.mfu, b.mfu.mfu
    delta = Breakdown(**{c: b.breakdown_ms.ms(c) - a.breakdown_ms.ms(c) for c in CATEGORIES})
    draft = Diff(
        a=summarize(a), b=summarize(b),
        mfu_delta_points=(100 * (mfu_b - mfu_a)
                          if mfu_a is not None and mfu_b is not None else None),
        step_time_delta_ms=b.step_time_ms - a.step_time_ms,
        breakdown_delta_ms=delta,
        mfu_points_by_category=mfu_points_by_category(a, b),
        setup_changes=setup_changes(a, b),
        collectives=collective_changes(a, b),
        stragglers=straggler_changes(a, b),
        top_ops=op_changes(ops_a, ops_b),
        recommendations=b.recommendations,
        narrative="",
        expected=expected,
    )
    return msgspec.structs.replace(draft, narrative=narrative(draft))


def narrative(d: Diff) -> str:
    """A few sentences naming the top causes with numbers."""
    a, b = d.a, d.b
    parts = []
    if d.mfu_delta_points is not None and a.mfu is not None and b.mfu is not None:
        verb = "fell" if d.mfu_delta_points < 0 else "rose"
        parts.append(f"MFU {verb} {mfu_percent(a.mfu)} -> {mfu_percent(b.mfu)} "
                     f"({d.mfu_delta_points:+.1f} pts); step time "
                     f"{a.step_time_ms:.1f} -> {b.step_time_ms:.1f} ms.")
    else:
        parts.append(f"Step time {a.step_time_ms:.1f} -> {b.step_time_ms:.1f} ms "
                     f"({d.step_time_delta_ms:+.1f} ms); no MFU (unknown peak or FLOPs).")
    causes = _top_causes(d)
    if causes:
        parts.append("Top causes: " + "; ".join(causes) + ".")
    setup = [f"{c.what} {c.a} -> {c.b}" for c in d.setup_changes if c.what in NARRATIVE_SETUP]
    if setup:
        parts.append("Setup: " + ", ".join(setup) + ".")
    return " ".join(parts)


def _top_causes(d: Diff) -> list[str]:
    """Up to three causes of the change, largest first, in its direction: where MFU fell,
    the categories that cost points; where it rose, those that gave them (without MFU,
    the categories whose time moved the way the step time did)."""
    delta = d.breakdown_delta_ms.as_dict()
    items: Sequence[tuple[str, float | None]]
    if d.mfu_points_by_category is not None:
        sign = -1.0 if (d.mfu_delta_points or 0.0) < 0 else 1.0
        ranked = sorted(d.mfu_points_by_category.as_dict().items(),
                        key=lambda kv: -sign * kv[1])
        items = [(k, float(v)) for k, v in ranked if sign * v > 0.5][:3]
    else:
        sign = -1.0 if d.step_time_delta_ms < 0 else 1.0
        by_ms = sorted(delta.items(), key=lambda kv: -sign * kv[1])
        items = [(k, None) for k, v in by_ms
                 if sign * v > 0.05 * max(d.a.step_time_ms, 1e-9)][:3]
    out = []
    for cat, pts in items:
        text = CAUSE_WORDS[cat]
        if cat in delta:
            text += f" {delta[cat]:+.2f} ms/step"
        if pts is not None:
            text += f" ({pts:+.1f} pts)"
        text += _why(cat, d, pts)
        out.append(text)
    return out


def mfu_percent(mfu: float) -> str:
    """An MFU as every output shows it (analyzers/numbers.py): 0.027%, not 0.0%, so the
    sentence agrees with the table beside it."""
    return numbers.mfu_percent(mfu)


def _why(cat: str, d: Diff, pts: float | None = None) -> str:
    """The collective behind a communication cause, with its own numbers for that cause
    (exposed time, or straggler wait), or the new straggler that makes the others wait."""
    if cat in ("exposed_comm", "straggler_wait") and d.collectives:
        if cat == "straggler_wait" and d.stragglers.new:
            s = d.stragglers.new[0]
            return (f": rank {s.rank} (host {s.host}) straggles, the others wait "
                    f"{s.waited_on_ms:.1f} ms/step in total")
        field, word = (("exposed_ms", "exposed") if cat == "exposed_comm"
                       else ("straggler_wait_ms", "waited for"))
        c = max(d.collectives, key=lambda c: abs(_value(c.b, field) - _value(c.a, field)))
        ca, cb = c.a, c.b
        bits = [f"{c.collective} on {c.group} {word} "
                f"{_value(ca, field):.2f} -> {_value(cb, field):.2f} ms"]
        if ca and cb and ca.group_size != cb.group_size:
            bits.append(f"the group grew {ca.group_size} -> {cb.group_size}")
        if ca and cb and ca.bus_bw_gbs and cb.bus_bw_gbs:
            bits.append(f"bus bandwidth {ca.bus_bw_gbs:.0f} -> {cb.bus_bw_gbs:.0f} GB/s")
        return " as " + ", ".join(bits)
    if cat == "kernel_efficiency":
        gained = pts > 0 if pts is not None else d.breakdown_delta_ms.compute < 0
        return (" (compute runs closer to peak)" if gained
                else " (compute runs further below peak)")
    return ""


def _value(side: CollectiveSide | None, field: str) -> float:
    """A collective's `field` on one side of the diff (0 where it did not run)."""
    return float(getattr(side, field)) if side is not None else 0.0
