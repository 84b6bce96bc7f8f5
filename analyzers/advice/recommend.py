"""Recommendations with predicted gains, each grounded in measured numbers and the
standard formulas (docs/advisor.md). No recommendation without evidence, and none whose
expected gain is under MIN_GAIN of the step, and no lost millisecond credited to two
recommendations: where two fixes act on the same lost time, the one that names its cause
claims it and the other's gain is what is left (a2a-imbalance before the straggler and
the exposed all_to_all, pipeline-imbalance before pipeline-bubble).

Ids (stable): tp-spans-nodes, pipeline-bubble, pipeline-imbalance, exposed-dp-comm,
exposed-ep-comm, exposed-a2a-comm, a2a-imbalance, straggler, recompute, input-bound,
host-bound, launch-bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import duckdb

from stepscope.analyzers._sql import sql
from stepscope.analyzers.advice import alltoall as advisor_a2a
from stepscope.analyzers.advice import memory as advisor_memory
from stepscope.analyzers.comm.collectives import median_kernel_us
from stepscope.analyzers.comm.roles import DATA_PARALLEL_ROLES, EXPERT_ROLES, MODEL_EXCHANGE_ROLES
from stepscope.analyzers.context import RunContext
from stepscope.analyzers.flops.bound import rate_bound
from stepscope.analyzers.flops.counted_ops import counted_ops
from stepscope.analyzers.flops.model_spec import ModelSpec
from stepscope.analyzers.plan.layouts import bubble_theory
from stepscope.analyzers.results import (
    AllToAll,
    Breakdown,
    CollectiveStat,
    CriticalPath,
    HostActivity,
    IdleBreakdown,
    Layout,
    MemorySection,
    Mfu,
    Pipeline,
    Recommendation,
    Straggler,
    WhatIfResult,
)

TRIGGER = 0.10          # a category must take at least this share of the step
MIN_GAIN = 0.05         # and the fix must be expected to save at least this share
BUBBLE_TARGET = 0.05    # pipeline-bubble aims under this theoretical bubble


@dataclass(frozen=True)
class Evidence:
    """What the advisor judges: the run context, the finished typed sections it needs,
    and a few extra measurements."""
    ctx: RunContext
    layout: Layout
    pipeline: Pipeline | None
    stragglers: tuple[Straggler, ...]
    mfu: Mfu
    collectives: tuple[CollectiveStat, ...]
    median_kernel_us: float | None
    recompute_attention_share: float | None
    idle: IdleBreakdown | None = None
    graph_steps: int = 0            # rank steps that launched a CUDA/HIP graph
    critical_path: CriticalPath | None = None
    memory: MemorySection | None = None
    all_to_all: AllToAll | None = None

    def whatif(self, reason: str, target: str | None = None) -> WhatIfResult | None:
        """The critical path's what-if made for `reason` (and `target`), if any."""
        found = [w for w in (self.critical_path.whatifs if self.critical_path else ())
                 if w.reason == reason and (target is None or w.target == target)]
        return found[0] if found else None

    @property
    def step_ms(self) -> float:
        return self.ctx.attribution.step_time_ms

    @property
    def breakdown(self) -> Breakdown:
        return self.ctx.attribution.breakdown_ms

    @property
    def spec(self) -> ModelSpec | None:
        return self.ctx.spec

    @property
    def device_memory_bytes(self) -> int | None:
        value = self.ctx.device.properties.get("totalGlobalMem")
        return int(value) if value and isinstance(value, int | float | str) else None


def gather(ctx: RunContext, pipeline: Pipeline | None, stragglers: tuple[Straggler, ...],
           mfu: Mfu, collectives: tuple[CollectiveStat, ...],
           idle: IdleBreakdown | None = None,
           critical_path: CriticalPath | None = None,
           memory: MemorySection | None = None, all_to_all: AllToAll | None = None
           ) -> Evidence:
    """The advisor's inputs: finished sections plus its own measurements of the run."""
    con, run = ctx.con, ctx.run
    return Evidence(
        critical_path=critical_path,
        ctx=ctx, layout=ctx.layout, pipeline=pipeline, stragglers=stragglers, mfu=mfu,
        collectives=collectives, idle=idle, graph_steps=_graph_steps(con, run),
        memory=memory, all_to_all=all_to_all,
        median_kernel_us=median_kernel_us(con, run),
        recompute_attention_share=_recompute_attention_share(con, run, rate_bound(ctx)))


def _graph_steps(con: duckdb.DuckDBPyConnection, run: str) -> int:
    (steps, *_), = con.execute(sql("report/graph_steps.sql"), {"run": run}).fetchall()
    return int(steps or 0)


def _recompute_attention_share(con: duckdb.DuckDBPyConnection, run: str,
                               max_rate: float | None) -> float | None:
    query = sql("advisor/recompute_attention.sql")
    with counted_ops(con, run):
        attn, total = con.execute(query, {"run": run, "max_rate": max_rate}).fetchall()[0]
    return float(attn or 0) / float(total) if total else None


def _points(ev: Evidence, gain_ms: float) -> float | None:
    return mfu_points_gained(ev.mfu.mfu, ev.step_ms, gain_ms)


def mfu_points_gained(mfu: float | None, step_ms: float, gain_ms: float) -> float | None:
    """MFU points gained if a step of `step_ms` got `gain_ms` shorter at the same work."""
    if mfu is None or step_ms <= gain_ms or gain_ms <= 0:
        return None
    return 100.0 * mfu * (step_ms / (step_ms - gain_ms) - 1.0)


def _rec(ev: Evidence, rid: str, title: str, detail: str, evidence: str,
         gain_ms: float) -> Recommendation | None:
    step = ev.step_ms
    if step <= 0 or gain_ms < MIN_GAIN * step:
        return None
    share = gain_ms / step
    return Recommendation(id=rid, severity="high" if share >= 0.15 else "medium", title=title,
                          detail=detail, evidence=evidence, expected_gain_ms=gain_ms,
                          expected_mfu_points=_points(ev, gain_ms))


def _fires(ev: Evidence, gain_ms: float) -> bool:
    """Whether a recommendation with this gain is made (at least MIN_GAIN of the step)."""
    return ev.step_ms > 0 and gain_ms >= MIN_GAIN * ev.step_ms


def _a2a(ev: Evidence) -> advisor_a2a.A2aAdvice | None:
    """The a2a-imbalance advice when it is made: the lost time it claims is not credited
    again to the straggler it explains or to the exposed all_to_all it shortens."""
    advice = advisor_a2a.a2a_imbalance(ev)
    return advice if advice is not None and _fires(ev, advice.gain_ms) else None


def _a2a_claimed(ev: Evidence, rows: list[CollectiveStat]) -> float:
    """The imbalance cost a2a-imbalance already claims of these collectives' exposed time
    (ms per step)."""
    advice = _a2a(ev)
    if advice is None:
        return 0.0
    labels = {c.group_label for c in rows}
    return sum(ms for label, ms in advice.cost_ms.items() if label in labels)


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def _split(rows: list[CollectiveStat]) -> str:
    """Where the rest of these collectives' time went, beside their exposed time: the
    straggler wait (waiting for a late rank: overlap does not remove it) and the
    overlapped part (already hidden), so the figures add up to their time."""
    wait = sum(c.straggler_wait_ms for c in rows)
    hidden = sum(c.overlapped_ms + c.bubble_ms for c in rows)
    total = sum(c.time_ms for c in rows)
    return (f"; besides, straggler wait {wait:.2f} ms/step and overlapped {hidden:.2f} "
            f"ms/step, of {total:.2f} ms/step in these collectives")


# ------------------------------------------------------------------ the checks
def straggler(ev: Evidence) -> list[Recommendation]:
    """Gain: the critical path's what-if (the rank at the median speed, recomputed on the
    dependency graph), else what each waiting rank loses. A straggler that is the rank
    receiving the most all_to_all tokens is left to a2a-imbalance, which claims the
    others' wait for it: it is the token imbalance, not a slow GPU."""
    out = []
    a2a = _a2a(ev)
    absorbed = a2a.absorbed if a2a is not None else frozenset()
    for s in ev.stragglers:
        if s.rank in absorbed:
            continue
        gain, evidence = s.slowdown * ev.step_ms, s.evidence
        what = ev.whatif("straggler", str(s.rank))
        if what is not None:
            gain, evidence = what.gain_ms, f"{evidence}; critical path: {what.sentence}"
        rec = _rec(ev, "straggler", f"Fix or replace straggling rank {s.rank} "
                   f"(host {s.host or 'unknown'})",
                   "The other ranks wait for this rank at their collectives. Check its host "
                   "(thermals, clocks, ECC/XID errors, a noisy neighbour, a slow data shard); "
                   "if it persists, cordon the host and restart from the checkpoint."
                   + advisor_a2a.heaviest_rank_note(ev, s.rank),
                   evidence, gain)
        if rec:
            out.append(rec)
    return out


def pipeline_bubble(ev: Evidence) -> list[Recommendation]:
    pipe = ev.pipeline
    if not pipe:
        return []
    step, bubble = ev.step_ms, ev.breakdown.bubble
    if step <= 0 or bubble < TRIGGER * step:
        return []
    s, m = pipe.stages, pipe.microbatches
    now = bubble_theory(s, m)
    if now <= 0:
        return []
    m_target = 19 * (s - 1) + 1  # (S-1)/(S-1+M) < 5%
    v = max(2, math.ceil(now / BUBBLE_TARGET))
    new = bubble_theory(s, m_target)
    rebalanced = _stage_gain(ev)
    left = max(0.0, bubble - rebalanced)
    gain = left * (1 - new / now)
    claimed = (f"; {rebalanced:.2f} ms/step of it is the slow stage's (pipeline-imbalance), "
               f"the gain is on the {left:.2f} ms left" if rebalanced else "")
    rec = _rec(ev, "pipeline-bubble",
               f"Cut the pipeline bubble: {m} -> {m_target} microbatches per step",
               f"1F1B with S={s} stages and M={m} microbatches idles (S-1)/(S-1+M) = "
               f"{100 * now:.1f}% of the step in theory. M={m_target} brings it to "
               f"{100 * new:.1f}% (same global batch with a smaller micro-batch, or a larger "
               f"global batch); alternatively an interleaved schedule with {v} model chunks "
               f"per stage divides the bubble by about {v}.",
               f"measured bubble {bubble:.2f} ms/step ({_pct(bubble, step)} of the step) on "
               f"{pipe.pipelines} pipeline(s) of {s} stages, theory {100 * now:.1f}%"
               + claimed, gain)
    return [rec] if rec else []


def _stage_gain(ev: Evidence) -> float:
    """The bubble that pipeline-imbalance claims when it is made: the slow stage keeps
    the others idle, so its what-if gain comes out of their bubble."""
    what = ev.whatif("pipeline_stage")
    if ev.pipeline is None or what is None or not _fires(ev, what.gain_ms):
        return 0.0
    return what.gain_ms


def pipeline_imbalance(ev: Evidence) -> list[Recommendation]:
    """The slowest pipeline stage sets every stage's pace: its gain is the critical path's
    what-if of that stage at the median stage's speed."""
    what = ev.whatif("pipeline_stage")
    if ev.pipeline is None or what is None:
        return []
    rec = _rec(ev, "pipeline-imbalance", "Rebalance the pipeline stages",
               "In a pipeline every stage waits for the slowest one at each microbatch: move "
               "layers off the slow stage (Megatron's uneven first/last stage layer counts, "
               "or a layer split by measured time rather than by count), or check its ranks' "
               "hosts if they do the same work as the others.",
               f"ranks {what.target}: critical path: {what.sentence}", what.gain_ms)
    return [rec] if rec else []


def _guessed(rows: list[CollectiveStat]) -> str:
    guessed = sorted({f"{c.collective} -> {c.role}" for c in rows if c.role_source == "guess"})
    if not guessed:
        return ""
    return (" (no group labels: roles guessed from the op and group: "
            + ", ".join(guessed) + ")")


FSDP_DETAIL = (
    "FSDP / ZeRO-3 gathers each layer's weights before using them and reduce-scatters its "
    "gradients after: prefetch the next layer's all-gather during the current layer "
    "(forward and backward prefetch), keep the last layers unsharded (reshard_after_forward "
    "off for them), and reduce the bytes that cross the network with HSDP (shard inside "
    "the node, replicate across nodes).")
DP_DETAIL = (
    "The gradient reduction runs after backward instead of under it. Overlap it "
    "(DDP buckets / Megatron overlap_grad_reduce, FSDP backward prefetch) with "
    "buckets sized so the first ones start early in backward (e.g. 25-100 MB); "
    "reduce the bytes that cross the network with HSDP (shard inside the node, "
    "replicate across nodes). Moving to ZeRO-3 costs about 1.5x the DDP traffic "
    "(an extra all-gather of the weights), so only do it for memory.")


def exposed_dp_comm(ev: Evidence) -> list[Recommendation]:
    step = ev.step_ms
    rows = [c for c in ev.collectives if c.role in DATA_PARALLEL_ROLES]
    exposed = sum(c.exposed_ms for c in rows)
    if step <= 0 or exposed < TRIGGER * step:
        return []
    backward = 2 / 3 * (ev.breakdown.compute + ev.breakdown.recompute)
    gain = min(exposed, backward)
    worst = max(rows, key=lambda c: c.exposed_ms)
    link = ""
    if worst.bus_bw_gbs and worst.link_peak_gbs:
        link = (f"; bus bandwidth {worst.bus_bw_gbs:.0f} GB/s of "
                f"{worst.link_peak_gbs:.0f} GB/s ({worst.link})")
    fsdp = worst.role == "fsdp_shards"
    memory = advisor_memory.zero_memory_note(ev, 3 if fsdp else 0)
    title = ("Overlap the FSDP / ZeRO-3 weight gathers and gradient reduce-scatters" if fsdp
             else "Overlap the data-parallel gradient communication")
    rec = _rec(ev, "exposed-dp-comm", title, (FSDP_DETAIL if fsdp else DP_DETAIL) + memory,
               f"data-parallel collectives exposed {exposed:.2f} ms/step "
               f"({_pct(exposed, step)} of the step): {worst.collective} on "
               f"{worst.group_label} {worst.exposed_ms:.2f} ms exposed{link}" + _split(rows)
               + _guessed(rows), gain)
    return [rec] if rec else []


EP_DETAIL = (
    "Expert parallelism sends each token to its experts (dispatch) and back (combine) on "
    "a communication stream of its own; the time above is what the step waits for it "
    "with nothing else to run. Overlap one micro-batch's dispatch/combine with the other "
    "micro-batch's attention and expert compute, as DualPipe and 1F1B-overlap "
    "(two-batch overlap) schedules do; give the communication kernels enough SMs but no "
    "more (DeepEP's num_sms), keep the EP group inside the NVLink domain where the layout "
    "allows, and check the expert load balance (a rank with more tokens makes every "
    "other rank wait at each combine).")


def exposed_ep_comm(ev: Evidence) -> list[Recommendation]:
    """Expert-parallel dispatch/combine (DeepEP kernels, EXPERT groups) left exposed."""
    step = ev.step_ms
    rows = [c for c in ev.collectives if c.role in EXPERT_ROLES]
    exposed = sum(c.exposed_ms for c in rows)
    if step <= 0 or exposed < TRIGGER * step:
        return []
    total = sum(c.time_ms for c in rows)
    wait = sum(c.straggler_wait_ms for c in rows)
    hidden = sum(c.overlapped_ms + c.bubble_ms for c in rows)
    compute = ev.breakdown.compute + ev.breakdown.recompute
    worst = max(rows, key=lambda c: c.exposed_ms)
    libraries = ", ".join(sorted({c.library for c in rows}))
    claimed = _a2a_claimed(ev, rows)
    rec = _rec(ev, "exposed-ep-comm",
               "Hide the EP dispatch/combine under the other micro-batch's compute",
               EP_DETAIL,
               f"EP dispatch/combine exposed {exposed:.2f} ms/step ({_pct(exposed, step)} of "
               f"the step) of {total:.2f} ms/step of token exchange: straggler wait "
               f"{wait:.2f} ms/step (uneven expert load), overlapped {hidden:.2f} ms/step "
               f"({_pct(hidden, total)} hidden under compute; {libraries}); "
               f"{worst.collective} {worst.group_label} {worst.exposed_ms:.2f} ms exposed"
               + _claimed_words(claimed, exposed), min(max(0.0, exposed - claimed), compute))
    return [rec] if rec else []


def exposed_model_exchange(ev: Evidence) -> list[Recommendation]:
    """all_to_all of embedding tables (DLRM) or MoE token dispatch left exposed, when
    nothing says which (EXPERT groups and EP kernels go to exposed_ep_comm)."""
    step = ev.step_ms
    rows = [c for c in ev.collectives if c.role in MODEL_EXCHANGE_ROLES]
    exposed = sum(c.exposed_ms for c in rows)
    if step <= 0 or exposed < TRIGGER * step:
        return []
    compute = ev.breakdown.compute + ev.breakdown.recompute
    claimed = _a2a_claimed(ev, rows)
    gain = min(max(0.0, exposed - claimed), compute)
    worst = max(rows, key=lambda c: c.exposed_ms)
    rec = _rec(ev, "exposed-a2a-comm", "Hide the embedding / expert all-to-all behind compute",
               "The all-to-all exchanges model-parallel data (embedding lookups of sharded "
               "tables, or MoE tokens to their experts), not gradients, so gradient bucketing "
               "does not help. Overlap it with compute: pipeline the next batch's embedding "
               "input distribution under the current step (e.g. TorchRec's "
               "TrainPipelineSparseDist), or split MoE dispatch into chunks overlapped with "
               "expert compute; shrink it with fp16/quantized communication, fewer or "
               "row-wise-sharded tables, or a lower MoE capacity factor; keep it inside the "
               "NVLink domain where the layout allows.",
               f"all-to-all exposed {exposed:.2f} ms/step ({_pct(exposed, step)} of the "
               f"step): {worst.collective} on {worst.group_label} "
               f"{worst.exposed_ms:.2f} ms exposed" + _split(rows) + _guessed(rows)
               + _claimed_words(claimed, exposed), gain)
    return [rec] if rec else []


def _claimed_words(claimed: float, exposed: float) -> str:
    """The evidence's note that part of the exposed time is a2a-imbalance's gain."""
    if claimed <= 0:
        return ""
    return (f"; {min(claimed, exposed):.2f} ms/step of the exposed time is the load "
            "imbalance, counted in a2a-imbalance's gain, not in this one")


def recompute(ev: Evidence) -> list[Recommendation]:
    step, rc = ev.step_ms, ev.breakdown.recompute
    if step <= 0 or rc < TRIGGER * step:
        return []
    attn = ev.recompute_attention_share
    keep = attn if attn is not None else 0.0
    gain = rc * (1 - keep)
    share = f"{100 * attn:.0f}% of the recomputed FLOPs are attention" if attn is not None \
        else "the share of attention in the recomputed work is unknown (no shapes)"
    rec = _rec(ev, "recompute", "Use selective activation recomputation",
               "Full activation checkpointing re-runs the whole forward of each layer in "
               "backward. Selective recomputation (Korthikanti et al. 2022) keeps the "
               "activations of the linear layers and recomputes only the attention core, "
               "whose activations are large and cheap to recompute."
               + advisor_memory.recompute_memory_note(ev),
               f"recompute {rc:.2f} ms/step ({_pct(rc, step)} of the step); {share}", gain)
    return [rec] if rec else []


def _activity(rows: tuple[HostActivity, ...], skip: str = "data_loader", n: int = 3) -> str:
    shown = [f"{a.name} {a.ms:.2f} ms ({a.thread})" for a in rows
             if a.kind != skip and a.ms >= 0.005][:n]
    return "; meanwhile the host ran " + ", ".join(shown) if shown else ""


def input_bound(ev: Evidence) -> list[Recommendation]:
    """The GPU waits for the host while the host is loading data (DataLoader)."""
    step, idle = ev.step_ms, ev.idle
    if idle is None or step <= 0 or idle.host_bound_data_loader_ms < TRIGGER * step:
        return []
    loader = idle.host_bound_data_loader_ms
    loaders = [a for a in idle.host_activity if a.kind == "data_loader"]
    where = f" ({loaders[0].name}, thread {loaders[0].thread})" if loaders else ""
    rec = _rec(ev, "input-bound", "Feed the GPUs: the host delays every step loading data",
               "The GPU waits while the host fetches and collates the next batch in the "
               "training process. Load in worker processes and prefetch (DataLoader "
               "num_workers > 0, persistent_workers, prefetch_factor), pin the batch "
               "(pin_memory) and copy it with non_blocking=True, and move decoding or "
               "augmentation off the training loop.",
               f"GPU idle waiting for the host {idle.split_ms.host_bound:.2f} ms/step "
               f"({_pct(idle.split_ms.host_bound, step)} of the step), {loader:.2f} ms of it "
               f"while the host was in the DataLoader{where}", loader)
    return [rec] if rec else []


SYNC_DETAIL = (
    "Most of it follows a synchronization: the host waits for the GPU (.item(), .cpu(), "
    ".tolist(), print(loss), torch.cuda.synchronize(), nonzero or boolean-mask indexing), "
    "the GPU's queue drains, and the GPU then idles while the host runs the next Python. "
    "Keep metrics on the GPU and read them every N steps, or copy them with "
    "non_blocking=True into pinned memory. ")
GRAPH_HOST_DETAIL = (
    "The step already replays CUDA/HIP graphs, so this is host work between replays "
    "(scheduling, sampling, input preparation, Python): overlap it with the previous "
    "replay (asynchronous scheduling, a CPU-GPU pipeline of two batches), move the CPU work "
    "named in the evidence off the critical path, or give each replay more work (a larger "
    "batch).")
SLOW_LAUNCH_DETAIL = (
    "Launch calls themselves take much of it: a kernel's first launch loads its code (lazy "
    "module loading) or compiles it, so profile steps after warm-up (torch.profiler "
    "schedule with wait/warmup steps) or load eagerly (CUDA_MODULE_LOADING=EAGER, "
    "HIP_ENABLE_DEFERRED_LOADING=0). ")
HOST_DETAIL = (
    "Cut the host work per step: capture the step or its static parts with CUDA graphs "
    "(torch.cuda.graphs, torch.compile(mode='reduce-overhead')), let torch.compile fuse "
    "small ops, give each launch more work (a larger micro-batch), move the CPU work named "
    "in the evidence off the step's critical path, and check the host is not "
    "oversubscribed (data-loader workers, OMP threads).")


def host_bound(ev: Evidence) -> list[Recommendation]:
    """The GPU waits for the host to launch work, outside data loading: Python, CPU ops,
    synchronizations."""
    step, idle = ev.step_ms, ev.idle
    if idle is None or step <= 0:
        return []
    rest = idle.split_ms.host_bound - idle.host_bound_data_loader_ms
    if rest < TRIGGER * step:
        return []
    synced = min(idle.host_bound_after_sync_ms, rest)
    by_sync = synced >= 0.5 * rest
    title = ("Stop synchronizing the host with the GPU inside the step" if by_sync
             else "Feed the GPU faster: it waits for the host to launch work")
    med = ev.median_kernel_us
    kernels = f"; median compute kernel {med:.1f} us" if med is not None else ""
    launches = sum(a.ms for a in idle.host_activity if a.kind == "launch")
    slow = SLOW_LAUNCH_DETAIL if launches >= 0.25 * rest else ""
    toolbox = GRAPH_HOST_DETAIL if ev.graph_steps else HOST_DETAIL
    rec = _rec(ev, "host-bound", title, (SYNC_DETAIL if by_sync else "") + slow + toolbox,
               f"GPU idle waiting for the host {rest:.2f} ms/step ({_pct(rest, step)} of the "
               f"step) outside data loading, in {idle.gaps_per_step:.0f} gaps/step; "
               f"{synced:.2f} ms of it right after a synchronization{kernels}"
               + _activity(idle.host_activity), rest)
    return [rec] if rec else []


def launch_bound(ev: Evidence) -> list[Recommendation]:
    """Short gaps between back-to-back GPU ops (launch overhead) add up."""
    step, idle = ev.step_ms, ev.idle
    if idle is None or step <= 0 or idle.split_ms.launch_overhead < TRIGGER * step:
        return []
    launch = idle.split_ms.launch_overhead
    med = ev.median_kernel_us
    kernels = f"; median compute kernel {med:.1f} us" if med is not None else ""
    rec = _rec(ev, "launch-bound", "Launch fewer, larger kernels",
               "Many kernels run for a few microseconds and the GPU idles between them while "
               "the next one is dispatched: capture the step with CUDA graphs, fuse "
               "elementwise work (torch.compile), or raise the work per kernel.",
               f"{idle.short_gaps_per_step:.0f} gaps/step of at most "
               f"{idle.short_gap_us:.0f} us between GPU ops plus the dispatch after each "
               f"launch: {launch:.2f} ms/step ({_pct(launch, step)} of the step){kernels}",
               0.8 * launch)
    return [rec] if rec else []


def tp_spans_nodes(ev: Evidence) -> list[Recommendation]:
    lay = ev.layout
    rows = [c for c in ev.collectives if c.crosses_nodes and not c.is_p2p
            and c.role == "tensor_parallel"]
    if not rows:
        return []
    step = ev.step_ms
    exposed = sum(c.exposed_ms for c in rows)
    worst = max(rows, key=lambda c: c.exposed_ms)
    nvlink = ev.ctx.device.nvlink_gbs
    bw = worst.bus_bw_gbs
    speedup = (nvlink / bw) if nvlink and bw else None
    gain = exposed * (1 - 1 / speedup) if speedup and speedup > 1 else 0.0
    per_node = lay.gpus_per_node or "?"
    rec = _rec(ev, "tp-spans-nodes", "Keep tensor parallelism inside the NVLink domain",
               f"A tensor-parallel group of {worst.group_size} ranks spans hosts with "
               f"{per_node} GPUs each, so every layer's TP all-reduces cross the network. "
               f"Use TP <= {per_node} and move the remaining factor to pipeline or data "
               "parallelism.",
               f"TP collectives on {worst.group_label} cross nodes: {exposed:.2f} ms/step "
               f"exposed ({_pct(exposed, step)} of the step) at "
               f"{bw or 0:.0f} GB/s bus bandwidth vs {nvlink or 0:.0f} GB/s on NVLink"
               + _split(rows), gain)
    return [rec] if rec else []


def a2a_imbalance(ev: Evidence) -> list[Recommendation]:
    """Uneven all_to_all (advisor_a2a.a2a_imbalance words it and sizes its gain), with
    the straggler evidence of the ranks whose wait it claims."""
    advice = _a2a(ev)
    if advice is None:
        return []
    late = [s for s in ev.stragglers if s.rank in advice.absorbed]
    evidence = advice.evidence + "".join(_straggler_words(ev, s) for s in late)
    rec = _rec(ev, "a2a-imbalance", advice.title, advice.detail, evidence, advice.gain_ms)
    return [rec] if rec else []


def _straggler_words(ev: Evidence, s: Straggler) -> str:
    """A straggler's evidence, for the advice that explains it."""
    what = ev.whatif("straggler", str(s.rank))
    path = f"; critical path: {what.sentence}" if what is not None else ""
    return f"; rank {s.rank} (host {s.host or 'unknown'}) as a straggler: {s.evidence}{path}"


CHECKS = (tp_spans_nodes, pipeline_bubble, pipeline_imbalance, exposed_dp_comm,
          exposed_ep_comm, exposed_model_exchange, a2a_imbalance, straggler,
          recompute, input_bound, host_bound, launch_bound)


def recommendations(ev: Evidence) -> tuple[Recommendation, ...]:
    """All recommendations, largest expected gain first."""
    out = [rec for check in CHECKS for rec in check(ev)]
    return tuple(sorted(out, key=lambda x: -x.expected_gain_ms))
