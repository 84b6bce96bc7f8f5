"""Calibrate the planner on a measured run (docs/planner.md, "Calibrated on a run").

From one run's attribution and its own kernels and collectives: the achieved TFLOP/s of
each kind of compute kernel, a latency + bytes/bandwidth line per link tier (NVLink
inside a node, the network across nodes) fitted on the run's collectives, how its
collectives scale (tensor-parallel activations, data-parallel gradient buckets, small
per-step control messages), the share of DP communication hidden under backward, the
recompute share and the pipeline bubble against its model. `analyzers.plan.predict` turns a
calibration into the step of another layout of the same model. The aggregation is SQL
(analyzers/sql/planner/); this module only combines its rows.
"""

from __future__ import annotations

import math
from typing import TypedDict

from stepscope.analyzers._sql import fetch_rows, sql
from stepscope.analyzers.comm.roles import DATA_PARALLEL_ROLES
from stepscope.analyzers.context import RunContext
from stepscope.analyzers.flops.bound import rate_bound
from stepscope.analyzers.flops.counted_ops import counted_ops
from stepscope.analyzers.flops.mfu import flops_per_step
from stepscope.analyzers.flops.model_spec import ModelSpec
from stepscope.analyzers.flops.run_spec import MODEL_JSON as MODEL_JSON
from stepscope.analyzers.flops.run_spec import find_spec as find_spec
from stepscope.analyzers.plan.layouts import MemoryShape, memory_bytes
from stepscope.analyzers.results import (
    DEFAULT_NETWORK_GBS,
    BubbleCalibration,
    Calibration,
    CommClass,
    KernelRate,
    LinkTier,
    MemoryCalibration,
    ModelShape,
    RankMemory,
    Report,
    Term,
)
from stepscope.ingest.errors import UsageError

SMALL_BYTES = 64 * 1024          # a collective below this is per-step control traffic
MATMUL_KINDS = ("gemm", "attention", "conv", "all")
CHARGE_ORDER = ("tp", "control", "other", "dp")  # who is charged exposed_comm first
TERM_NAMES = ("compute", "other_kernels", "optimizer", "recompute", "memory", "tp_comm",
              "dp_comm", "other_comm", "bubble", "straggler_wait", "idle")


class _KindRow(TypedDict):
    kind: str
    ms: float | None
    flops: float | None


class _ClassRow(TypedDict):
    collective: str
    group_label: str
    group_size: int
    nbytes: int
    crosses_nodes: bool
    is_p2p: bool
    calls_per_step: float
    time_ms: float
    transfer_ms: float
    exposed_ms: float
    wait_ms: float
    bubble_ms: float
    median_transfer_us: float | None


class _FitRow(TypedDict):
    tier: str
    calls: int
    sizes: int
    min_x: float
    max_x: float
    ns_per_hop: float | None
    ns_per_byte: float | None
    median_bus_bw_gbs: float | None
    mean_ns_per_byte: float | None


# ------------------------------------------------------------------ the model spec
def shape_of(spec: ModelSpec, source: str, heads: int | None = None) -> ModelShape:
    return ModelShape(params=spec.n_params, layers=spec.n_layers, hidden=spec.hidden,
                      seq=spec.seq_len, global_batch_tokens=spec.global_batch_tokens,
                      heads=heads, source=source)


def attention_heads(ctx: RunContext, tp: int) -> int | None:
    """The model's attention heads: the heads per rank its attention ops show x TP."""
    rows = ctx.con.execute(sql("planner/attention_heads.sql"), {"run": ctx.run}).fetchall()
    return int(rows[0][0]) * tp if rows and rows[0][0] else None


# ------------------------------------------------------------------ refusals
def check_calibratable(ctx: RunContext, report: Report) -> None:
    """One line, naming the run, when it lacks what the planner cannot assume."""
    run = ctx.run
    if ctx.info.timeline == "cpu":
        raise UsageError(f"plan --from {run}: a CPU-only run (no GPU timeline); the planner "
                         "models GPU jobs")
    if not ctx.attribution.per_rank or report.step_time_ms <= 0:
        raise UsageError(f"plan --from {run}: no complete step to calibrate on")
    if report.mfu.peak_flops_per_gpu is None:
        raise UsageError(f"plan --from {run}: {report.mfu.message or 'no peak for the device'}")
    if report.breakdown_ms.compute <= 0:
        raise UsageError(f"plan --from {run}: no compute kernels in its steps")


# ------------------------------------------------------------------ kernels
def kernel_rates(ctx: RunContext, report: Report) -> tuple[KernelRate, ...]:
    """Each kind's share of the attributed compute time, with its FLOPs and TFLOP/s.
    Kernel time is summed per kind, then scaled so the kinds add up to the compute
    category (overlapping kernels count once there). Without counted FLOPs (no
    record_shapes) every kernel but the optimizer's is one kind, `all`, carrying the
    spec's FLOPs."""
    params = {"run": ctx.run, "max_rate": rate_bound(ctx)}  # absurd shapes left out
    with counted_ops(ctx.con, ctx.run):
        rows = {r["kind"]: r for r in fetch_rows(ctx.con, "planner/compute_kinds.sql",
                                                 params, _KindRow)}
    kernel_ms = {k: float(r["ms"] or 0.0) for k, r in rows.items() if k != "recompute"}
    total = sum(kernel_ms.values())
    compute = report.breakdown_ms.compute
    scale = compute / total if total > 0 else 0.0
    counted = sum(float(rows[k]["flops"] or 0.0) for k in MATMUL_KINDS if k in rows)
    out: list[KernelRate] = []
    if counted <= 0:
        opt = kernel_ms.get("optimizer", 0.0) * scale
        flops = (report.mfu.model_flops_per_step or 0.0) / ctx.world
        out.append(_rate("all", compute - opt, flops))
        out.append(_rate("optimizer", opt, None))
    else:
        for kind in ("gemm", "attention", "conv", "other", "optimizer"):
            if kernel_ms.get(kind, 0.0) > 0:
                counted_flops = (float(rows[kind]["flops"] or 0.0) if kind in MATMUL_KINDS
                                 else None)
                out.append(_rate(kind, kernel_ms[kind] * scale, counted_flops))
    rc = rows.get("recompute")
    if report.breakdown_ms.recompute > 0:
        out.append(_rate("recompute", report.breakdown_ms.recompute,
                         float(rc["flops"] or 0.0) if rc else None))
    return tuple(out)


def _rate(kind: str, ms: float, flops: float | None) -> KernelRate:
    tflops = flops / (ms / 1e3) / 1e12 if flops and ms > 0 else None
    return KernelRate(kind=kind, ms=ms, flops=flops, tflops=tflops)


def kind_ms(kernels: tuple[KernelRate, ...], *kinds: str) -> float:
    return sum(k.ms for k in kernels if k.kind in kinds)


# ------------------------------------------------------------------ links
def link_tiers(ctx: RunContext) -> tuple[tuple[LinkTier, ...], tuple[str, ...]]:
    """The fitted cost line of each tier, and what had to be assumed."""
    rows = {r["tier"]: r for r in fetch_rows(ctx.con, "planner/link_fit.sql",
                                             {"run": ctx.run}, _FitRow)}
    tiers, notes = [], []
    for tier in ("nvlink", "network"):
        row = rows.get(tier)
        if row is None or not row["calls"]:
            tiers.append(_assumed_tier(ctx, tier))
            why = "the peak table" if tier == "nvlink" else "one 400 Gb/s NIC per GPU"
            notes.append(f"no collective on the {tier} tier: {tiers[-1].bus_bw_gbs:.0f} "
                         f"GB/s bus bandwidth and no latency assumed ({why})")
            continue
        tiers.append(_fitted_tier(row))
        if tiers[-1].source == "bandwidth":
            notes.append(f"one message size on the {tier} tier: its latency cannot be "
                         "separated from its bandwidth (latency 0 assumed)")
    return tuple(tiers), tuple(notes)


def _fitted_tier(row: _FitRow) -> LinkTier:
    intercept, slope = row["ns_per_hop"], row["ns_per_byte"]
    spread = row["max_x"] / row["min_x"] if row["min_x"] else math.inf
    usable = (row["sizes"] >= 2 and spread >= 2 and intercept is not None
              and slope is not None and math.isfinite(slope) and slope > 0
              and intercept >= 0)
    if usable:
        assert intercept is not None and slope is not None
        return LinkTier(tier=row["tier"], source="fit", latency_us=intercept / 1e3,
                        bus_bw_gbs=1 / slope, calls=int(row["calls"]), sizes=int(row["sizes"]))
    mean = row["mean_ns_per_byte"] or 0.0
    return LinkTier(tier=row["tier"], source="bandwidth", latency_us=0.0,
                    bus_bw_gbs=1 / mean if mean > 0 else DEFAULT_NETWORK_GBS,
                    calls=int(row["calls"]), sizes=int(row["sizes"]))


def _assumed_tier(ctx: RunContext, tier: str) -> LinkTier:
    bw = (ctx.device.nvlink_gbs if tier == "nvlink" else None) or DEFAULT_NETWORK_GBS
    return LinkTier(tier=tier, source="assumed", latency_us=0.0, bus_bw_gbs=bw, calls=0,
                    sizes=0)


def tier(tiers: tuple[LinkTier, ...], name: str) -> LinkTier:
    return next(t for t in tiers if t.tier == name)


def ring(collective: str, n: int) -> tuple[float, float]:
    """(hops, bus factor) of one call over n ranks (nccl-tests; ring algorithms)."""
    if collective in ("send", "recv", "send_recv"):
        return 1.0, 1.0
    if collective == "all_reduce":
        return 2.0 * (n - 1), 2.0 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter", "all_to_all"):
        return float(n - 1), (n - 1) / n
    return float(n - 1), 1.0


def call_ms(link: LinkTier, collective: str, n: int, nbytes: float) -> float:
    """The predicted transfer time of one call: hops x latency + bus bytes / bandwidth."""
    if n < 2 and collective not in ("send", "recv", "send_recv"):
        return 0.0
    hops, factor = ring(collective, n)
    return (hops * link.latency_us * 1e3 + factor * nbytes / link.bus_bw_gbs) / 1e6


def anchor(links: tuple[LinkTier, ...], c: CommClass) -> float:
    """The class's measured transfer per call over what its tier's line predicts for it:
    predictions scale the measured time by the line (1 when the line fits the class)."""
    line = call_ms(tier(links, c.tier), c.collective, c.group_size, c.bytes_per_call)
    measured = c.transfer_ms / c.calls_per_step if c.calls_per_step > 0 else 0.0
    return measured / line if line > 0 and measured > 0 else 1.0


# ------------------------------------------------------------------ collectives
def comm_classes(ctx: RunContext, report: Report) -> tuple[CommClass, ...]:
    """The run's collective classes, each charged its share of exposed_comm: in the
    order tp, control, other, dp, each takes what it claims of what is left, so a DP
    all-reduce running beside a TP all-reduce (both claim that time) is not charged
    for it: the compute stream waits for the TP one."""
    rows = fetch_rows(ctx.con, "planner/collective_classes.sql", {"run": ctx.run}, _ClassRow)
    roles = {(c.collective, c.group_label): c.role for c in report.collectives}
    lay = report.layout
    drafts = []
    for r in rows:
        role = _role(r, roles.get((r["collective"], r["group_label"]), "unknown"))
        drafts.append((r, role, _group_kind(r, role, lay.tp, lay.dp, lay.pp, ctx.world)))
    left = report.breakdown_ms.exposed_comm
    charged: dict[int, float] = {}
    for role in CHARGE_ORDER:
        for i, (r, rl, _) in enumerate(drafts):
            if rl == role:
                charged[i] = min(float(r["exposed_ms"]), left)
                left -= charged[i]
    return tuple(_comm_class(r, role, kind, charged.get(i, 0.0))
                 for i, (r, role, kind) in enumerate(drafts))


def _role(row: _ClassRow, role: str) -> str:
    if row["is_p2p"]:
        return "pp"
    if row["nbytes"] < SMALL_BYTES:
        return "control"
    if role == "tensor_parallel":
        return "tp"
    if role in DATA_PARALLEL_ROLES:
        return "dp"
    return "other"


def _group_kind(row: _ClassRow, role: str, tp: int, dp: int, pp: int, world: int) -> str:
    label, size = row["group_label"].upper(), row["group_size"]
    if role == "tp" or "TENSOR" in label:
        return "tp"
    if role == "dp" or "DATA" in label:
        return "dp"
    if role == "pp" or "PIPELINE" in label:
        return "pp"
    if size == world:
        return "world"
    return {tp: "tp", dp: "dp", pp: "pp"}.get(size, "fixed") if size > 1 else "fixed"


def _comm_class(r: _ClassRow, role: str, kind: str, charged: float) -> CommClass:
    transfer = float(r["transfer_ms"])
    per_call_us = r["median_transfer_us"]
    hops, factor = ring(r["collective"], max(2, r["group_size"]))
    bw = (r["nbytes"] * factor / (per_call_us * 1e3)
          if per_call_us and not r["is_p2p"] else None)
    return CommClass(
        collective=r["collective"], group=r["group_label"], role=role, group_kind=kind,
        group_size=int(r["group_size"]), tier="network" if r["crosses_nodes"] else "nvlink",
        bytes_per_call=float(r["nbytes"]), calls_per_step=float(r["calls_per_step"]),
        transfer_ms=transfer, exposed_ms=charged,
        exposed_share=charged / transfer if transfer > 0 else 0.0, bus_bw_gbs=bw)


def charged_ms(comm: tuple[CommClass, ...], role: str) -> float:
    return sum(c.exposed_ms for c in comm if c.role == role)


# ------------------------------------------------------------------ micro-batches
def microbatches(ctx: RunContext, report: Report, spec: ModelSpec
                 ) -> tuple[int, int, str, tuple[str, ...]]:
    """(microbatches per step, micro-batch size, where they came from, notes): the
    pipeline's count when there is one, else the global batch over DP x the tokens per
    micro-batch the matmul shapes show, else micro-batch 1 assumed."""
    dp, seq, batch = report.layout.dp, spec.seq_len, spec.global_batch_tokens
    rows = ctx.con.execute(sql("planner/tokens_per_microbatch.sql"),
                           {"run": ctx.run}).fetchall()
    tokens = int(rows[0][0]) if rows and rows[0][0] else None
    b_shapes = tokens // seq if tokens and tokens % seq == 0 else None
    if report.pipeline is not None:
        m = report.pipeline.microbatches
        b = b_shapes or max(1, round(batch / (dp * m * seq)))
        return m, b, "pipeline", ()
    if b_shapes:
        return max(1, round(batch / (dp * b_shapes * seq))), b_shapes, "shapes", ()
    m = max(1, round(batch / (dp * seq)))
    return m, 1, "assumed", ("no matmul shapes: micro-batch 1 assumed "
                            f"({m} microbatches per step)",)


def zero_stage(report: Report) -> tuple[int, str]:
    """ZeRO stage of the run from its collectives: FSDP-style shards (3), a gathered
    optimizer (1: distributed optimizer), else plain all-reduced gradients (0)."""
    roles = {c.role for c in report.collectives}
    if "fsdp_shards" in roles:
        return 3, "fsdp_shards collectives"
    if "dp_param_gather" in roles or any(c.role == "dp_gradients"
                                          and c.collective == "reduce_scatter"
                                          for c in report.collectives):
        return 1, "reduce_scatter / all_gather of the gradients"
    return 0, "all-reduced gradients" if "dp_gradients" in roles else "no DP traffic"


# ------------------------------------------------------------------ the step in terms
def measured_terms(report: Report, kernels: tuple[KernelRate, ...],
                   comm: tuple[CommClass, ...]) -> tuple[Term, ...]:
    """The run's mean step split into the planner's terms; they add up to the step."""
    bd = report.breakdown_ms
    assigned = sum(c.exposed_ms for c in comm)
    values = {
        "compute": kind_ms(kernels, *MATMUL_KINDS),
        "other_kernels": kind_ms(kernels, "other"),
        "optimizer": kind_ms(kernels, "optimizer"),
        "recompute": bd.recompute, "memory": bd.memory,
        "tp_comm": charged_ms(comm, "tp"), "dp_comm": charged_ms(comm, "dp"),
        "other_comm": (charged_ms(comm, "control") + charged_ms(comm, "other")
                       + max(0.0, bd.exposed_comm - assigned)),
        "bubble": bd.bubble, "straggler_wait": bd.straggler_wait, "idle": bd.idle,
    }
    return tuple(Term(name=n, ms=values[n], uses="measured") for n in TERM_NAMES)


def term_ms(terms: tuple[Term, ...], name: str) -> float:
    return next((t.ms for t in terms if t.name == name), 0.0)


def backward_window_ms(terms: tuple[Term, ...], microbatches: int) -> float:
    """The backward of the last microbatch, which DP buckets hide under: 2/3 of the
    matmuls (backward = 2x forward FLOPs), half of the other kernels and of the TP
    all-reduces, and the recompute, of one microbatch."""
    per_step = (2 / 3 * term_ms(terms, "compute") + 0.5 * term_ms(terms, "other_kernels")
                + 0.5 * term_ms(terms, "tp_comm") + term_ms(terms, "recompute"))
    return per_step / max(1, microbatches)


def dp_exposed_ms(bucket_ms: float, buckets: int, window_ms: float, overlap: float) -> float:
    """Exposed time of `buckets` equal buckets issued evenly through the backward window
    (the last one at its end) on their own stream: the last is exposed, and each earlier
    one whose transfer outlasts its share of the window pushes the tail further."""
    slot = overlap * window_ms / max(1, buckets)
    return bucket_ms + (buckets - 1) * max(0.0, bucket_ms - slot)


def solve_overlap(measured: float, bucket_ms: float, buckets: int, window_ms: float) -> float:
    """The share of the window that reproduces the measured exposed DP time (1 when
    the model at full overlap already does, within 2%; at most 4)."""
    if buckets < 2 or window_ms <= 0 or bucket_ms <= 0:
        return 1.0
    full = dp_exposed_ms(bucket_ms, buckets, window_ms, 1.0)
    if abs(measured - full) <= 0.02 * max(full, 1e-9) or measured <= bucket_ms:
        return 1.0
    slot = bucket_ms - (measured - bucket_ms) / (buckets - 1)
    return min(4.0, max(0.0, slot * buckets / window_ms))


def dp_calibration(comm: tuple[CommClass, ...], terms: tuple[Term, ...], m: int
                   ) -> tuple[float | None, float, int]:
    """(measured hidden share, overlap, buckets per step) of the DP gradient traffic."""
    buckets = [c for c in comm if c.role == "dp"]
    transfer = sum(c.transfer_ms for c in buckets)
    n = round(sum(c.calls_per_step for c in buckets))
    if not buckets or transfer <= 0 or n < 1:
        return None, 1.0, 0
    exposed = sum(c.exposed_ms for c in buckets)
    bucket_ms = transfer / sum(c.calls_per_step for c in buckets)
    overlap = solve_overlap(exposed, bucket_ms, n, backward_window_ms(terms, m))
    return 1 - exposed / transfer, overlap, n


def p2p_ms(cal_links: tuple[LinkTier, ...], tier_name: str, nbytes: float) -> float:
    return call_ms(tier(cal_links, tier_name), "send", 2, nbytes)


def bubble_calibration(report: Report, terms: tuple[Term, ...], comm: tuple[CommClass, ...],
                       links: tuple[LinkTier, ...]) -> BubbleCalibration | None:
    """The measured bubble vs the model (S-1)(f+b) + (2(S-1) + M)p, f+b one
    microbatch's work on a stage, p one stage-to-stage send."""
    pipe = report.pipeline
    if pipe is None or pipe.stages < 2:
        return None
    sends = [c for c in comm if c.role == "pp"]
    p = p2p_ms(links, sends[0].tier, max(c.bytes_per_call for c in sends)) if sends else 0.0
    modelled = pipeline_bubble_ms(terms, pipe.stages, pipe.microbatches, p)
    measured = report.breakdown_ms.bubble
    return BubbleCalibration(
        stages=pipe.stages, microbatches=pipe.microbatches,
        measured_fraction=pipe.bubble_fraction, theory_fraction=pipe.bubble_theory,
        measured_ms=measured, modelled_ms=modelled,
        ratio=measured / modelled if modelled > 0 else 1.0)


def pipeline_bubble_ms(terms: tuple[Term, ...], stages: int, m: int, p2p: float) -> float:
    """(S-1)(f+b) + (2(S-1) + M)p: the fill and drain of 1F1B with the 2(S-1) sends
    along them, and one send per microbatch on the critical path in the steady state
    (sends not overlapped with compute)."""
    work = sum(term_ms(terms, n) for n in ("compute", "other_kernels", "recompute",
                                           "tp_comm", "memory"))
    return (stages - 1) * work / max(1, m) + (2 * (stages - 1) + m) * p2p


# ------------------------------------------------------------------ memory
def memory_calibration(report: Report, model: ModelShape, zero: int, m: int, b: int
                       ) -> MemoryCalibration | None:
    """The run's measured memory peak (the allocator's reserved bytes when traced, else
    allocated: what competes for the device's memory) against the formulas at the run's
    own layout; None without `[memory]` events (profile_memory) or a model estimate."""
    section, lay = report.memory, report.layout
    if section is None or not section.ranks:
        return None
    reserved = all(r.peak_reserved_bytes is not None for r in section.ranks)

    def peak(r: RankMemory) -> int:
        return int(r.peak_reserved_bytes if reserved and r.peak_reserved_bytes is not None
                   else r.peak_allocated_bytes)
    top = max(section.ranks, key=lambda r: (peak(r), -r.rank))
    state, act = memory_bytes(MemoryShape(
        params=model.params, layers=model.layers, hidden=model.hidden, seq=model.seq,
        micro_batch=b, tp=lay.tp, pp=lay.pp, dp=lay.dp, zero=zero, microbatches=m,
        full_recompute=report.breakdown_ms.recompute > 0))
    modelled = (state + act) / 1e9
    if modelled <= 0 or peak(top) <= 0:
        return None
    device = section.device_memory_bytes or top.device_memory_bytes
    return MemoryCalibration(
        measured_gb=peak(top) / 1e9, measured_kind="reserved" if reserved else "allocated",
        rank=top.rank, modelled_gb=modelled, scale=peak(top) / 1e9 / modelled,
        device_memory_gb=device / 1e9 if device else None)


# ------------------------------------------------------------------ the calibration
def calibrate(ctx: RunContext, report: Report, spec: ModelSpec, source: str) -> Calibration:
    """The calibration of one run (report built with the same spec)."""
    check_calibratable(ctx, report)
    kernels = kernel_rates(ctx, report)
    links, link_notes = link_tiers(ctx)
    comm = comm_classes(ctx, report)
    terms = measured_terms(report, kernels, comm)
    m, b, m_source, m_notes = microbatches(ctx, report, spec)
    zero, zero_source = zero_stage(report)
    hidden, overlap, buckets = dp_calibration(comm, terms, m)
    lay = report.layout
    heads = attention_heads(ctx, lay.tp)
    shape = shape_of(spec, source, heads)
    per_node = lay.gpus_per_node or ctx.world
    peak = float(report.mfu.peak_flops_per_gpu or 0.0)
    flops = report.mfu.model_flops_per_step or flops_per_step(spec)
    compute = term_ms(terms, "compute") + term_ms(terms, "other_kernels") \
        + term_ms(terms, "optimizer")
    efficiency = flops / ctx.world / (peak * compute / 1e3)
    if efficiency > 1:
        raise UsageError(f"plan --from {ctx.run}: the model spec's FLOPs would run at "
                         f"{efficiency:.0%} of peak while computing: {source} does not "
                         "describe this run")
    return Calibration(
        run=ctx.run, device=report.mfu.device, peak_tflops=peak / 1e12,
        peak_dtype=report.mfu.peak_dtype or report.mfu.dtype, gpus=ctx.world,
        gpus_per_node=per_node, nodes=lay.nodes or math.ceil(ctx.world / per_node),
        tp=lay.tp, pp=lay.pp, dp=lay.dp, zero=zero, zero_source=zero_source,
        microbatches=m, micro_batch=b, microbatch_source=m_source,
        recompute=report.breakdown_ms.recompute > 0, model=shape,
        model_flops_per_step=flops, step_ms=report.step_time_ms,
        mfu=flops / (report.step_time_ms / 1e3 * ctx.world * peak),
        kernel_efficiency=efficiency,
        recompute_share=report.breakdown_ms.recompute / max(compute, 1e-12),
        kernels=kernels, links=links, comm=comm, dp_hidden_fraction=hidden,
        dp_overlap=overlap, dp_buckets=buckets,
        bubble=bubble_calibration(report, terms, comm, links),
        idle_ms=report.breakdown_ms.idle, straggler_wait_ms=report.breakdown_ms.straggler_wait,
        terms=terms, assumptions=link_notes + m_notes + _kernel_notes(kernels)
        + (() if heads else (HEADS_UNKNOWN,)) + coverage_notes(ctx, report),
        memory=memory_calibration(report, shape, zero, m, b))


def coverage_notes(ctx: RunContext, report: Report) -> tuple[str, ...]:
    """What a partial rank set or disagreeing FLOP counts leave uncertain."""
    out = []
    ranks, world = int(ctx.info.ranks or 0), ctx.world
    if 0 < ranks < world:
        out.append(f"only {ranks} of {world} ranks traced: the calibration is theirs, "
                   "taken as every rank's")
    ratio = report.mfu.flops_sources_ratio
    if ratio is not None and not 0.8 <= ratio <= 1.25:
        out.append(f"the traces count {ratio:.0%} of the spec's model FLOPs: the spec's "
                   "are used")
    return tuple(out)


HEADS_UNKNOWN = ("no attention shapes: the head count is unknown, so TP is not checked to "
                 "divide it")


def _kernel_notes(kernels: tuple[KernelRate, ...]) -> tuple[str, ...]:
    if any(k.kind == "all" for k in kernels):
        return ("no matmul shapes (record_shapes): every compute kernel is scaled as "
                "matmul work, at one efficiency from the spec's FLOPs",)
    return ()
