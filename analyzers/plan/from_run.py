"""`stepscope plan --from RUN`: layouts of the run's model ranked by the MFU its own
calibration predicts (docs/planner.md, "Calibrated on a run").

The layouts are those of `analyzers.plan.layouts.plan` (TP a power of two up to twice the node,
PP a divisor of the GPUs up to the layer count, DP the rest), restricted by what the user
fixed (`Constraints`), each with the micro-batch size of the run (or the micro-batch
count asked for) and, for each (TP, PP, DP), the first setting that fits in memory:
ZeRO 0..3 with the run's recompute, then 0..3 with full recomputation. TP must divide
the attention heads when the run's attention shapes show them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from stepscope.analyzers.flops.peaks import DevicePeak
from stepscope.analyzers.plan.calibrate import tier
from stepscope.analyzers.plan.layouts import MAX_PLAN_GPUS, device_memory_gb, memory_shortfall
from stepscope.analyzers.plan.predict import Target, fitted_memory_gb, predict, target_of
from stepscope.analyzers.results import Calibration, Job, Plan, PlanResult
from stepscope.ingest.errors import UsageError

TP_DEGREES = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class Constraints:
    """What the user fixed; None leaves it to the planner."""
    gpus: int | None = None
    gpus_per_node: int | None = None
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    zero: int | None = None
    microbatches: int | None = None


def _gpus(cal: Calibration, c: Constraints) -> int:
    """The GPU count: --gpus, else TP x PP x DP when all three are given, else the run's."""
    given = [c.tp, c.pp, c.dp]
    product = math.prod(x for x in given if x) if all(given) else None
    gpus = c.gpus or product or cal.gpus
    if product is not None and product != gpus:
        raise UsageError(f"plan: --tp {c.tp} x --pp {c.pp} x --dp {c.dp} = {product} is not "
                         f"--gpus {gpus}")
    if not 1 <= gpus <= MAX_PLAN_GPUS:
        raise UsageError(f"plan: gpus must be from 1 to {MAX_PLAN_GPUS}")
    return gpus


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def _batch(cal: Calibration, dp: int, c: Constraints) -> tuple[int, int] | None:
    """(microbatches, micro-batch size) that make the global batch on DP replicas, or
    None when no whole number of sequences does."""
    sequences = cal.model.global_batch_tokens / cal.model.seq
    if c.microbatches:
        b = sequences / (dp * c.microbatches)
        return (c.microbatches, int(b)) if b >= 1 and b == int(b) else None
    m = sequences / (dp * cal.micro_batch)
    return (int(m), cal.micro_batch) if m >= 1 and m == int(m) else None


def targets(cal: Calibration, c: Constraints) -> list[list[Target]]:
    """Per (TP, PP, DP), the candidate settings in the order tried."""
    gpus = _gpus(cal, c)
    per_node = c.gpus_per_node or cal.gpus_per_node
    tps = [c.tp] if c.tp else [t for t in TP_DEGREES if t <= 2 * per_node]
    heads = cal.model.heads
    out = []
    for tp in tps:
        if gpus % tp or (heads and heads % tp):
            continue
        pps = [c.pp] if c.pp else [p for p in _divisors(gpus // tp) if p <= cal.model.layers]
        for pp in pps:
            if (gpus // tp) % pp or pp > cal.model.layers:
                continue
            dp = gpus // (tp * pp)
            batch = _batch(cal, dp, c)
            if (c.dp and dp != c.dp) or batch is None:
                continue
            zeros = [c.zero] if c.zero is not None else [0, 1, 2, 3]
            out.append([Target(tp=tp, pp=pp, dp=dp, zero=z, microbatches=batch[0],
                               micro_batch=batch[1], gpus_per_node=per_node, recompute=rc)
                        for rc in ("as run", "full") for z in zeros])
    return out


def why_no_layout(cal: Calibration, c: Constraints) -> str:
    """Why `targets` found no (TP, PP, DP) at all, naming the first rule that left none."""
    gpus, heads, layers = _gpus(cal, c), cal.model.heads, cal.model.layers
    per_node = c.gpus_per_node or cal.gpus_per_node
    tps = [c.tp] if c.tp else [t for t in TP_DEGREES if t <= 2 * per_node]
    tps_ok = [t for t in tps if not gpus % t and not (heads and heads % t)]
    if not tps_ok:
        which = f"--tp {c.tp} does not" if c.tp else f"no TP among {', '.join(map(str, tps))}"
        return (f"{which} divide the {gpus} GPUs"
                + (f" and the model's {heads} attention heads" if heads else ""))
    pairs = [(t, p) for t in tps_ok for p in ([c.pp] if c.pp else _divisors(gpus // t))
             if not (gpus // t) % p and p <= layers]
    if not pairs:
        return f"no PP divides the {gpus} GPUs / TP and is at most the model's {layers} layers"
    dps = sorted({gpus // (t * p) for t, p in pairs})
    if c.dp and c.dp not in dps:
        return f"--dp {c.dp} is not among the DP degrees left ({', '.join(map(str, dps))})"
    split = (f"{c.microbatches} microbatches of whole sequences" if c.microbatches
             else f"whole micro-batches of {cal.micro_batch} sequences (the run's)")
    return (f"the global batch of {cal.model.global_batch_tokens / cal.model.seq:g} "
            f"sequences does not split into {split} on DP "
            f"{', '.join(map(str, [c.dp] if c.dp else dps))}")


def plan_from(cal: Calibration, device: DevicePeak | None, c: Constraints,
              top: int = 10) -> PlanResult:
    """The plan model of a calibrated run: feasible layouts by predicted MFU, the run's
    calibration, and the model's step at the run's own layout (`baseline`)."""
    memory = device_memory_gb(device) if device else None
    plans: list[Plan] = []
    for candidates in targets(cal, c):
        tried = [predict(cal, t, memory) for t in candidates]
        fitting = [p for p in tried if p.fits]
        plans.append(fitting[0] if fitting else tried[-1])
    plans.sort(key=lambda p: (not p.fits, -p.mfu, p.memory_gb))
    feasible = [p for p in plans if p.fits]
    per_node = c.gpus_per_node or cal.gpus_per_node
    job = Job(params=cal.model.params, gpus=_gpus(cal, c), gpus_per_node=per_node,
              seq=cal.model.seq, global_batch_tokens=cal.model.global_batch_tokens,
              layers=cal.model.layers, hidden=cal.model.hidden,
              heads=cal.model.heads or max(1, cal.model.hidden // 128),
              micro_batch=cal.micro_batch,
              network_gbs=tier(cal.links, "network").bus_bw_gbs,
              efficiency=min(1.0, max(1e-9, cal.kernel_efficiency)), dtype=cal.peak_dtype)
    shown = feasible[:top] if feasible else plans[:top]
    return PlanResult(job=job, device=cal.device or (device.name if device else "unknown"),
                      evaluated=len(plans), feasible=len(feasible), plans=tuple(shown),
                      dtype=cal.peak_dtype,
                      dtype_reason=f"the peak {cal.run} was measured against",
                      calibration=cal, baseline=predict(cal, target_of(cal), memory),
                      none_reason=(why_no_layout(cal, c) if not plans else None if feasible
                                   else memory_shortfall(plans, fitted_memory_gb(
                                       cal, 0.0, memory)[1])))
