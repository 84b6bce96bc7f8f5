"""MFU and HFU against hardware peaks, with a waterfall of where the lost points went.

Model FLOPs come from a model spec (`--model FILE`, read by analyzers/flops/model_spec.py; formulas
below) and/or from the traces (matmul / attention / convolution shapes,
analyzers/sql/mfu/flops.sql). Sources:

* palm (default): per token 6N + 12*L*h*s (PaLM, Chowdhery et al. 2022, App. B: 6N
  for the weight matmuls forward+backward, 12*L*h*s for the two attention matmuls over
  the full square); `attention: causal` halves the attention term.
* megatron: per token 72*L*h^2 * (1 + s/(6h) + V/(12*L*h)) (Korthikanti et al. 2022,
  model FLOPs without recompute; V = `vocab`, 0 when not given); causal: s/(12h).
* torchtitan: 6N + 12*L*h*s, attention never halved (torchtitan's
  `get_dense_model_nparams_and_flops`; N excludes the embedding, as the spec's n_params).
MoE: N is `n_active_params` when given (palm, torchtitan).

MFU = model FLOPs per step / (step time x world size x peak per GPU); HFU adds the
FLOPs re-executed for activation checkpointing (and FlashAttention's backward
re-computation). The waterfall starts at 100% of peak, loses 1 - F/(P*T_compute) to
kernel efficiency (compute running below peak), then X/T_step * F/(P*T_compute) to each
non-compute category X of the attribution, and ends exactly at MFU.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import msgspec

from stepscope.analyzers._sql import sql
from stepscope.analyzers.context import RunContext
from stepscope.analyzers.flops import bound as flops_bound
from stepscope.analyzers.flops.counted_ops import counted_ops
from stepscope.analyzers.flops.model_spec import ModelSpec
from stepscope.analyzers.flops.peaks import DevicePeak, table_version
from stepscope.analyzers.flops.roofline import kernel_table
from stepscope.analyzers.numbers import mfu_percent, percent
from stepscope.analyzers.profiler_settings import no_shapes_reason, profiler_settings
from stepscope.analyzers.results import CATEGORIES, Breakdown, Mfu, WaterfallStep


def flops_per_token(spec: ModelSpec) -> float:
    """Training (forward + backward) model FLOPs per token under the spec's convention."""
    n = spec.n_active_params or spec.n_params
    L, h, s = spec.n_layers, spec.hidden, spec.seq_len
    causal = spec.attention == "causal"
    if spec.convention == "megatron":
        attn = s / (12 * h) if causal else s / (6 * h)
        return 72.0 * L * h * h * (1 + attn + spec.vocab / (12 * L * h))
    if spec.convention == "torchtitan":
        return 6.0 * n + 12.0 * L * h * s
    return 6.0 * n + (6.0 if causal else 12.0) * L * h * s


def flops_per_step(spec: ModelSpec) -> float:
    return flops_per_token(spec) * spec.global_batch_tokens




def trace_flops(con: duckdb.DuckDBPyConnection, run: str,
                max_rate: float | None = None) -> dict[str, float] | None:
    """Model, recompute and extra hardware FLOPs per step summed over ranks (mean over
    complete steps), with `n_ranks`, the ranks summed over; None when no op had shapes to
    count. Ops claiming more than `max_rate` FLOP/s over their kernels' time are left out
    (analyzers.flops.bound)."""
    with counted_ops(con, run):
        row = con.execute(sql("mfu/trace_flops.sql"), {"run": run, "max_rate": max_rate}
                          ).fetchall()[0]
    model, recompute, extra, n_ops, n_ranks = row
    if not n_ops:
        return None
    return {"model": float(model), "recompute": float(recompute), "extra": float(extra),
            "n_ops": int(n_ops), "n_ranks": int(n_ranks)}


def job_flops(from_trace: dict[str, float] | None, world: int) -> dict[str, float] | None:
    """The trace's FLOPs for the whole job: summed over the traced ranks and scaled by
    world / traced ranks when only some of the job's ranks were traced (--ranks, files
    that could not be read, one rank's trace), so that MFU is that of the traced GPUs
    (the others assumed to do the same work) and not diluted by ranks never seen."""
    if from_trace is None:
        return None
    scale = world / from_trace["n_ranks"] if from_trace["n_ranks"] else 1.0
    if scale == 1.0:
        return from_trace
    return {**from_trace, **{k: from_trace[k] * scale for k in ("model", "recompute", "extra")}}


def partial_note(from_trace: dict[str, float] | None, world: int) -> str | None:
    """Says that the trace's FLOPs were scaled up from the traced ranks (job_flops)."""
    if from_trace is None or not from_trace["n_ranks"] or from_trace["n_ranks"] >= world:
        return None
    traced = int(from_trace["n_ranks"])
    return (f"model FLOPs counted on the {traced} traced rank(s) of {world} and scaled to "
            f"the job ({world}/{traced}x): MFU is that of the traced GPUs, assuming the "
            "others do the same work")


@dataclass(frozen=True)
class DtypeChoice:
    """The element type of the run's matmuls and the column of the peak table it uses."""
    dtype: str          # bf16 | fp16 | fp8 | tf32 | fp32 | fp64
    source: str         # flag | ops | kernels | default
    share: float | None  # of the weighted work (FLOPs for ops, GPU time for kernels)
    peak_dtype: str     # the peak-table column used
    reason: str         # which peak and why, in words


def _weights(con: duckdb.DuckDBPyConnection, run: str,
             max_rate: float | None) -> dict[str, dict[str, float]]:
    """{source: {dtype: weight}} from analyzers/sql/mfu/matmul_dtype.sql."""
    query = sql("mfu/matmul_dtype.sql")
    out: dict[str, dict[str, float]] = {"ops": {}, "kernels": {}}
    params = {"run": run, "max_rate": max_rate}
    with counted_ops(con, run):
        rows = con.execute(query, params).fetchall()
    for source, dtype, weight in rows:
        out[source][dtype] = float(weight or 0.0)
    return out


def _top(weights: dict[str, float]) -> tuple[str, float] | None:
    total = sum(weights.values())
    if total <= 0:
        return None
    best = max(weights, key=lambda d: weights[d])
    return best, weights[best] / total


def choose_dtype(con: duckdb.DuckDBPyConnection, run: str, flag: str | None,
                 device: DevicePeak | None, max_rate: float | None = None) -> DtypeChoice:
    """`--dtype` when given; else the matmul/attention ops' `Input type` weighted by their
    FLOPs; else the GEMM/attention kernel names weighted by time; else bf16. fp32 work
    uses the TF32 peak only where TF32 kernels ran (Ampere and later run fp32 matmuls as
    TF32 only when allowed; PyTorch's default for matmuls is not to)."""
    weights = _weights(con, run, max_rate)
    kernels = _top(weights["kernels"])
    if flag is not None:
        dtype, source, share = flag, "flag", None
    elif (ops := _top(weights["ops"])) is not None:
        dtype, source, share = ops[0], "ops", ops[1]
    elif kernels is not None:
        dtype, source, share = kernels[0], "kernels", kernels[1]
    else:
        dtype, source, share = "bf16", "default", None
    peak_dtype, reason = peak_for_dtype(dtype, source, share, device, weights["kernels"])
    return DtypeChoice(dtype, source, share, peak_dtype, reason)


def peak_for_dtype(dtype: str, source: str, share: float | None, device: DevicePeak | None,
              kernel_weights: dict[str, float]) -> tuple[str, str]:
    how = {"flag": "--dtype", "default": "no dtype in the traces (default)",
           "ops": "the matmul/attention ops' Input type",
           "kernels": "the GEMM/attention kernel names"}[source]
    pct = f", {100 * share:.0f}% of the work" if share is not None else ""
    base = f"{dtype} from {how}{pct}"
    if dtype not in ("fp32", "fp64") or source == "flag":
        return dtype, f"{base}: {dtype} peak"
    has_tf32 = device is not None and device.tflops.get("tf32") is not None
    tf32_time = kernel_weights.get("tf32", 0.0)
    gemm_time = sum(kernel_weights.values())
    if device is None:
        return "fp32", f"{base}: fp32 peak"
    if not has_tf32:
        return "fp32", f"{base}: fp32 peak (no TF32 on this GPU: TF32 arrived with Ampere)"
    if gemm_time > 0 and tf32_time / gemm_time >= 0.5:
        return "tf32", (f"{base}: TF32 peak ({100 * tf32_time / gemm_time:.0f}% of GEMM "
                        "kernel time runs TF32 kernels)")
    return "fp32", (f"{base}: fp32 peak (no TF32 kernels ran; PyTorch keeps fp32 matmuls "
                    "off TF32 unless allow_tf32 / set_float32_matmul_precision allows it)")


def waterfall(efficiency: float, breakdown: Breakdown,
              step_ms: float) -> tuple[WaterfallStep, ...]:
    """Points (percent of peak) lost at each stage; 100 + sum(points) == 100 * mfu."""
    out = [WaterfallStep(name="kernel_efficiency", points=-100.0 * (1.0 - efficiency))]
    for cat in CATEGORIES:
        if cat == "compute":
            continue
        out.append(WaterfallStep(
            name=cat,
            points=-100.0 * breakdown.ms(cat) / step_ms * efficiency if step_ms else 0.0))
    return tuple(out)


def _peak(ctx: RunContext, choice: DtypeChoice) -> tuple[float | None, str | None, str | None]:
    """(peak FLOP/s per GPU, device label, message): no peak comes with a message."""
    device, opts = ctx.device, ctx.options
    entry: DevicePeak | None = device.peak
    name = device.name
    if opts.peak_tflops is not None:
        forced = f"{name or 'unknown device'} (--peak-tflops {opts.peak_tflops:g})"
        return opts.peak_tflops * 1e12, forced, None
    label = entry.name if entry else name
    if not ctx.info.ranks:  # NCCL logs or Flight Recorder dumps alone: no op, no FLOP
        return None, label, ("MFU needs profiler traces (torch.profiler / Kineto) of the "
                             "ranks: this run holds none, only NCCL evidence")
    if entry is None:
        if name is None and device.has_gpu:
            return None, label, ("the traces do not name the GPU (no deviceProperties, or "
                                 "an empty name, and its properties match no entry of the "
                                 "table); pass --peak-tflops")
        return None, label, (f"unknown device '{name or 'CPU only'}': no peak in the table "
                             f"(version {table_version()}); pass --peak-tflops")
    peak = entry.flops(choice.peak_dtype)
    if peak is None:
        return None, label, (f"{entry.name} has no {choice.peak_dtype} peak ({choice.reason}); "
                             "pass --dtype (e.g. fp16) or --peak-tflops")
    return peak, label, None


SHAPED_MAJORITY = 0.5   # below this share of compute time with shapes, MFU is a lower bound


def shaped_share(ctx: RunContext, max_rate: float | None) -> float | None:
    """Share of the complete steps' compute-kernel time in ops with shapes: kernels whose
    op, parent or grandparent is a shaped op (the roofline's rf_kernels, built once per
    report); None without GPU kernels."""
    if ctx.info.timeline != "gpu":
        return None
    kernel_table(ctx.con, ctx.run, max_rate)
    shaped, total = ctx.con.execute(sql("mfu/shaped_share.sql")).fetchall()[0]
    return float(shaped or 0.0) / float(total) if total else None


def coverage(mfu: float, source: str | None, share: float | None, replays: str = ""
             ) -> tuple[bool, float | None, str]:
    """(lower_bound, mfu_at_shaped_rate, headline): what an MFU covers, in words. The
    trace's FLOPs count only the shaped work; when that is under SHAPED_MAJORITY of the
    compute time, the MFU is a lower bound, and the unshaped kernels' time at the shaped
    ones' rate (F / T_shaped x T_all: mfu / share) bounds it from the other side.
    `replays` (graph_replays_note) names the CUDA/HIP graph replays whose FLOPs are not in
    the trace's count."""
    if source != "trace":
        return False, None, f"MFU {percent(mfu)}"
    unlinked = f"; {replays}" if replays else ""
    if share is None or share >= SHAPED_MAJORITY:
        return False, None, f"MFU {percent(mfu)}{unlinked}"
    at_rate = mfu / share if share > 0 and mfu / share <= 1.0 else None
    rest = (f"; about {percent(at_rate)} if the other {percent(1 - share)} ran at the shaped "
            "kernels' FLOP rate" if at_rate is not None else "")
    return True, at_rate, (f"MFU {mfu_percent(mfu, True)} from the {percent(share)} of "
                           f"compute time with shapes{rest}{unlinked}; pass --model FILE "
                           "for the model's FLOPs")


def graph_replays_note(con: duckdb.DuckDBPyConnection, run: str) -> str:
    """'' without CUDA/HIP graph replays; else why their ops' FLOPs are not counted. A
    replay's ops (and shapes) are recorded only while its graph is captured; no trace yet
    names a graph id or exec handle on both a capture and a launch (the real vLLM, SGLang
    and FLUX traces of tests/data, the HTA traces: none), so a replay is never matched to
    a capture by guesswork (kernel sequences) and the shapes stay unlinked."""
    (launches, captures), = con.execute(sql("mfu/graph_replays.sql"), {"run": run}).fetchall()
    if not launches:
        return ""
    where = (f"the trace's {captures} graph capture(s) name no graph id to match a replay to"
             if captures else "the trace holds no capture of the graph")
    return (f"replays of a captured graph: shapes not linked ({launches} CUDA/HIP graph "
            f"launch(es) ran ops the profiler records only at capture; {where})")


NO_FLOPS = ("no model FLOPs: pass --model FILE (n_params, n_layers, hidden, seq_len, "
            "global_batch_tokens) or profile with record_shapes=True")


def no_flops_message(ctx: RunContext) -> str:
    """Why there are no model FLOPs: ops with shapes that only ran inside CUDA/HIP graph
    captures (recorded, not run) are named as such; else NO_FLOPS."""
    with counted_ops(ctx.con, ctx.run):
        (captured,), = ctx.con.execute(sql("mfu/captured_ops.sql"), {"run": ctx.run}).fetchall()
    if not captured:
        why = no_shapes_reason(profiler_settings(ctx.con, ctx.run))
        return (f"no model FLOPs: {why}; pass --model FILE (n_params, n_layers, hidden, "
                "seq_len, global_batch_tokens)") if why else NO_FLOPS
    return (f"no model FLOPs: the {captured} op(s) with shapes ran inside CUDA/HIP graph "
            "captures, whose kernels were recorded into a graph, not run; profile steps "
            "that replay the graph and pass --model FILE (n_params, n_layers, hidden, "
            "seq_len, global_batch_tokens)")


def mfu_section(ctx: RunContext) -> Mfu:
    """The `mfu` section of the report (docs/report.md); `mfu` is None with a `message`
    when it cannot be computed honestly."""
    world = ctx.world
    bound = flops_bound.rate_bound(ctx)
    choice = choose_dtype(ctx.con, ctx.run, ctx.options.dtype, ctx.device.peak, bound)
    step_ms = ctx.attribution.step_time_ms
    counted = trace_flops(ctx.con, ctx.run, bound)
    from_trace = job_flops(counted, world)
    odd, n_odd = flops_bound.implausible_ops(ctx.con, ctx.run, ctx)
    shaped = shaped_share(ctx, bound)
    from_spec = flops_per_step(ctx.spec) if ctx.spec else None
    model = from_spec if from_spec else (from_trace["model"] if from_trace else None)
    base = Mfu(
        model_flops_per_step=model,
        flops_source="spec" if from_spec else ("trace" if model else None),
        flops_from_spec=from_spec,
        flops_from_trace=from_trace["model"] if from_trace else None,
        recompute_flops_per_step=from_trace["recompute"] if from_trace else None,
        flops_sources_ratio=(from_trace["model"] / from_spec
                             if from_spec and from_trace and from_trace["model"] > 0 else None),
        peak_table_version=table_version(), dtype=choice.dtype,
        dtype_source=choice.source, dtype_share=choice.share, peak_dtype=choice.peak_dtype,
        peak_reason=choice.reason, implausible_ops=odd, implausible_op_count=n_odd,
        shaped_share=shaped)
    peak, label, message = _peak(ctx, choice)
    if peak is None:
        return msgspec.structs.replace(base, device=label, message=message)
    notes = [flops_bound.implausible_message(odd, n_odd) if from_spec is None else None,
             partial_note(counted, world) if from_spec is None else None]
    if ctx.device.kinds > 1:
        notes.append("ranks run on different devices; MFU uses the most common one")
    message = "; ".join(n for n in notes if n) or None
    if not model or step_ms <= 0:
        return msgspec.structs.replace(base, device=label, peak_flops_per_gpu=peak,
                                       message=no_flops_message(ctx))
    step_s = step_ms / 1e3
    hw = model + (from_trace["recompute"] + from_trace["extra"] if from_trace else 0.0)
    compute_ms = ctx.attribution.breakdown_ms.compute
    efficiency = (model / world) / (peak * compute_ms / 1e3) if compute_ms > 0 else 0.0
    mfu, hfu = model / (step_s * world * peak), hw / (step_s * world * peak)
    if (impossible := flops_bound.above_peak_message(mfu, hfu, base.flops_source)):
        return msgspec.structs.replace(base, device=label, peak_flops_per_gpu=peak,
                                       message="; ".join(n for n in (impossible, message) if n))
    lower, at_rate, headline = coverage(mfu, base.flops_source, shaped,
                                        graph_replays_note(ctx.con, ctx.run))
    return msgspec.structs.replace(
        base, device=label, peak_flops_per_gpu=peak, message=message,
        lower_bound=lower, mfu_at_shaped_rate=at_rate, headline=headline,
        mfu=mfu, hfu=hw / (step_s * world * peak),
        achieved_tflops_per_gpu=((model / world) / (compute_ms / 1e3) / 1e12
                                 if compute_ms > 0 else None),
        waterfall=waterfall(efficiency, ctx.attribution.breakdown_ms, step_ms))
