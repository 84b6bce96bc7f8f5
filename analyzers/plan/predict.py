"""Predict the step of another layout of the same model from a run's calibration
(docs/planner.md, "Calibrated on a run").

Every term is the calibrating run's own measurement scaled by what the layout changes,
per rank and step, with L layers, ceil(L/PP) per stage, M microbatches of b sequences:

* compute (matmuls) by work per rank, ceil(L/PP) * M * b / TP, at each kind's
  achieved TFLOP/s; other kernels by ceil(L/PP) * M * b (taken as replicated over the
  TP group); the optimizer by parameters per rank (N / (TP*PP), / DP under ZeRO >= 1);
  recompute with the matmuls; memory copies per microbatch of the first stage;
* TP: the run's TP all-reduces per layer and microbatch, their bytes by b, each
  hops x latency + bus bytes / bandwidth on the tier of the new TP group (anchored on
  the class's measured time: x measured / the line at the run's size), exposed as much
  as in the run;
* DP: the gradients per rank (N / (TP*PP)) in the run's buckets per layer, on the tier
  of the new DP group, exposed after the last microbatch's backward (calibrated overlap);
* other collectives under 64 KiB: per step as in the run, on their new group;
* bubble: (S-1)(f+b) + (2(S-1) + M)p times the run's measured / modelled ratio;
* straggler wait and idle as measured (the model does not predict them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from stepscope.analyzers.plan.calibrate import (
    MATMUL_KINDS,
    anchor,
    backward_window_ms,
    call_ms,
    dp_exposed_ms,
    kind_ms,
    p2p_ms,
    pipeline_bubble_ms,
    term_ms,
    tier,
)
from stepscope.analyzers.plan.layouts import MEMORY_HEADROOM, MemoryShape, memory_bytes
from stepscope.analyzers.results import Calibration, CommClass, Plan, Term

GRAD_BYTES = 2.0          # bf16 gradients per parameter, when the run has no DP traffic
TP_CALLS = 4              # all-reduces per layer and microbatch (2 forward, 2 backward)


@dataclass(frozen=True)
class Target:
    """A layout to predict: degrees, ZeRO, microbatches per step and their size, the
    node size, and whether to add full recomputation (`recompute = "full"`)."""
    tp: int
    pp: int
    dp: int
    zero: int
    microbatches: int
    micro_batch: int
    gpus_per_node: int
    recompute: str = "as run"    # as run | full

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp


def target_of(cal: Calibration) -> Target:
    """The calibrating run's own layout."""
    return Target(tp=cal.tp, pp=cal.pp, dp=cal.dp, zero=cal.zero,
                  microbatches=cal.microbatches, micro_batch=cal.micro_batch,
                  gpus_per_node=cal.gpus_per_node)


def _lps(cal: Calibration, pp: int) -> int:
    return math.ceil(cal.model.layers / pp)


@dataclass(frozen=True)
class _Ratios:
    """How much of each kind of work one rank of the target does, relative to the run."""
    matmul: float       # ceil(L/PP) * M * b / TP
    elementwise: float  # ceil(L/PP) * M * b
    tp_calls: float     # ceil(L/PP) * M
    tokens: float       # b
    params: float       # parameters (optimizer state) per rank
    memory: float       # M * b / PP


def _ratios(cal: Calibration, t: Target) -> _Ratios:
    la, lb = _lps(cal, cal.pp), _lps(cal, t.pp)
    ma, mb = cal.microbatches * cal.micro_batch, t.microbatches * t.micro_batch
    shard_a = 1 / (cal.tp * cal.pp) / (cal.dp if cal.zero >= 1 else 1)
    shard_b = 1 / (t.tp * t.pp) / (t.dp if t.zero >= 1 else 1)
    return _Ratios(matmul=(lb * mb / t.tp) / (la * ma / cal.tp),
                   elementwise=(lb * mb) / (la * ma),
                   tp_calls=(lb * t.microbatches) / (la * cal.microbatches),
                   tokens=t.micro_batch / cal.micro_batch, params=shard_b / shard_a,
                   memory=(mb / t.pp) / (ma / cal.pp))


def _tiers(t: Target) -> dict[str, str]:
    """The link of each group of the target (Megatron order: TP fastest, then DP, PP)."""
    inside = {"tp": t.tp <= t.gpus_per_node, "dp": t.tp * t.dp <= t.gpus_per_node,
              "pp": t.gpus <= t.gpus_per_node, "world": t.gpus <= t.gpus_per_node}
    return {k: "nvlink" if v else "network" for k, v in inside.items()}


def _rates(cal: Calibration) -> str:
    parts = [f"{k.kind} {k.tflops:.0f} TFLOP/s" for k in cal.kernels
             if k.kind in MATMUL_KINDS and k.tflops]
    return ", ".join(parts) or "the run's compute time"


def _link_words(cal: Calibration, name: str) -> str:
    link = tier(cal.links, name)
    return (f"{name} {link.latency_us:.1f} us/hop + {link.bus_bw_gbs:.0f} GB/s "
            f"({link.source})")


def compute_terms(cal: Calibration, t: Target, r: _Ratios) -> dict[str, Term]:
    """Compute, other kernels, optimizer, recompute and memory of the target."""
    compute = kind_ms(cal.kernels, *MATMUL_KINDS) * r.matmul
    recompute = term_ms(cal.terms, "recompute") * r.matmul
    rc_words = (f"the recompute of {cal.run}, scaled with the matmuls" if cal.recompute
                else f"none (as in {cal.run})")
    if t.recompute == "full" and not cal.recompute:
        recompute, rc_words = compute / 3, "full recomputation: one more forward pass"
    run = f"from {cal.run}"
    return {
        "compute": Term(name="compute", ms=compute,
                        uses=f"{_rates(cal)} {run}, work per rank x {r.matmul:.3g}"),
        "other_kernels": Term(name="other_kernels",
                              ms=kind_ms(cal.kernels, "other") * r.elementwise,
                              uses=f"other kernels {run} x {r.elementwise:.3g} "
                                   "(layers x microbatch tokens per rank)"),
        "optimizer": Term(name="optimizer", ms=kind_ms(cal.kernels, "optimizer") * r.params,
                          uses=f"optimizer kernels {run} x {r.params:.3g} "
                               "(parameters per rank)"),
        "recompute": Term(name="recompute", ms=recompute, uses=rc_words),
        "memory": Term(name="memory", ms=term_ms(cal.terms, "memory") * r.memory,
                       uses=f"memory copies {run} x {r.memory:.3g} (per microbatch)"),
    }


def tp_term(cal: Calibration, t: Target, r: _Ratios, tiers: dict[str, str]) -> Term:
    """The exposed TP all-reduces of the target."""
    if t.tp < 2:
        return Term(name="tp_comm", ms=0.0, uses="no tensor parallelism")
    link = tier(cal.links, tiers["tp"])
    extra = 1.5 if t.recompute == "full" and not cal.recompute else 1.0
    classes = [c for c in cal.comm if c.role == "tp"]
    if not classes:
        nbytes = 2.0 * t.micro_batch * cal.model.seq * cal.model.hidden
        calls = TP_CALLS * _lps(cal, t.pp) * t.microbatches * extra
        ms = calls * call_ms(link, "all_reduce", t.tp, nbytes)
        return Term(name="tp_comm", ms=ms,
                    uses=f"{_link_words(cal, tiers['tp'])}; {TP_CALLS} all-reduces of "
                         f"{nbytes / 1e6:.1f} MB per layer and microbatch, fully exposed "
                         "(assumed: the run has no TP)")
    ms = sum(c.calls_per_step * r.tp_calls * extra * c.exposed_share * anchor(cal.links, c)
             * call_ms(link, c.collective, t.tp, c.bytes_per_call * r.tokens) for c in classes)
    per = sum(c.calls_per_step for c in classes) / (_lps(cal, cal.pp) * cal.microbatches)
    share = sum(c.exposed_ms for c in classes) / max(sum(c.transfer_ms for c in classes), 1e-12)
    return Term(name="tp_comm", ms=ms,
                uses=f"{_link_words(cal, tiers['tp'])}; {per:.3g} calls per layer and "
                     f"microbatch, {share:.0%} exposed (as in {cal.run})")


def dp_term(cal: Calibration, t: Target, terms: dict[str, Term],
            tiers: dict[str, str]) -> tuple[Term, float]:
    """The exposed DP gradient traffic of the target, and its whole transfer time."""
    if t.dp < 2:
        return Term(name="dp_comm", ms=0.0, uses="no data parallelism"), 0.0
    link = tier(cal.links, tiers["dp"])
    buckets = [c for c in cal.comm if c.role == "dp"]
    zero3 = (1.5 if t.zero == 3 else 1.0) / (1.5 if cal.zero == 3 else 1.0)
    if buckets:
        per_step = sum(c.bytes_per_call * c.calls_per_step for c in buckets)
        nbytes = per_step * (cal.tp * cal.pp) / (t.tp * t.pp) * zero3
        n = max(1, round(cal.dp_buckets * _lps(cal, t.pp) / _lps(cal, cal.pp)))
        basis = f"{cal.dp_buckets} buckets per step in {cal.run}"
        overlap = cal.dp_overlap
        k = sum(anchor(cal.links, c) * c.transfer_ms for c in buckets) / max(
            sum(c.transfer_ms for c in buckets), 1e-12)
    else:
        nbytes = GRAD_BYTES * cal.model.params / (t.tp * t.pp) * zero3
        n, basis, overlap, k = _lps(cal, t.pp), "one bucket per layer (assumed)", 1.0, 1.0
    bucket = k * call_ms(link, "all_reduce", t.dp, nbytes / n)
    window = backward_window_ms(tuple(terms.values()), t.microbatches)
    exposed = dp_exposed_ms(bucket, n, window, overlap)
    return Term(name="dp_comm", ms=exposed,
                uses=f"{_link_words(cal, tiers['dp'])}; {nbytes / 1e6:.0f} MB of gradients "
                     f"per rank in {n} buckets of {bucket:.2f} ms ({basis}), issued evenly "
                     f"through the last microbatch's backward ({window:.2f} ms), overlap "
                     f"window {overlap:.0%} of it"
                ), n * bucket


def _group_size(c: CommClass, t: Target) -> int:
    return {"tp": t.tp, "dp": t.dp, "pp": t.pp, "world": t.gpus}.get(c.group_kind,
                                                                     c.group_size)


def other_term(cal: Calibration, t: Target, tiers: dict[str, str]) -> Term:
    """Control messages per step on their new groups; other collectives as measured."""
    ms = 0.0
    for c in cal.comm:
        if c.role == "control":
            n = _group_size(c, t)
            link = tier(cal.links, tiers.get(c.group_kind, c.tier))
            ms += c.calls_per_step * c.exposed_share * anchor(cal.links, c) * call_ms(
                link, c.collective, n, c.bytes_per_call)
    carried = term_ms(cal.terms, "other_comm") - sum(
        c.exposed_ms for c in cal.comm if c.role == "control")
    return Term(name="other_comm", ms=ms + carried,
                uses=f"per-step messages under 64 KiB as in {cal.run}, hops x latency on "
                     f"their new groups; {carried:.2f} ms of other collectives carried")


def bubble_term(cal: Calibration, t: Target, r: _Ratios, terms: dict[str, Term],
                tiers: dict[str, str]) -> Term:
    """(S-1)(f+b) + (2(S-1) + M)p, scaled by the run's measured / modelled bubble."""
    if t.pp < 2:
        return Term(name="bubble", ms=0.0, uses="no pipeline")
    sends = [c for c in cal.comm if c.role == "pp"]
    nbytes = (max(c.bytes_per_call for c in sends) * r.tokens if sends
              else 2.0 * t.micro_batch * cal.model.seq * cal.model.hidden)
    p = p2p_ms(cal.links, tiers["pp"], nbytes)
    modelled = pipeline_bubble_ms(tuple(terms.values()), t.pp, t.microbatches, p)
    theory = (t.pp - 1) / (t.pp - 1 + t.microbatches)
    if cal.bubble is not None:
        ratio, basis = cal.bubble.ratio, (f"x {cal.bubble.ratio:.2f}, the measured / modelled "
                                          f"bubble of {cal.run}")
    else:
        ratio, basis = 1.0, f"{cal.run} has no pipeline: the model as is"
    return Term(name="bubble", ms=modelled * ratio,
                uses=f"(S-1)(f+b) + (2(S-1) + M)p with S={t.pp}, M={t.microbatches}, "
                     f"p={p:.3f} ms on {tiers['pp']} (1F1B theory {theory:.1%} of the "
                     f"step), {basis}")


def memory_gb(cal: Calibration, t: Target) -> tuple[float, float]:
    """(training state, activations) in GB per GPU as the formulas give them
    (analyzers.plan.layouts.memory_bytes), full recomputation when the plan adds it or the run
    already recomputes."""
    mdl = cal.model
    state, act = memory_bytes(MemoryShape(
        params=mdl.params, layers=mdl.layers, hidden=mdl.hidden, seq=mdl.seq,
        micro_batch=t.micro_batch, tp=t.tp, pp=t.pp, dp=t.dp, zero=t.zero,
        microbatches=t.microbatches, full_recompute=t.recompute == "full" or cal.recompute))
    return state / 1e9, act / 1e9


def recompute_label(cal: Calibration, t: Target) -> str:
    """`full` when the plan adds full recomputation, `as run` when the run already
    recomputes, `none` otherwise."""
    if t.recompute == "full" and not cal.recompute:
        return "full"
    return "as run" if cal.recompute else "none"


def fitted_memory_gb(cal: Calibration, modelled_gb: float,
                     device_memory_gb: float | None) -> tuple[float, float]:
    """(predicted memory, device memory) in GB: the formulas' memory x the run's measured /
    modelled peak when it traced its memory (MemoryCalibration), on the device memory it
    traced, else the peak table's (80 GB when unknown)."""
    mc = cal.memory
    if mc is None:
        return modelled_gb, device_memory_gb or 80.0
    return modelled_gb * mc.scale, mc.device_memory_gb or device_memory_gb or 80.0


def predict(cal: Calibration, t: Target, device_memory_gb: float | None) -> Plan:
    """The predicted step of one layout, term by term (analyzers.results.Plan.terms)."""
    r = _ratios(cal, t)
    tiers = _tiers(t)
    terms = compute_terms(cal, t, r)
    terms["tp_comm"] = tp_term(cal, t, r, tiers)
    dp, dp_total = dp_term(cal, t, terms, tiers)
    terms["dp_comm"] = dp
    terms["other_comm"] = other_term(cal, t, tiers)
    terms["bubble"] = bubble_term(cal, t, r, terms, tiers)
    terms["straggler_wait"] = Term(name="straggler_wait", ms=cal.straggler_wait_ms,
                                   uses=f"as measured in {cal.run} (not modelled)")
    terms["idle"] = Term(name="idle", ms=cal.idle_ms,
                         uses=f"as measured in {cal.run} (host gaps; not modelled)")
    ordered = tuple(terms[n] for n in ("compute", "other_kernels", "optimizer", "recompute",
                                       "memory", "tp_comm", "dp_comm", "other_comm",
                                       "bubble", "straggler_wait", "idle"))
    step = sum(x.ms for x in ordered)
    state, act = memory_gb(cal, t)
    total, mem = fitted_memory_gb(cal, state + act, device_memory_gb)
    mfu = cal.model_flops_per_step / (step / 1e3 * t.gpus * cal.peak_tflops * 1e12)
    compute = sum(terms[n].ms for n in ("compute", "other_kernels", "optimizer",
                                        "recompute", "memory"))
    return Plan(
        tp=t.tp, pp=t.pp, dp=t.dp, zero=t.zero, microbatches=t.microbatches, interleave=1,
        recompute=recompute_label(cal, t),
        memory_gb=total, state_gb=state, activation_gb=act, compute_ms=compute,
        bubble_ms=terms["bubble"].ms, tp_comm_ms=terms["tp_comm"].ms, dp_comm_ms=dp_total,
        dp_exposed_ms=dp.ms, step_ms=step, mfu=mfu, tp_link=tiers["tp"],
        dp_link=tiers["dp"], fits=total <= MEMORY_HEADROOM * mem,
        micro_batch=t.micro_batch, terms=ordered)
