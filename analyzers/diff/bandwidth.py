"""A slower network is a cause: collectives whose bus bandwidth fell between two runs,
named with what getting it back would give (issue 45, point 7).

From `diff_base` to `diff_scaled` the data-parallel all_reduce's bus bandwidth fell from
100 to 20 GB/s and the diff advised only "overlap DP communication" and "replace the
straggler", while the what-if on B (that all_reduce 5x faster) gains 3.5 ms of a 11.9 ms
step. Here each collective of B (same collective, same group as in A) whose bus
bandwidth is at most A's / BANDWIDTH_DROP becomes a recommendation whose gain is the
critical-path what-if on B with that collective sped up by A's bandwidth over B's.
"""

from __future__ import annotations

from collections.abc import Sequence

from stepscope.analyzers.advice.recommend import mfu_points_gained
from stepscope.analyzers.context import RunContext
from stepscope.analyzers.critical_path.analysis import what_if, whatif_sentence
from stepscope.analyzers.critical_path.whatif import WhatIf
from stepscope.analyzers.results import CollectiveChange, Recommendation, Report
from stepscope.ingest.errors import UsageError

BANDWIDTH_DROP = 1.5   # B's bus bandwidth at most A's / this: a drop worth naming
MIN_SHARE = 0.01       # ... in a collective taking at least this share of B's step
MIN_GAIN = 0.02        # a recommendation when the what-if gains this share of B's step
MAX_NAMED = 2          # the collectives with the largest drops in time


def dropped(changes: Sequence[CollectiveChange], step_ms: float) -> list[CollectiveChange]:
    """The collectives of both runs whose bus bandwidth fell at least BANDWIDTH_DROP-fold
    and that take at least MIN_SHARE of B's step, most time in B first."""
    out = [c for c in changes
           if c.a is not None and c.b is not None and c.a.bus_bw_gbs and c.b.bus_bw_gbs
           and c.a.bus_bw_gbs >= BANDWIDTH_DROP * c.b.bus_bw_gbs
           and c.b.time_ms >= MIN_SHARE * step_ms]
    return sorted(out, key=lambda c: -(c.b.time_ms if c.b else 0.0))[:MAX_NAMED]


def bandwidth_recommendations(ctx_b: RunContext, report_b: Report,
                              changes: Sequence[CollectiveChange]
                              ) -> tuple[Recommendation, ...]:
    """One recommendation per collective whose bandwidth fell (`dropped`), when giving
    it back A's bandwidth shortens B's step by MIN_GAIN of it or more."""
    step = report_b.step_time_ms
    out = []
    for c in dropped(changes, step):
        assert c.a is not None and c.b is not None and c.a.bus_bw_gbs and c.b.bus_bw_gbs
        factor = c.a.bus_bw_gbs / c.b.bus_bw_gbs
        label = f"{c.collective} on {c.group} had A's bus bandwidth ({c.a.bus_bw_gbs:.0f} GB/s)"
        try:
            result = what_if(ctx_b, WhatIf(collective=f"{c.collective}:{c.group}",
                                           speedup=factor))
        except UsageError:
            continue  # not on B's graph (a CPU run, no complete step)
        gain = result.gain_ms
        if step <= 0 or gain < MIN_GAIN * step:
            continue
        out.append(Recommendation(
            id="bandwidth_drop", severity="high" if gain >= 0.15 * step else "medium",
            title=(f"Restore the network bandwidth of {c.collective} on {c.group}: "
                   f"{c.a.bus_bw_gbs:.0f} -> {c.b.bus_bw_gbs:.0f} GB/s"),
            detail=(f"The bus bandwidth of {c.collective} on {c.group} fell {factor:.1f}x "
                    f"from A to B ({_link(c)}); its time per step went "
                    f"{c.a.time_ms:.2f} -> {c.b.time_ms:.2f} ms. Check the links and the "
                    "NCCL transport of the nodes B added (NCCL_DEBUG=INFO: the network and "
                    "GPUDirect RDMA in use), or keep the group inside faster links."),
            evidence="critical path on B: " + whatif_sentence(
                label, result.predicted_step_time_ms, result.step_time_ms),
            expected_gain_ms=gain,
            expected_mfu_points=mfu_points_gained(report_b.mfu.mfu, step, gain)))
    return tuple(out)


def _link(c: CollectiveChange) -> str:
    assert c.a is not None and c.b is not None
    if c.a.link == c.b.link:
        return f"link {c.b.link}" if c.b.link else "link unknown"
    return f"link {c.a.link or 'unknown'} in A, {c.b.link or 'unknown'} in B"
