"""Layout planner: enumerate TP x PP x DP x ZeRO layouts for a dense transformer and
rank the feasible ones by predicted MFU (docs/planner.md). The same standard formulas
back the advisor's predicted gains.

Per GPU and step, with N parameters, L layers, hidden h, sequence s, micro-batch b,
global batch G tokens, M = G / (DP * b * s) microbatches per pipeline:

* memory: training state 16 bytes/param under mixed-precision Adam, sharded by ZeRO
  stage over DP (16, 4 + 12/DP, 2 + 14/DP, 16/DP bytes) on N/(TP*PP) parameters; plus
  activations with selective recompute and sequence parallelism, 34*s*b*h/TP bytes per
  layer and in-flight microbatch (Korthikanti et al. 2022), L/PP layers, min(PP, M)
  microbatches in flight under 1F1B;
* compute: (6N + 12*L*h*s) * G / GPUs FLOPs at an assumed kernel efficiency;
* pipeline bubble: compute * (PP-1)/(v*M) with v <= 4 model chunks per stage
  (interleaved 1F1B, v = 1 plain 1F1B: the bubble is then (S-1)/(S-1+M) of the step); interleaving
  needs M to be a multiple of PP;
* recompute: selective when the activations fit, else full recomputation (each layer
  keeps only its 2*s*b*h/TP input; one more forward pass: compute x 4/3);
* tensor parallel: 4 all-reduces of s*b*h bf16 values per layer and microbatch (2 forward,
  2 backward), ring 2(TP-1)/TP * bytes over NVLink inside a node, the network otherwise,
  on the critical path;
* data parallel: the gradients (2 bytes * N/(TP*PP)), ring 2(DP-1)/DP * bytes over the
  network (NVLink when the whole DP group sits in one node); ZeRO-3 moves 1.5x that;
  hidden behind the last microbatch's backward (2/3 of its compute), the rest exposed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import msgspec

from stepscope.analyzers.flops.peaks import DevicePeak
from stepscope.analyzers.results import (
    DEFAULT_EFFICIENCY,
    DEFAULT_NETWORK_GBS,
    Job,
    Plan,
    PlanResult,
)
from stepscope.ingest.errors import UsageError

__all__ = ["DEFAULT_EFFICIENCY", "DEFAULT_NETWORK_GBS", "Job", "MemoryShape", "Plan",
           "PlanResult", "bubble_theory", "evaluate", "make_job", "memory_bytes", "plan",
           "plan_dtype", "plan_result", "rank_of"]
MEMORY_HEADROOM = 0.9         # usable share of device memory
MAX_INTERLEAVE = 4            # model chunks per stage (more costs P2P traffic)


def zero_state_bytes_per_param(stage: int, dp: int) -> float:
    """Mixed-precision Adam training state per parameter (ZeRO paper): 2 (bf16 weights)
    + 2 (grads) + 12 (fp32 master weights, momentum, variance) = 16 bytes, sharded over
    the DP group by stage: 16, 4 + 12/N, 2 + 14/N, 16/N."""
    return {0: 16.0, 1: 4 + 12 / dp, 2: 2 + 14 / dp, 3: 16 / dp}[stage]


@dataclass(frozen=True)
class MemoryShape:
    """What the memory model needs of a model and one layout of it."""
    params: float
    layers: int
    hidden: int
    seq: int
    micro_batch: int
    tp: int
    pp: int
    dp: int
    zero: int
    microbatches: int
    full_recompute: bool


def memory_bytes(m: MemoryShape) -> tuple[float, float]:
    """(training state, activations) in bytes per GPU: 16 bytes/param under Adam sharded
    by ZeRO on N/(TP*PP) parameters; 34*s*b*h/TP per layer and in-flight microbatch
    (selective recompute, sequence parallelism; min(PP, M) microbatches in flight under
    1F1B, ceil(L/PP) layers), or, under full recomputation, each layer's 2*s*b*h/TP input
    plus one layer's 34*s*b*h/TP being recomputed."""
    state = zero_state_bytes_per_param(m.zero, m.dp) * m.params / (m.tp * m.pp)
    sbh_t = m.seq * m.micro_batch * m.hidden / m.tp
    in_flight = min(m.pp, m.microbatches) * math.ceil(m.layers / m.pp)
    if m.full_recompute:
        return state, 2.0 * sbh_t * in_flight + 34.0 * sbh_t
    return state, 34.0 * sbh_t * in_flight


def bubble_theory(stages: int, microbatches: int, interleave: int = 1) -> float:
    """Share of a 1F1B / GPipe step lost to the pipeline bubble, (S-1)/(S-1+v*M)."""
    if stages <= 1 or microbatches <= 0:
        return 0.0
    return (stages - 1) / (stages - 1 + interleave * microbatches)


HEAD_DIM = 128
HEAD_MULTIPLE = 8  # derived heads are a multiple of 8, so TP 8 (one node) divides them


def default_shape(params: float) -> tuple[int, int, int]:
    """(layers, hidden, heads) of a dense transformer with ~params weights when not
    given: 12*L*h^2 = N with h ~ 110 L (Llama-like aspect), 128 per head and, from 8
    heads up, a multiple of 8 heads (70e9: 78 layers, hidden 8192, 64 heads as Llama 2
    70B; a multiple of 128 alone gave 8704 and 68 heads, which no TP 8 divides)."""
    layers = max(1, round((params / (12 * 110**2)) ** (1 / 3)))
    exact = math.sqrt(params / (12 * layers))
    step = HEAD_DIM * HEAD_MULTIPLE if exact >= HEAD_DIM * HEAD_MULTIPLE else HEAD_DIM
    hidden = max(HEAD_DIM, round(exact / step) * step)
    return layers, hidden, max(1, hidden // HEAD_DIM)


def make_job(params: float, gpus: int, gpus_per_node: int, seq: int,
             global_batch_tokens: float, layers: int | None = None, hidden: int | None = None,
             heads: int | None = None, micro_batch: int = 1,
             network_gbs: float = DEFAULT_NETWORK_GBS,
             efficiency: float = DEFAULT_EFFICIENCY, dtype: str | None = None) -> Job:
    """A job from what the user gave; the shape not given is derived from the parameter
    count (default_shape), heads from the hidden size (HEAD_DIM per head)."""
    if params <= 0 or gpus <= 0 or seq <= 0 or gpus_per_node <= 0:
        raise UsageError("--params, --gpus, --gpus-per-node and --seq must be positive")
    d_layers, d_hidden, _ = default_shape(params)
    width = hidden or d_hidden
    return Job(params=params, gpus=gpus, gpus_per_node=gpus_per_node, seq=seq,
               global_batch_tokens=global_batch_tokens, layers=layers or d_layers,
               hidden=width, heads=heads or max(1, width // HEAD_DIM), micro_batch=micro_batch,
               network_gbs=network_gbs, efficiency=efficiency, dtype=dtype)


MAX_PLAN_GPUS = 1 << 20      # a million GPUs; bounds every loop of the planner
TRAINING_DTYPES = ("bf16", "fp16", "fp32")  # mixed precision first, in order of preference


def plan_dtype(job: Job, device: DevicePeak) -> tuple[str, str | None]:
    """The dtype whose peak the plan uses, and why when the job did not choose it: the
    job's `dtype`, else the first of bf16, fp16, fp32 the device has a peak for (V100:
    fp16). A chosen dtype the device lacks is a usage error naming what to pass."""
    has = [d for d in TRAINING_DTYPES if device.flops(d)]
    if job.dtype is not None:
        if not device.flops(job.dtype):
            raise UsageError(f"plan: {device.name} has no {job.dtype} peak in the peak "
                             f"table; pass --dtype {' or '.join(has) or 'with a peak'}")
        return job.dtype, None
    if not has:
        raise UsageError(f"plan: {device.name} has no bf16, fp16 or fp32 peak in the peak "
                         "table")
    if has[0] == "bf16":
        return "bf16", None
    return has[0], f"{device.name} has no bf16 peak: planned at its {has[0]} peak"


def _divisors(n: int) -> list[int]:
    """Divisors of n in increasing order, in O(sqrt n)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def check_job(job: Job) -> None:
    """Reject a job the planner cannot answer meaningfully, before any loop runs."""
    numbers = (job.params, job.global_batch_tokens, job.network_gbs, job.efficiency)
    if not all(math.isfinite(x) and x > 0 for x in numbers) or job.efficiency > 1:
        raise UsageError("plan: params, global batch tokens and network bandwidth must be "
                         "finite and positive, efficiency in (0, 1]")
    if not 1 <= job.gpus <= MAX_PLAN_GPUS:
        raise UsageError(f"plan: gpus must be from 1 to {MAX_PLAN_GPUS}")
    if min(job.gpus_per_node, job.seq, job.layers, job.hidden, job.heads,
           job.micro_batch) < 1:
        raise UsageError("plan: gpus per node, seq, layers, hidden, heads and micro-batch "
                         "must be at least 1")
    if job.global_batch_tokens < job.micro_batch * job.seq:
        raise UsageError(
            f"plan: a global batch of {job.global_batch_tokens:g} tokens is less than one "
            f"micro-batch ({job.micro_batch} x {job.seq} tokens): no layout has a microbatch")


def evaluate(job: Job, device: DevicePeak, tp: int, pp: int, zero: int,
             recompute: str = "selective", dtype: str = "bf16") -> Plan | None:
    """The predicted step of one layout at the `dtype` peak (plan_dtype), or None when it
    is not a valid layout."""
    if job.gpus % (tp * pp) or job.heads % tp or pp > job.layers:
        return None
    dp = job.gpus // (tp * pp)
    tokens_per_mb = job.micro_batch * job.seq
    microbatches = int(job.global_batch_tokens // (dp * tokens_per_mb))
    if microbatches < 1:
        return None
    layers_per_stage = math.ceil(job.layers / pp)
    # v chunks per stage need a layer each: PP x v <= layers (PP 32 x v 3 is 96 chunks,
    # more than 78 layers)
    interleave = (max(1, min(MAX_INTERLEAVE, job.layers // pp))
                  if pp > 1 and microbatches % pp == 0 else 1)
    peak = device.flops(dtype) or 0.0
    if peak <= 0:
        return None
    mem_total = (device_memory_gb(device) or 80.0) * 1e9
    shard = job.params / (tp * pp)
    state, act = memory_bytes(MemoryShape(
        params=job.params, layers=job.layers, hidden=job.hidden, seq=job.seq,
        micro_batch=job.micro_batch, tp=tp, pp=pp, dp=dp, zero=zero,
        microbatches=microbatches, full_recompute=recompute == "full"))
    model_flops = (6 * job.params + 12 * job.layers * job.hidden * job.seq) \
        * job.global_batch_tokens
    compute = model_flops / job.gpus / (peak * job.efficiency)
    if recompute == "full":
        compute *= 4 / 3
    bubble = compute * (pp - 1) / (interleave * microbatches)
    nvlink = (device.interconnect_gbs or 0) / 2 * 1e9 or job.network_gbs * 1e9
    net = job.network_gbs * 1e9
    tp_bw = nvlink if tp <= job.gpus_per_node else net
    tp_bytes = 2 * job.seq * job.micro_batch * job.hidden
    tp_comm = (0.0 if tp == 1 else layers_per_stage * microbatches * 4
               * 2 * (tp - 1) / tp * tp_bytes / tp_bw)
    dp_in_node = tp * dp <= job.gpus_per_node and pp == 1
    dp_bw = nvlink if dp_in_node else net
    dp_bytes = 2 * shard * (1.5 if zero == 3 else 1.0)
    dp_comm = 0.0 if dp == 1 else 2 * (dp - 1) / dp * dp_bytes / dp_bw
    overlap = (2 / 3) * compute / microbatches
    dp_exposed = max(0.0, dp_comm - overlap)
    step = compute + bubble + tp_comm + dp_exposed
    return Plan(
        tp=tp, pp=pp, dp=dp, zero=zero, microbatches=microbatches, interleave=interleave,
        recompute=recompute,
        memory_gb=(state + act) / 1e9, state_gb=state / 1e9, activation_gb=act / 1e9,
        compute_ms=compute * 1e3, bubble_ms=bubble * 1e3, tp_comm_ms=tp_comm * 1e3,
        dp_comm_ms=dp_comm * 1e3, dp_exposed_ms=dp_exposed * 1e3, step_ms=step * 1e3,
        mfu=model_flops / job.gpus / (step * peak) if step > 0 and peak else 0.0,
        tp_link="nvlink" if tp <= job.gpus_per_node else "network",
        dp_link="nvlink" if dp_in_node else "network",
        fits=state + act <= MEMORY_HEADROOM * mem_total)


def device_memory_gb(device: DevicePeak) -> float | None:
    """HBM capacity per device, from the table's known parts."""
    return MEMORY_GB.get(device.id)


MEMORY_GB = {
    "A100-SXM": 80, "A100-PCIe": 80, "H100-SXM": 80, "H100-PCIe": 80, "H100-NVL": 94,
    "H200-SXM": 141, "H200-NVL": 141, "H800": 80, "H20": 96, "B200": 180, "GB200": 186,
    "B300": 288, "L40S": 48, "L4": 24, "V100-SXM2": 32, "V100-PCIe": 32, "MI250X-GCD": 64,
    "MI250-GCD": 64, "MI300X": 192, "MI325X": 256, "MI355X": 288,
}


def plan(job: Job, device: DevicePeak) -> list[Plan]:
    """Every valid layout, feasible ones first, by predicted MFU; for each (TP, PP, DP)
    the first setting that fits in the order selective recompute with ZeRO 0..3, then
    full recompute with ZeRO 0..3 (later settings only add traffic or compute)."""
    check_job(job)
    dtype, _ = plan_dtype(job, device)
    tps = [t for t in (1, 2, 4, 8, 16, 32) if t <= max(job.gpus_per_node, 8) * 2]
    pps = [p for p in _divisors(job.gpus) if p <= job.layers]
    out: list[Plan] = []
    for tp in tps:
        for pp in pps:
            candidates = [p for rc in ("selective", "full") for z in (0, 1, 2, 3)
                          if (p := evaluate(job, device, tp, pp, z, rc, dtype)) is not None]
            if not candidates:
                continue
            fitting = [p for p in candidates if p.fits]
            out.append(fitting[0] if fitting else candidates[-1])
    return sorted(out, key=lambda p: (not p.fits, -p.mfu, p.memory_gb))


def rank_of(plans: list[Plan], tp: int, pp: int, dp: int) -> int | None:
    """1-based position of a layout among the feasible plans."""
    feasible = [p for p in plans if p.fits]
    for i, p in enumerate(feasible, start=1):
        if (p.tp, p.pp, p.dp) == (tp, pp, dp):
            return i
    return None


def plan_result(job: Job, device: DevicePeak, top: int = 10) -> PlanResult:
    """The plan model: the `top` feasible layouts, best predicted MFU first; when none
    fits, `none_reason` says why and what would (no_fit_reason)."""
    plans = plan(job, device)
    feasible = [p for p in plans if p.fits]
    dtype, reason = plan_dtype(job, device)
    return PlanResult(job=job, device=device.name, evaluated=len(plans),
                      feasible=len(feasible), plans=tuple(feasible[:top]), dtype=dtype,
                      dtype_reason=reason,
                      none_reason=None if feasible else no_fit_reason(job, device, plans))


def layout_words(p: Plan) -> str:
    """'TP 8 x PP 4 x DP 2, ZeRO 3, full recompute': a layout in one phrase."""
    return (f"TP {p.tp} x PP {p.pp} x DP {p.dp}, ZeRO {p.zero}, {p.recompute} recompute")


def memory_shortfall(plans: list[Plan], memory_gb: float | None) -> str:
    """The leanest of layouts that do not fit against what a GPU holds: 'the leanest
    layout (TP 8 x PP 8 x DP 1, ZeRO 0, full recompute) needs 102 GB per GPU; 72 GB of the
    GPU's 80 GB are usable'."""
    least = min(plans, key=lambda p: p.memory_gb)
    total = memory_gb or 80.0
    return (f"the leanest layout ({layout_words(least)}) needs {_gb(least.memory_gb)} GB per "
            f"GPU; {_gb(MEMORY_HEADROOM * total)} GB of the GPU's {_gb(total)} GB are usable")


def _gb(value: float) -> str:
    """GB in a message: whole from 10 GB, else two significant digits (0.45)."""
    return f"{value:.0f}" if value >= 10 else f"{value:.2g}"


def no_fit_reason(job: Job, device: DevicePeak, plans: list[Plan]) -> str:
    """Why no layout of `job` fits, and what would: the leanest layout's memory against
    the GPU's, and the least GPU count (doubling --gpus) at which a layout fits; or, with
    no valid layout at all, the rules that left none."""
    if not plans:
        return (f"no valid layout: TP must divide the {job.heads} attention heads and the "
                f"GPUs, PP be at most the {job.layers} layers, and the global batch of "
                f"{job.global_batch_tokens / job.seq:g} sequences give every DP rank a "
                f"micro-batch of {job.micro_batch}; change --gpus or --global-batch-tokens")
    why = memory_shortfall(plans, device_memory_gb(device))
    gpus = job.gpus * 2
    while gpus <= MAX_PLAN_GPUS:
        fitting = [p for p in plan(msgspec.structs.replace(job, gpus=gpus), device) if p.fits]
        if fitting:
            return (f"{why}; {gpus} GPUs would fit ({layout_words(fitting[0])}), or a GPU "
                    "with more memory")
        gpus *= 2
    return f"{why}; no GPU count up to {MAX_PLAN_GPUS} fits: a GPU with more memory would"
