"""What makes up a pipeline bubble above the 1F1B theory, from the report's own numbers.

1F1B idles (S−1)/(S−1+M) of the step when the stages are balanced and sends are free.
The measured bubble (the `bubble` category of the pipeline ranks: time in send/recv)
exceeds it by

* the P2P transfers themselves: the bytes each rank sends and receives per step at the
  link's peak (a lower bound: real transfers are slower);
* stage imbalance: every stage waits for the slowest one, so each waits the gap between
  its compute and the slowest stage's (per stage, the median of its ranks' compute);
* a slow rank in a stage (a straggler): the stages around it wait its excess time;
* the rest (schedule gaps, warm-up and cool-down beyond the theory).

Each part is taken in that order and capped by what is left of the excess, so the parts
add up to the excess. A reading aid for the Pipeline page, not a model of the schedule.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median

from stepscope.analyzers.results import Report

FAR_ABOVE = 1.5      # the explanation is given when measured >= this x the theory
MIN_EXCESS = 0.02    # and the excess is at least this share of the step


@dataclass(frozen=True)
class BubblePart:
    name: str          # p2p_transfer | stage_imbalance | slow_rank | other
    ms: float          # ms per step (mean over pipeline ranks)
    detail: str        # the numbers behind it, in words


@dataclass(frozen=True)
class BubbleExcess:
    """The measured bubble against the theory and the parts of the difference."""
    measured_ms: float
    theory_ms: float
    parts: tuple[BubblePart, ...]
    advice: str

    @property
    def excess_ms(self) -> float:
        return self.measured_ms - self.theory_ms


def _stage_compute(report: Report) -> dict[int, float]:
    """Median compute (compute + recompute) per step of each stage's ranks."""
    by_rank = {r.rank: r.breakdown_ms.compute + r.breakdown_ms.recompute
               for r in report.per_rank}
    pipe = report.pipeline
    assert pipe is not None
    return {s.stage: median(by_rank[r] for r in s.ranks if r in by_rank)
            for s in pipe.per_stage if any(r in by_rank for r in s.ranks)}


def _p2p_ms(report: Report) -> tuple[float, float]:
    """(ms per step at the link's peak, MB per step) of the point-to-point traffic."""
    rows = [c for c in report.collectives if c.is_p2p and c.link_peak_gbs]
    ms = sum((c.bytes_per_step or 0.0) / (c.link_peak_gbs * 1e9) * 1e3 for c in rows
             if c.link_peak_gbs)
    return ms, sum(c.bytes_per_step or 0.0 for c in rows) / 1e6


def bubble_excess(report: Report) -> BubbleExcess | None:
    """The parts of the bubble above the theory, or None without a pipeline or when
    the bubble is close to the theory."""
    pipe = report.pipeline
    if pipe is None or not pipe.per_stage or report.step_time_ms <= 0:
        return None
    step = report.step_time_ms
    measured, theory = pipe.bubble_fraction * step, pipe.bubble_theory * step
    if measured < FAR_ABOVE * theory or measured - theory < MIN_EXCESS * step:
        return None
    left = measured - theory
    parts = []

    def take(name: str, ms: float, detail: str) -> None:
        nonlocal left
        got = max(0.0, min(ms, left))
        if got > 0:
            parts.append(BubblePart(name, got, detail))
            left -= got

    p2p, mb = _p2p_ms(report)
    take("p2p_transfer", p2p, f"{mb:.1f} MB per rank and step over send/recv take at least "
                              f"{p2p:.2f} ms at the link's peak")
    compute = _stage_compute(report)
    slowest = max(compute, key=lambda s: compute[s])
    gap = sum(compute[slowest] - c for c in compute.values()) / len(compute)
    take("stage_imbalance", gap, f"stage {slowest} computes {compute[slowest]:.2f} ms/step; "
         f"the others {min(compute.values()):.2f}–{compute[slowest]:.2f} ms")
    stage_of = {r: s.stage for s in pipe.per_stage for r in s.ranks}
    slow = [s for s in report.stragglers if s.rank in stage_of]
    if slow:
        worst = max(slow, key=lambda s: s.step_time_deviation_ms)
        take("slow_rank", worst.step_time_deviation_ms,
             f"rank {worst.rank} (stage {stage_of[worst.rank]}) spends "
             f"{worst.step_time_deviation_ms:.2f} ms/step more than the median rank")
    take("other", left, "schedule gaps, warm-up and cool-down beyond the theory")
    return BubbleExcess(measured, theory, tuple(parts), _advice(parts, slow, slowest))


def _advice(parts: list[BubblePart], slow: list, slowest: int) -> str:
    """What to do about the largest part."""
    top = max(parts, key=lambda p: p.ms).name if parts else "other"
    if top == "slow_rank":
        rank = max(slow, key=lambda s: s.step_time_deviation_ms).rank
        return (f"Fix rank {rank} first: every stage waits for it (see its Timeline and "
                "the straggler advice); the bubble falls back toward the theory.")
    if top == "stage_imbalance":
        return (f"Rebalance the stages: move layers off stage {slowest} (the embedding and "
                "the loss often make the first and last stages heavier).")
    if top == "p2p_transfer":
        return ("Overlap the send/recv between stages with compute (e.g. Megatron's "
                "overlap_p2p_comm), keep neighbouring stages on NVLink, or send smaller "
                "activations (sequence parallelism, lower precision).")
    return ("More microbatches per step, or an interleaved schedule (virtual stages), "
            "shrink the part the theory does not explain.")
