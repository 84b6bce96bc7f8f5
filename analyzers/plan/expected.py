"""Run B as the planner expects it from run A (docs/diff.md, "Expected from A").

The planner calibrates on A and predicts A's model at B's scale and layout; B's own
calibration splits its measured step into the same terms. Per term, the change A ->
expected B is what the layout explains and expected B -> measured B is where B departs
from it.

Both are measured with the MFU waterfall (analyzers/flops/mfu.py), the one the diff's "MFU
points by cause" takes the difference of, so the two splits agree: each state s (A,
expected B, B) has its kernel efficiency e_s = F_s / (G_s P_s Tc_s) (F model FLOPs per
step, P peak, G GPUs, Tc the compute terms: compute, other kernels, optimizer) and step
T_s; a change from state 1 to state 2 is worth, in MFU points,

    compute term c:      -100 (e_1 t2_c / Tc_2 - e_2 t1_c / Tc_1)
    other term x:        -100 (e_2 t2_x / T_2  - e_1 t1_x / T_1)

The compute terms add up to the kernel-efficiency stage's change 100 (e_2 - e_1), each
other term is its waterfall stage's change, and all add up to 100 (MFU_2 - MFU_1): the
expected points to MFU_expected - MFU_A, the departures to MFU_B - MFU_expected, and
grouped by stage (TERM_STAGE) the two to the diff's points by cause. A term that scales
perfectly (G t constant, the others too) costs nothing. A and expected B use A's F and
P; measured B its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import msgspec

from stepscope.analyzers.context import RunContext
from stepscope.analyzers.flops.model_spec import ModelSpec
from stepscope.analyzers.flops.run_spec import GIVEN
from stepscope.analyzers.numbers import fixed, percent
from stepscope.analyzers.plan.calibrate import calibrate, ring, term_ms, tier
from stepscope.analyzers.plan.layouts import device_memory_gb
from stepscope.analyzers.plan.predict import Target, predict
from stepscope.analyzers.results import Calibration, Expected, Report, TermChange
from stepscope.ingest.errors import UsageError

TERM_WORDS = {"compute": "compute", "other_kernels": "other kernels",
              "optimizer": "optimizer", "recompute": "recompute", "memory": "memory copies",
              "tp_comm": "TP communication", "dp_comm": "DP communication",
              "other_comm": "other communication", "bubble": "pipeline bubble",
              "straggler_wait": "straggler wait", "idle": "idle"}
NOTABLE_POINTS = 0.5      # a term worth naming in the narrative
COMPUTE_TERMS = ("compute", "other_kernels", "optimizer")
# the MFU waterfall's stage (model.STAGES) of each planner term
TERM_STAGE = {"compute": "kernel_efficiency", "other_kernels": "kernel_efficiency",
              "optimizer": "kernel_efficiency", "recompute": "recompute", "memory": "memory",
              "tp_comm": "exposed_comm", "dp_comm": "exposed_comm",
              "other_comm": "exposed_comm", "bubble": "bubble",
              "straggler_wait": "straggler_wait", "idle": "idle"}


@dataclass(frozen=True)
class State:
    """One point of the path A -> expected B -> B: its terms (ms per rank and step) and
    its MFU inputs, as the waterfall reads them."""
    terms: Mapping[str, float]
    flops: float            # model FLOPs per step
    peak: float             # FLOP/s per GPU
    gpus: int

    @property
    def step_ms(self) -> float:
        return sum(self.terms.values())

    @property
    def compute_ms(self) -> float:
        return sum(self.terms.get(t, 0.0) for t in COMPUTE_TERMS)

    @property
    def efficiency(self) -> float:
        """Kernel efficiency F / (G P Tc): the MFU if the step were all compute."""
        tc = self.compute_ms
        return self.flops / (self.gpus * self.peak * tc / 1e3) if tc > 0 else 0.0


def points(one: State, two: State, term: str) -> float:
    """MFU points the change of `term` from state `one` to `two` is worth, on the MFU
    waterfall (module docstring): summed over the terms, 100 (MFU_two - MFU_one)."""
    e1, e2 = one.efficiency, two.efficiency
    t1, t2 = one.terms.get(term, 0.0), two.terms.get(term, 0.0)
    if term in COMPUTE_TERMS:
        c1, c2 = one.compute_ms, two.compute_ms
        return -100.0 * ((e1 * t2 / c2 if c2 else 0.0) - (e2 * t1 / c1 if c1 else 0.0))
    s1, s2 = one.step_ms, two.step_ms
    return -100.0 * ((e2 * t2 / s2 if s2 else 0.0) - (e1 * t1 / s1 if s1 else 0.0))


def spec_for(ctx: RunContext) -> tuple[ModelSpec, str] | None:
    """The run's spec (--model, else model.json beside its traces: `run_context` found
    it) and where it came from."""
    if ctx.spec is None:
        return None
    return ctx.spec, ctx.spec_source or GIVEN


def expected_for(ctx_a: RunContext, a: Report, ctx_b: RunContext, b: Report
                 ) -> tuple[Expected | None, str | None]:
    """B as expected from A, or None and the one-line reason it cannot be."""
    found = spec_for(ctx_a)
    if found is None:
        return None, ("no expectation from A: it needs the model spec (--model, or "
                      "model.json beside A's traces)")
    spec, source = found
    try:
        cal_a = calibrate(ctx_a, a, spec, source)
        spec_b = spec_for(ctx_b) or found
        cal_b = calibrate(ctx_b, b, spec_b[0], spec_b[1])
    except UsageError as exc:
        return None, f"no expectation from A: {str(exc).removeprefix('plan --from ')}"
    if not same_model(cal_a, cal_b):
        return None, ("no expectation from A: B's model spec is not A's (the planner "
                      "predicts the same model at another scale)")
    memory = device_memory_gb(ctx_a.device.peak) if ctx_a.device.peak else None
    return expected(cal_a, cal_b, b, memory), None


def same_model(a: Calibration, b: Calibration) -> bool:
    ma, mb = a.model, b.model
    return (ma.params, ma.layers, ma.hidden, ma.seq, ma.global_batch_tokens) == \
        (mb.params, mb.layers, mb.hidden, mb.seq, mb.global_batch_tokens)


def target_like(cal_b: Calibration) -> Target:
    return Target(tp=cal_b.tp, pp=cal_b.pp, dp=cal_b.dp, zero=cal_b.zero,
                  microbatches=cal_b.microbatches, micro_batch=cal_b.micro_batch,
                  gpus_per_node=cal_b.gpus_per_node)


def expected(cal_a: Calibration, cal_b: Calibration, b: Report,
             memory_gb: float | None) -> Expected:
    """The expected section of the diff (analyzers.results.Expected): each term's points on
    the MFU waterfall from A to expected B and from there to measured B (`points`)."""
    t = target_like(cal_b)
    plan = predict(cal_a, t, memory_gb)
    peak_a, peak_b = cal_a.peak_tflops * 1e12, cal_b.peak_tflops * 1e12
    state_a = State({x.name: x.ms for x in cal_a.terms}, cal_a.model_flops_per_step,
                    peak_a, cal_a.gpus)
    state_exp = State({x.name: x.ms for x in plan.terms}, cal_a.model_flops_per_step,
                      peak_a, t.gpus)
    state_b = State({x.name: x.ms for x in cal_b.terms}, cal_b.model_flops_per_step,
                    peak_b, cal_b.gpus)
    t_a, t_exp, t_b = cal_a.step_ms, plan.step_ms, cal_b.step_ms
    changes = []
    for term in plan.terms:
        a_ms, b_ms = term_ms(cal_a.terms, term.name), term_ms(cal_b.terms, term.name)
        changes.append(TermChange(
            term=term.name, a_ms=a_ms, expected_ms=term.ms, b_ms=b_ms,
            expected_points=points(state_a, state_exp, term.name),
            departure_points=points(state_exp, state_b, term.name),
            uses=term.uses,
            why=(_share_words(term.name, term.ms, t_exp, b_ms, t_b)
                 or departure_why(term.name, cal_a, cal_b, b, t))))
    draft = Expected(
        layout=layout_words(cal_b), step_ms=t_exp, mfu=plan.mfu, step_delta_ms=t_exp - t_a,
        mfu_delta_points=100 * (plan.mfu - cal_a.mfu), departure_ms=t_b - t_exp,
        departure_points=100 * (cal_b.mfu - plan.mfu),
        terms=tuple(changes), assumptions=cal_a.assumptions, narrative="")
    return msgspec.structs.replace(draft, narrative=narrative(draft, cal_a, cal_b))


def layout_words(cal: Calibration) -> str:
    return (f"TP{cal.tp} x PP{cal.pp} x DP{cal.dp} on {cal.gpus} GPUs, {cal.nodes} node(s) "
            f"of {cal.gpus_per_node}, {cal.microbatches} microbatches of {cal.micro_batch}")


def departure_why(name: str, cal_a: Calibration, cal_b: Calibration, b: Report,
                  t: Target) -> str:
    """What B's own measurements say about a term that departs from the expectation."""
    if name in ("dp_comm", "tp_comm"):
        return _link_why("dp" if name == "dp_comm" else "tp", cal_a, cal_b)
    if name == "straggler_wait" and b.stragglers:
        s = b.stragglers[0]
        return (f"rank {s.rank} ({s.host}) straggles: the others wait "
                f"{s.waited_on_ms:.2f} ms/step for it in total")
    if name == "compute":
        rate = {k.kind: k.tflops for k in cal_a.kernels if k.tflops}
        worse = [f"{k.kind} {k.tflops:.0f} vs {rate[k.kind]:.0f} TFLOP/s" for k in cal_b.kernels
                 if k.tflops and k.kind in rate and abs(k.tflops / rate[k.kind] - 1) > 0.01]
        return ("B's kernels ran at " + ", ".join(worse) + " (mean over ranks)") if worse else ""
    if name == "bubble" and cal_b.bubble is not None:
        return (f"bubble {cal_b.bubble.measured_fraction:.1%} of B's step "
                f"(1F1B theory {cal_b.bubble.theory_fraction:.1%})")
    return ""


def _link_why(role: str, cal_a: Calibration, cal_b: Calibration) -> str:
    """B's bus bandwidth on the role's largest collective vs A's line at that size."""
    mine = [c for c in cal_b.comm if c.role == role and c.bus_bw_gbs]
    if not mine:
        return ""
    c = max(mine, key=lambda x: x.transfer_ms)
    link = tier(cal_a.links, c.tier)
    hops, factor = ring(c.collective, c.group_size)
    bus = c.bytes_per_call * factor
    line_ns = hops * link.latency_us * 1e3 + (bus / link.bus_bw_gbs if link.bus_bw_gbs > 0
                                              else 0.0)
    if bus <= 0 or line_ns <= 0:
        return (f"{c.collective} on {c.group} ran at {c.bus_bw_gbs:.0f} GB/s bus bandwidth; "
                f"A's {c.tier} line predicts nothing for it: "
                + _no_line_reason(c.group_size, c.bytes_per_call))
    expected_bw = bus / line_ns
    return (f"{c.collective} on {c.group} ({c.group_size} ranks, {c.tier}) ran at "
            f"{c.bus_bw_gbs:.0f} GB/s bus bandwidth; A's {c.tier} line predicts "
            f"{expected_bw:.0f} GB/s for {c.bytes_per_call / 1e6:.1f} MB")


def _no_line_reason(group_size: int, bytes_per_call: float) -> str:
    """Why a link line gives no bandwidth for a collective: a ring over fewer than two ranks
    (the group's size unknown, as in traces without process-group records) moves no bus
    bytes, nor does a call of unknown size."""
    if group_size < 2:
        return f"its group has {group_size} known rank(s), so a ring moves no bus bytes"
    if bytes_per_call <= 0:
        return "its message size is unknown"
    return "A's line has neither latency nor bandwidth"


def _reason(name: str, cal_a: Calibration, cal_b: Calibration) -> str:
    """Why the layout moves a term, in words (for the narrative)."""
    if name == "dp_comm":
        across = cal_b.dp * cal_b.tp > cal_b.gpus_per_node
        link = f"across {cal_b.nodes} nodes" if across else "inside a node"
        if cal_b.dp != cal_a.dp:
            return f"the DP ring grows {cal_a.dp} -> {cal_b.dp} ranks, {link}"
        return f"the DP group of {cal_b.dp} ranks, {link}"
    if name == "tp_comm" and cal_a.tp != cal_b.tp:
        return f"TP {cal_a.tp} -> {cal_b.tp}"
    if name == "bubble":
        moved = [f"PP {cal_a.pp} -> {cal_b.pp}"] if cal_a.pp != cal_b.pp else []
        if cal_a.microbatches != cal_b.microbatches:
            moved.append(f"{cal_a.microbatches} -> {cal_b.microbatches} microbatches")
        return ", ".join(moved)
    return ""


def _share_words(name: str, gpu_ms_1: float, step_1: float, gpu_ms_2: float,
                 step_2: float) -> str:
    """For a non-compute term whose (GPU) time did not change (within 1%) while the step
    did: its points are its smaller or larger share of the step (the waterfall's)."""
    if name in COMPUTE_TERMS or gpu_ms_2 <= 0 or step_1 <= 0 or step_2 <= 0 \
            or abs(gpu_ms_2 - gpu_ms_1) > 0.01 * max(gpu_ms_1, gpu_ms_2) \
            or abs(step_2 / step_1 - 1) < 0.01:
        return ""
    longer = step_2 > step_1
    return (f"the same time, a {'smaller' if longer else 'larger'} share of a "
            f"{'longer' if longer else 'shorter'} step")


def _expected_share_words(c: TermChange, cal_a: Calibration, cal_b: Calibration,
                          step_exp: float) -> str:
    """Why an expected term's points moved when the layout did not move it: the same GPU
    time in all (summed over the GPUs). On as many GPUs that is the same milliseconds per
    step; across a change of GPU count the milliseconds per GPU change with it (diff_base ->
    diff_scaled: TP 1.79 -> 0.90 ms/step over 8 -> 16 GPUs, once read "the same time"),
    so the words give both times and both shares of the step."""
    same_total = _share_words(c.term, cal_a.gpus * c.a_ms, cal_a.gpus * cal_a.step_ms,
                              cal_b.gpus * c.expected_ms, cal_b.gpus * step_exp)
    if not same_total or cal_a.gpus == cal_b.gpus:
        return same_total
    return (f"the same GPU time over {cal_a.gpus} -> {cal_b.gpus} GPUs: {c.a_ms:.2f} -> "
            f"{c.expected_ms:.2f} ms/step, {100 * c.a_ms / cal_a.step_ms:.1f}% -> "
            f"{100 * c.expected_ms / step_exp:.1f}% of the step")


def narrative(e: Expected, cal_a: Calibration, cal_b: Calibration) -> str:
    """'B lost 12 points; the model predicts 9 from ...; the other 3 are ...'."""
    total = (e.mfu_delta_points or 0.0) + (e.departure_points or 0.0)
    verb = "lost" if total < 0 else "gained"
    head = (f"B {verb} {fixed(abs(total))} MFU points ({percent(cal_a.mfu)} -> "
            f"{percent(cal_a.mfu + total / 100)}); the model predicts "
            f"{e.mfu_delta_points or 0.0:+.1f} from A at B's scale and layout ({e.layout})")
    moved = _named(e, "expected_points", lambda c: _reason(c.term, cal_a, cal_b)
                   or _expected_share_words(c, cal_a, cal_b, e.step_ms))
    if moved:
        head += ": " + "; ".join(moved)
    rest = (f"the other {e.departure_points or 0.0:+.1f} are where B departs from the "
            "expectation")
    departed = _named(e, "departure_points", lambda c: c.why)
    if departed:
        rest += ": " + "; ".join(departed)
    return head + ". " + rest[0].upper() + rest[1:] + "."


def _named(e: Expected, field: str, words: Callable[[TermChange], str]) -> list[str]:
    """The terms whose points in `field` are notable, largest first, with their words."""
    rows = [(getattr(c, field) or 0.0, c) for c in e.terms]
    out = []
    for pts, c in sorted(rows, key=lambda x: -abs(x[0])):
        if abs(pts) < NOTABLE_POINTS:
            continue
        why = words(c)
        out.append(f"{TERM_WORDS[c.term]} {pts:+.1f}" + (f" ({why})" if why else ""))
    return out[:3]
