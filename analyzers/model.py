"""The typed models every renderer consumes: a run report, a diff of two runs, a plan,
a night of a job and a hang analysis.

Each model is a tree of frozen msgspec Structs (docs/report.md says why msgspec):
analyzers build them, renderers (dashboard/render/) only read them, and `to_json` is the one
JSON serializer. The JSON Schemas in docs/*.schema.json are generated from these classes
(`json_schema`), so the published contract cannot drift from the code.

Extending: add a field WITH a default (None for an optional section) anywhere in a class
(all classes are keyword-only); older JSON stays valid and readers ignore what they do not
know. Removing or renaming a field, or changing its type, bumps the schema_version.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal, TypeAlias, TypeVar

import msgspec

REPORT_SCHEMA_VERSION = 5  # 2: run.failed_files an array; idle_split. 3: critical_path.
#                           4: roofline, memory, all_to_all sections.
# 5: collectives[].exposed_ms without the straggler wait and the bubble (split out)
DIFF_SCHEMA_VERSION = 3    # 2: `expected` (B as predicted from A, docs/diff.md).
# 3: collectives[].a/b split like the report's (exposed_ms without the wait)
PLAN_SCHEMA_VERSION = 2    # 2: `calibration`, `baseline` and each plan's `terms`
NIGHTLY_SCHEMA_VERSION = 1
HANG_SCHEMA_VERSION = 1

CATEGORIES = (
    "compute", "recompute", "exposed_comm", "straggler_wait", "bubble", "memory", "idle",
)
# stages of the MFU waterfall: kernel efficiency, then each non-compute category
STAGES = ("kernel_efficiency", *[c for c in CATEGORIES if c != "compute"])


class Model(msgspec.Struct, frozen=True, kw_only=True):
    """Base of every model class: immutable. Subclasses repeat `frozen=True, kw_only=True` (msgspec
    applies it per class) so a field with a default can be added anywhere."""


# ------------------------------------------------------------------ the run report
class Breakdown(Model, frozen=True, kw_only=True):
    """Milliseconds of each attribution category (docs/attribution.md); they sum to the
    step time."""
    compute: float
    recompute: float
    exposed_comm: float
    straggler_wait: float
    bubble: float
    memory: float
    idle: float

    def ms(self, category: str) -> float:
        """The time of one category by name (one of CATEGORIES)."""
        return float(getattr(self, category))

    def as_dict(self) -> dict[str, float]:
        return {c: self.ms(c) for c in CATEGORIES}


class FailedFile(Model, frozen=True, kw_only=True):
    """A trace file that could not be ingested, and why (runs.failed_files)."""
    file: str
    error: str


class RunInfo(Model, frozen=True, kw_only=True):
    """What was ingested: the run's name, ranks, device, hosts and timeline."""
    name: str
    status: str | None
    world_size: int | None
    ranks: int | None
    device: str | None
    hosts: tuple[str, ...]
    host_source: str | None = None
    step_source: str | None = None
    timeline: str | None
    failed_files: tuple[FailedFile, ...] = ()   # an array (schema 1: a JSON string)
    rank_subset: str | None = None  # `--ranks` of the ingest; None: every rank found


class Layout(Model, frozen=True, kw_only=True):
    """Parallel degrees, ranks per node and nodes; `source` says how the degrees were
    found, `node_source` the nodes (docs/attribution.md, "Layout"). TP x PP x DP x CP is
    the world size unless `consistent` is false; nodes x gpus_per_node is the world size
    whenever both are given. `notes` say which evidence won where sources conflict."""
    tp: int
    pp: int
    dp: int
    cp: int
    ep: int
    gpus_per_node: int | None           # the job's ranks (GPUs) on each node
    nodes: int | None
    host_source: str | None = None
    source: str
    consistent: bool = True             # TP x PP x DP x CP = world size
    node_gpus: int | None = None        # GPUs each node has (len(deviceProperties))
    node_source: str | None = None      # host_names | host_names_uneven | device_properties
    notes: tuple[str, ...] = ()


class IdleSplit(Model, frozen=True, kw_only=True):
    """`idle` split by why the GPU waited (docs/attribution.md, "Idle: why the GPU
    waited"), in ms: host_bound + launch_overhead + other = idle."""
    host_bound: float          # the host had not launched the next GPU op yet
    launch_overhead: float     # short gaps between back-to-back GPU ops
    other: float               # launched but not running (waits outside the GPU work)

    def ms(self, part: str) -> float:
        """One part by name: host_bound, launch_overhead or other."""
        return float(getattr(self, part))


class HostActivity(Model, frozen=True, kw_only=True):
    """What the host ran while the GPU waited for it: self time in host-bound gaps."""
    name: str                  # CPU op, annotation, Python frame or runtime call
    kind: str                  # sync | data_loader | launch | cpu_op | python | annotation
    thread: str                # thread name(s) from the trace, else "tid N"
    ms: float                  # per rank and step


class IdleBreakdown(Model, frozen=True, kw_only=True):
    """The run's idle split (means like breakdown_ms) with its evidence."""
    split_ms: IdleSplit
    host_bound_after_sync_ms: float    # of host_bound: gaps that began as a sync returned
    host_bound_data_loader_ms: float   # of host_bound: while the DataLoader ran
    gaps_per_step: float
    short_gaps_per_step: float         # gaps of at most short_gap_us
    short_gap_us: float
    host_activity: tuple[HostActivity, ...] = ()   # largest first


class RankTimes(Model, frozen=True, kw_only=True):
    """One rank's mean over its complete steps."""
    rank: int
    host: str | None
    n_steps: int
    step_time_ms: float
    breakdown_ms: Breakdown
    idle_split_ms: IdleSplit | None = None


class StepTimes(Model, frozen=True, kw_only=True):
    """One step's mean over ranks (`complete` is false for the last profiled step)."""
    step: int
    complete: bool
    n_ranks: int
    step_time_ms: float
    breakdown_ms: Breakdown


class Straggler(Model, frozen=True, kw_only=True, omit_defaults=True):
    """A rank the others consistently wait for, with the evidence; a hidden one (whose
    victims' waits do not show as straggler wait) also gives its compute vs its peers'."""
    rank: int
    host: str | None
    hidden: bool
    slowdown: float
    waited_on_ms: float
    waiting_ranks: int
    step_time_deviation_ms: float
    arrived_last: int
    matched_collectives: int
    compute_ms: float | None = None       # hidden stragglers only
    peer_compute_ms: float | None = None  # hidden stragglers only
    evidence: str


class PipelineStage(Model, frozen=True, kw_only=True):
    stage: int
    ranks: tuple[int, ...]
    bubble_ms: float
    idle_ms: float


class Pipeline(Model, frozen=True, kw_only=True):
    """Pipeline shape from the point-to-point pattern, measured bubble vs 1F1B theory."""
    stages: int
    pipelines: int
    microbatches: int
    bubble_fraction: float
    bubble_theory: float
    per_stage: tuple[PipelineStage, ...]


class WaterfallStep(Model, frozen=True, kw_only=True):
    """Points of peak (percent) lost at one stage; negative or zero."""
    name: str
    points: float


class ImplausibleOp(Model, frozen=True, kw_only=True):
    """A counted op whose shapes claim more FLOPs than its kernels could have done at
    the device's peak (docs/mfu.md, "Implausible shapes"); left out of the FLOPs."""
    rank: int
    step: int | None
    op_id: int
    name: str
    flops: float
    kernel_ms: float
    times_peak: float   # its claimed FLOP rate over the device's highest dense peak


class Mfu(Model, frozen=True, kw_only=True):
    """MFU/HFU against the peak table (docs/mfu.md); `mfu` is None with a `message`
    when it cannot be computed honestly (never above 100%)."""
    mfu: float | None = None
    hfu: float | None = None
    model_flops_per_step: float | None = None
    flops_source: str | None = None
    flops_from_spec: float | None = None
    flops_from_trace: float | None = None
    recompute_flops_per_step: float | None = None
    flops_sources_ratio: float | None = None
    peak_flops_per_gpu: float | None = None
    device: str | None = None
    peak_table_version: str
    dtype: str
    dtype_source: str | None = None     # flag | ops | kernels | default
    dtype_share: float | None = None    # of the weighted work the dtype stands for
    peak_dtype: str | None = None       # the peak-table column used
    peak_reason: str | None = None      # which peak and why, in words
    achieved_tflops_per_gpu: float | None = None
    waterfall: tuple[WaterfallStep, ...] = ()
    message: str | None = None
    implausible_ops: tuple[ImplausibleOp, ...] = ()   # the worst few
    implausible_op_count: int = 0


class CollectiveStat(Model, frozen=True, kw_only=True):
    """One collective type on one process group, per rank and step, with its link.
    Its time splits into exposed + straggler wait + bubble + overlapped; the first three,
    summed over the collectives, are the run's categories of the same names."""
    collective: str
    group_label: str
    crosses_nodes: bool
    group_size: int | None
    calls_per_step: float
    bytes_per_step: float | None        # None: no call in the complete steps has a size
    time_ms: float
    exposed_ms: float                   # attributed to exposed_comm (nothing else ran)
    straggler_wait_ms: float = 0.0      # attributed to straggler_wait (waiting for a late rank)
    bubble_ms: float = 0.0              # attributed to bubble (point-to-point ops)
    overlapped_ms: float = 0.0          # hidden under compute or another collective
    bus_bw_gbs: float | None
    is_p2p: bool
    measured_bus_bw_gbs: float | None = None  # what NCCL itself measured (Inspector)
    link: str
    link_source: str = "assumed"        # assumed (by host span) | nccl_log (measured)
    link_peak_gbs: float | None
    link_utilization: float | None
    role: str = "unknown"               # what it is for (analyzers/roles.py)
    role_source: str = "guess"          # label (group description) | kernel_table | guess
    library: str = "nccl"               # nccl | rccl | gloo | deepep | torch_symm_mem | ...
    op: str | None = None               # the library's operation (dispatch, combine, ...)
    # bus bandwidth above the link's peak, in words; absent from the JSON otherwise
    warning: str | msgspec.UnsetType = msgspec.UNSET


class Recommendation(Model, frozen=True, kw_only=True):
    """A fix with its predicted gain, grounded in measured evidence (docs/advisor.md)."""
    id: str
    severity: str
    title: str
    detail: str
    evidence: str
    expected_gain_ms: float
    expected_mfu_points: float | None


class NcclSource(Model, frozen=True, kw_only=True):
    kind: str                           # flight_recorder | nccl_log | nccl_inspector ...
    files: int
    ranks: int                          # distinct ranks the files speak for


class NcclRank(Model, frozen=True, kw_only=True):
    """One process as the NCCL logs see it."""
    rank: int
    host: str
    pid: int
    cuda_dev: int | None
    bus_id: str | None
    network: str | None                 # Using network IB | Socket
    nccl_version: str | None


class NcclGroup(Model, frozen=True, kw_only=True):
    """One communicator: members, hosts and the real transport of its links."""
    comm_id: str
    pg_names: list[str]                 # process groups with exactly these members
    pg_desc: str | None
    ranks: list[int]
    nranks: int
    hosts: list[str]
    tiers: list[str]                    # p2p, shm, ib, socket, ... seen on its channels
    link: str                           # the slowest tier it uses: socket > ib > shm > p2p
    gdr: bool | None                    # every IB or plugin-network connection uses GDR


class NcclFinding(Model, frozen=True, kw_only=True):
    kind: str                           # socket_where_ib | gdr_disabled | nccl_warnings | ...
    severity: str                       # high | medium | info
    ranks: list[int]
    hosts: list[str]
    message: str


class BandwidthPoint(Model, frozen=True, kw_only=True):
    t_us: int                           # start of a tenth of the recording window (epoch us)
    bus_bw_gbs: float                   # median bus bandwidth of the ops in it


class MeasuredOps(Model, frozen=True, kw_only=True):
    """Bus bandwidth NCCL measured (Inspector) for one collective of one communicator."""
    comm_id: str
    collective: str
    pg_names: list[str]
    pg_desc: str | None
    ranks: list[int]
    hosts: list[str]
    n_ops: int
    msg_bytes: float
    bus_bw_gbs: float                   # median over ops and ranks
    bus_bw_p10_gbs: float
    timing_source: str | None
    over_time: list[BandwidthPoint]


class NcclSection(Model, frozen=True, kw_only=True):
    """What NCCL's own evidence (Flight Recorder dumps, NCCL_DEBUG logs) says about the
    job (analyzers/nccl.py)."""
    versions: list[str]
    sources: list[NcclSource]
    hosts: dict[str, list[int]]         # host -> global ranks (NCCL logs)
    ranks: list[NcclRank]
    groups: list[NcclGroup]
    measured: list[MeasuredOps] = []    # NCCL Inspector bandwidth ([] without it)
    findings: list[NcclFinding]


# ------------------------------------------------------------------ the critical path
class PathShare(Model, frozen=True, kw_only=True):
    """Time of the critical path on one rank (or one category)."""
    key: str
    ms: float
    share: float                        # of the path


class PathOp(Model, frozen=True, kw_only=True):
    """One op (kernel name, collective on its group, or host / launch / idle time) on the
    critical path."""
    op: str
    category: str
    ms: float
    share: float
    count: int
    ranks: tuple[int, ...]              # ranks where it was on the path


class PathRun(Model, frozen=True, kw_only=True):
    """Consecutive path segments on one rank: where the path stays before it jumps."""
    rank: int
    start_ms: float                     # from the window start
    ms: float
    category: str                       # the category with most time in the run
    segments: int


class StepPath(Model, frozen=True, kw_only=True):
    """The critical path of one step (docs/critical_path.md): it tiles the reference
    rank's window, so path_ms equals window_ms."""
    step: int
    reference_rank: int                 # the rank with the longest window of the step
    window_ms: float
    path_ms: float
    mean_step_ms: float                 # the step's mean window over ranks (per_step)
    jumps: int                          # times the path changes rank
    ranks: tuple[int, ...]              # ranks on the path, most time first
    by_category_ms: dict[str, float]
    by_rank: tuple[PathShare, ...]
    top_ops: tuple[PathOp, ...]
    runs: tuple[PathRun, ...]
    runs_left_out: int = 0              # runs beyond the cap (critical_path.MAX_RUNS)


class WhatIfResult(Model, frozen=True, kw_only=True):
    """The step time if a rank, an op kind or a collective were faster, recomputed on
    the dependency graph of every complete step (docs/critical_path.md, "What-if")."""
    what: str                           # e.g. "rank 13 at the median speed"
    kind: Literal["rank", "op", "collective"]
    target: str
    speedup: float | None               # None: the median rank's speed
    step_time_ms: float                 # measured (the report's step_time_ms)
    predicted_step_time_ms: float
    gain_ms: float
    per_step_ms: dict[str, float]       # predicted mean window per step
    sentence: str
    reason: str | None = None           # straggler | pipeline_stage | top_op |
                                        # top_collective (the report's own); None: asked


class CriticalPath(Model, frozen=True, kw_only=True, omit_defaults=True):
    """The chain of launches, kernels and collectives that sets each step's length,
    followed across ranks through the collectives (docs/critical_path.md)."""
    steps: tuple[StepPath, ...] = ()
    path_ms: float = 0.0                # mean over the steps
    by_category_ms: dict[str, float] = {}
    by_rank: tuple[PathShare, ...] = ()
    top_ops: tuple[PathOp, ...] = ()
    whatifs: tuple[WhatIfResult, ...] = ()
    nodes: int = 0                      # GPU ops and collective calls in the graph
    edges: int = 0
    inferred: dict[str, int] = {}       # edges and CPU waits found without a record
    notes: tuple[str, ...] = ()
    message: str | None = None          # why nothing could be computed
# ------------------------------------------------------------------ roofline, memory, all_to_all
class RoofRow(Model, frozen=True, kw_only=True, omit_defaults=True):
    """Kernels against their roofline (docs/roofline.md): one op kind, kernel or GEMM
    shape, per rank and step over complete steps."""
    name: str                           # the kind, the kernel name or the shape
    kind: str                           # gemm | attention | conv | elementwise | normalization
    dtype: str | None
    time_ms: float                      # kernel time per rank and step
    time_share: float                   # of all compute-kernel time
    kernels_per_step: float
    tflops: float | None                # achieved FLOP/s executed (TFLOP/s)
    gbs: float | None                   # achieved bytes/s of the least traffic (GB/s)
    intensity: float | None             # FLOPs per byte
    bound: str                          # compute | memory | unknown (which roof applies)
    roof_share: float | None            # of the roof at that intensity, min(P, I x B)
    lost_ms: float | None               # time beyond the roof's: time x (1 - roof_share)
    op: str | None = None               # GEMM shapes: the aten op
    b: int | None = None                # GEMM shapes: batch, M, N, K
    m: int | None = None
    n: int | None = None
    k: int | None = None
    above_roof: float | None = None     # the share the counted FLOPs (bytes) claim when it
                                        # is above 1: roof_share and lost_ms are then null


class EfficiencyPart(Model, frozen=True, kw_only=True, omit_defaults=True):
    """One named part of the MFU waterfall's kernel-efficiency stage; the parts add up to
    the stage exactly."""
    name: str                           # gemm:<op>:<NxK>:<dtype>, gemm_other, attention, ...
    label: str                          # in words, with its roof share
    points: float
    time_ms: float | None = None        # its share of the compute time
    roof_share: float | None = None
    bound: str | None = None
    above_roof: float | None = None     # as RoofRow.above_roof


class Roofline(Model, frozen=True, kw_only=True, omit_defaults=True):
    """Per op kind, kernel and GEMM shape: achieved FLOP/s and bytes/s, arithmetic
    intensity and the share of the compute or memory roof; the kernel-efficiency stage
    of the MFU waterfall split into named ops (docs/roofline.md)."""
    device: str | None = None
    peak_flops_per_gpu: float | None = None   # the MFU's peak (its dtype)
    peak_dtype: str | None = None
    hbm_gbs: float | None = None
    hbm_source: str | None = None
    peak_table_version: str
    ridge_flops_per_byte: float | None = None
    coverage: float = 0.0                      # share of compute-kernel time with a shaped op
    kinds: tuple[RoofRow, ...] = ()
    kernels: tuple[RoofRow, ...] = ()
    gemm_shapes: tuple[RoofRow, ...] = ()      # most time lost first
    kernel_efficiency: tuple[EfficiencyPart, ...] = ()
    stage_points: float | None = None          # the waterfall's kernel_efficiency
    message: str | None = None


class MemoryOp(Model, frozen=True, kw_only=True):
    """Bytes an op allocated that are still live at the rank's peak."""
    op: str
    bytes: int
    allocations: int


class MemoryStep(Model, frozen=True, kw_only=True):
    step: int
    peak_allocated_bytes: int | None
    peak_reserved_bytes: int | None


class RankMemory(Model, frozen=True, kw_only=True, omit_defaults=True):
    """One rank's device memory over the profiled window (docs/memory.md)."""
    rank: int
    host: str | None
    device_memory_bytes: int | None            # deviceProperties totalGlobalMem
    peak_allocated_bytes: int
    peak_reserved_bytes: int | None
    peak_step: int | None
    reserved_share: float | None = None        # peak reserved / device memory
    headroom_bytes: int | None = None          # device memory - peak reserved
    op_at_peak: str | None = None              # the op running when the peak was reached
    ops_at_peak: tuple[MemoryOp, ...] = ()     # live allocations at the peak, largest first
    steps: tuple[MemoryStep, ...] = ()


class MemorySection(Model, frozen=True, kw_only=True, omit_defaults=True):
    """Peak allocated and reserved memory per rank and step against the device's memory,
    from the allocator's `[memory]` events (profile_memory=True)."""
    source: str                                # totals | bytes_delta (2021 traces)
    peak_allocated_bytes: int
    peak_reserved_bytes: int | None = None
    peak_rank: int
    device_memory_bytes: int | None = None
    ranks: tuple[RankMemory, ...] = ()
    message: str | None = None


class AllToAllRank(Model, frozen=True, kw_only=True, omit_defaults=True):
    """One rank's all_to_all traffic per step (docs/alltoall.md)."""
    rank: int
    sent_bytes: float
    received_bytes: float
    tokens_received: float | None = None       # rows of the received splits
    received_vs_mean: float                    # received / the mean rank's


class AllToAllGroup(Model, frozen=True, kw_only=True, omit_defaults=True):
    """all_to_all on one group, per step: traffic, imbalance and what it costs."""
    group_label: str
    library: str
    members: int | None
    calls_per_step: float
    bytes_per_rank: float                      # mean bytes sent per rank and step
    imbalance: float | None                    # mean over calls of busiest / mean bytes
    imbalance_max: float | None                # (None: no call matched across all members)
    transfer_ms: float                         # per step: the calls' durations (d_min)
    imbalance_cost_ms: float                   # per step: transfer x (1 - 1/imbalance)
    wait_ms: float                             # per rank and step: waiting for the last member
    heaviest_rank: int | None = None           # receives the most
    heaviest_vs_mean: float | None = None
    splits: str                                # given | equal | truncated | mixed


class AllToAll(Model, frozen=True, kw_only=True, omit_defaults=True):
    """MoE / embedding all_to_all: bytes per rank, imbalance across ranks and its cost."""
    groups: tuple[AllToAllGroup, ...] = ()
    ranks: tuple[AllToAllRank, ...] = ()
    message: str | None = None


class Report(Model, frozen=True, kw_only=True, omit_defaults=True):
    """The report of one run (docs/report.md); times in ms, fractions 0-1. Optional
    sections default to None and are left out of the JSON when absent."""
    schema_version: int
    run: RunInfo
    layout: Layout
    step_time_ms: float
    breakdown_ms: Breakdown
    per_rank: tuple[RankTimes, ...]
    per_step: tuple[StepTimes, ...]
    stragglers: tuple[Straggler, ...]
    pipeline: Pipeline | None
    collective_matching: dict[str, int]
    notes: tuple[str, ...]
    mfu: Mfu
    collectives: tuple[CollectiveStat, ...]
    recommendations: tuple[Recommendation, ...]
    nccl: NcclSection | None = None
    idle_split: IdleBreakdown | None = None
    critical_path: CriticalPath | None = None
    roofline: Roofline | None = None
    memory: MemorySection | None = None
    all_to_all: AllToAll | None = None


# ------------------------------------------------------------------ the calibrated planner
class Term(Model, frozen=True, kw_only=True):
    """One term of a step as the planner sees it (docs/planner.md), ms per rank and step,
    and the calibrated value(s) it used, in words."""
    name: str       # compute | other_kernels | optimizer | recompute | memory | tp_comm |
                    # dp_comm | other_comm | bubble | straggler_wait | idle
    ms: float
    uses: str


class KernelRate(Model, frozen=True, kw_only=True):
    """The calibrating run's compute kernels of one kind, per rank and step."""
    kind: str                   # gemm | attention | conv | other | optimizer | recompute
    ms: float
    flops: float | None         # model FLOPs of the kind's ops (None: not counted)
    tflops: float | None        # achieved per GPU while they run


class LinkTier(Model, frozen=True, kw_only=True):
    """A link tier's cost per collective, hops x latency + bus bytes / bandwidth, fitted
    on the run's own collectives (`fit`), bandwidth only when one message size was seen
    (`bandwidth`), or `assumed` when the run has none on this tier."""
    tier: str                   # nvlink (inside a node) | network (across nodes)
    source: str                 # fit | bandwidth | assumed
    latency_us: float           # per ring hop
    bus_bw_gbs: float
    calls: int
    sizes: int                  # distinct message sizes (per hop) behind the fit


class CommClass(Model, frozen=True, kw_only=True):
    """One class of the run's collectives (collective, group, group size, message size)
    and the planner's role for it: tp (activations, per layer and microbatch), dp
    (gradients, per bucket), pp (stage-to-stage sends), control (under 64 KiB, per step),
    other (kept as is). `group_kind` is the degree its group size follows: tp, dp, pp,
    world, or fixed."""
    collective: str
    group: str
    role: str
    group_kind: str
    group_size: int
    tier: str
    bytes_per_call: float
    calls_per_step: float
    transfer_ms: float          # per rank and step, without waits for late ranks
    exposed_ms: float           # charged to the step (exposed_comm, docs/planner.md)
    exposed_share: float        # of transfer_ms
    bus_bw_gbs: float | None


class BubbleCalibration(Model, frozen=True, kw_only=True):
    """The run's pipeline bubble, measured vs the 1F1B theory and vs the planner's model
    (S-1)(f+b) + (2(S-1) + M)p; `ratio` = measured / modelled is applied to predictions."""
    stages: int
    microbatches: int
    measured_fraction: float
    theory_fraction: float      # (S-1)/(S-1+M)
    measured_ms: float
    modelled_ms: float
    ratio: float


class MemoryCalibration(Model, frozen=True, kw_only=True):
    """The run's measured memory peak against the planner's formulas at the run's own
    layout (docs/planner.md, "Memory"); `scale` = measured / modelled multiplies every
    layout's modelled memory, and the fit check uses the traced device memory."""
    measured_gb: float          # the largest peak of any rank (reserved when traced)
    measured_kind: str          # reserved | allocated
    rank: int                   # the rank with that peak
    modelled_gb: float          # training state + activations at the run's layout
    scale: float                # measured / modelled
    device_memory_gb: float | None   # deviceProperties totalGlobalMem, when traced


class ModelShape(Model, frozen=True, kw_only=True):
    """The model as the planner uses it (from the run's model spec)."""
    params: float
    layers: int
    hidden: int
    seq: int
    global_batch_tokens: float
    heads: int | None           # from the attention shapes; None: unknown
    source: str                 # where the spec came from


class Calibration(Model, frozen=True, kw_only=True):
    """What a measured run says about its hardware and software (docs/planner.md): the
    planner predicts other layouts of the same model from it."""
    run: str
    device: str | None
    peak_tflops: float
    peak_dtype: str             # the peak-table column of peak_tflops (docs/mfu.md)
    gpus: int
    gpus_per_node: int
    nodes: int
    tp: int
    pp: int
    dp: int
    zero: int
    zero_source: str
    microbatches: int
    micro_batch: int
    microbatch_source: str
    recompute: bool
    model: ModelShape
    model_flops_per_step: float
    step_ms: float
    mfu: float
    kernel_efficiency: float    # model FLOPs / (peak x compute time), as the MFU waterfall
    recompute_share: float      # recompute time / compute time
    kernels: tuple[KernelRate, ...]
    links: tuple[LinkTier, ...]
    comm: tuple[CommClass, ...]
    dp_hidden_fraction: float | None   # measured: of the DP transfer time, not exposed
    dp_overlap: float           # share of the last microbatch's backward DP buckets hide under
    dp_buckets: int             # DP gradient buckets per step
    bubble: BubbleCalibration | None
    idle_ms: float
    straggler_wait_ms: float
    terms: tuple[Term, ...]     # the measured step in the planner's terms (sum = step_ms)
    assumptions: tuple[str, ...]
    memory: MemoryCalibration | None = None   # without [memory] events: formulas only


# ------------------------------------------------------------------ the diff
class StragglerBrief(Model, frozen=True, kw_only=True):
    rank: int
    host: str | None
    waited_on_ms: float


class DiffSide(Model, frozen=True, kw_only=True):
    """The part of one run's report that a diff shows."""
    run: str
    world_size: int | None
    hosts: int
    device: str | None
    layout: Layout
    step_time_ms: float
    breakdown_ms: Breakdown
    mfu: float | None
    hfu: float | None
    model_flops_per_step: float | None
    microbatches: int | None
    stragglers: tuple[StragglerBrief, ...]
    report_schema_version: int = REPORT_SCHEMA_VERSION


class StagePoints(Model, frozen=True, kw_only=True):
    """MFU points (percentage points) of change at each waterfall stage; they add up
    exactly to the MFU change."""
    kernel_efficiency: float
    recompute: float
    exposed_comm: float
    straggler_wait: float
    bubble: float
    memory: float
    idle: float

    def points(self, stage: str) -> float:
        return float(getattr(self, stage))

    def as_dict(self) -> dict[str, float]:
        return {s: self.points(s) for s in STAGES}


Fact = int | float | str | None


class SetupChange(Model, frozen=True, kw_only=True):
    what: str
    a: Fact
    b: Fact


class CollectiveSide(Model, frozen=True, kw_only=True):
    calls_per_step: float
    bytes_per_step: float | None
    time_ms: float
    exposed_ms: float
    straggler_wait_ms: float = 0.0
    bubble_ms: float = 0.0
    overlapped_ms: float = 0.0
    bus_bw_gbs: float | None
    link: str
    link_peak_gbs: float | None
    link_utilization: float | None
    group_size: int | None


class CollectiveChange(Model, frozen=True, kw_only=True):
    collective: str
    group: str
    a: CollectiveSide | None
    b: CollectiveSide | None
    exposed_delta_ms: float


class OpChange(Model, frozen=True, kw_only=True):
    op: str
    a_ms: float
    b_ms: float
    delta_ms: float


class StragglerChanges(Model, frozen=True, kw_only=True):
    new: tuple[Straggler, ...]
    resolved: tuple[Straggler, ...]
    persisting: tuple[Straggler, ...]


class TermChange(Model, frozen=True, kw_only=True):
    """One planner term: A measured, B expected from A at B's scale and layout, B
    measured (ms per rank and step), and what each change is worth in MFU points."""
    term: str
    a_ms: float
    expected_ms: float
    b_ms: float
    expected_points: float | None   # A -> expected B; they add up to the predicted change
    departure_points: float | None  # expected B -> measured B; they add up to the rest
    uses: str                       # the calibrated value(s) the expectation used
    why: str = ""                   # what the departure is, when the data says


class Expected(Model, frozen=True, kw_only=True):
    """Run B as the planner predicts it from run A's calibration (docs/diff.md)."""
    layout: str                     # B's scale and layout, in words
    step_ms: float
    mfu: float | None
    step_delta_ms: float            # expected B - measured A
    mfu_delta_points: float | None
    departure_ms: float             # measured B - expected B
    departure_points: float | None
    terms: tuple[TermChange, ...]
    assumptions: tuple[str, ...]
    narrative: str


class Diff(Model, frozen=True, kw_only=True):
    """What changed between run a and run b, and what it cost in MFU (docs/diff.md)."""
    schema_version: int = DIFF_SCHEMA_VERSION
    a: DiffSide
    b: DiffSide
    mfu_delta_points: float | None
    step_time_delta_ms: float
    breakdown_delta_ms: Breakdown
    mfu_points_by_category: StagePoints | None
    setup_changes: tuple[SetupChange, ...]
    collectives: tuple[CollectiveChange, ...]
    stragglers: StragglerChanges
    top_ops: tuple[OpChange, ...]
    recommendations: tuple[Recommendation, ...]
    narrative: str
    expected: Expected | None = None  # needs the model spec (docs/diff.md)


# ------------------------------------------------------------------ the plan
DEFAULT_EFFICIENCY = 0.55     # share of peak that large GEMMs reach in practice
DEFAULT_NETWORK_GBS = 50.0    # 400 Gb/s per GPU, one direction


class Job(Model, frozen=True, kw_only=True):
    """A dense-transformer training job to lay out (docs/planner.md)."""
    params: float
    gpus: int
    gpus_per_node: int
    seq: int
    global_batch_tokens: float
    layers: int
    hidden: int
    heads: int
    micro_batch: int = 1
    network_gbs: float = DEFAULT_NETWORK_GBS
    efficiency: float = DEFAULT_EFFICIENCY
    dtype: str | None = None  # the matmul dtype; None: the device's (bf16, else fp16, fp32)


class Plan(Model, frozen=True, kw_only=True):
    """The predicted step of one layout."""
    tp: int
    pp: int
    dp: int
    zero: int
    microbatches: int
    interleave: int
    recompute: str
    memory_gb: float
    state_gb: float
    activation_gb: float
    compute_ms: float
    bubble_ms: float
    tp_comm_ms: float
    dp_comm_ms: float
    dp_exposed_ms: float
    step_ms: float
    mfu: float
    tp_link: str
    dp_link: str
    fits: bool
    micro_batch: int = 1
    terms: tuple[Term, ...] = ()    # calibrated plans (`plan --from`): what the step is made of


class PlanResult(Model, frozen=True, kw_only=True):
    """The feasible layouts of a job, best predicted MFU first; with `--from RUN`, the
    run's calibration and the model's step at the run's own layout (`baseline`)."""
    job: Job
    device: str
    evaluated: int
    feasible: int
    plans: tuple[Plan, ...]
    dtype: str = "bf16"                 # the peak the predictions use
    dtype_reason: str | None = None     # why, when not the job's own choice
    schema_version: int = PLAN_SCHEMA_VERSION
    calibration: Calibration | None = None
    baseline: Plan | None = None
    none_reason: str | None = None      # --from: why no layout was evaluated at all


# ------------------------------------------------------------------ the nightly report
class NightlyInfo(Model, frozen=True, kw_only=True):
    """report.json's `nightly` section: which night, its verdict and exit code."""
    schema_version: int = NIGHTLY_SCHEMA_VERSION
    job: str
    run: str
    trace_start: str | None  # ISO 8601 UTC, earliest event of the traces
    ingested_at: str         # ISO 8601 UTC
    status: Literal["complete", "partial"]
    verdict: Literal["OK", "FAIL", "PARTIAL"]
    exit_code: int            # 0, 3 or 4 (docs/nightly.md)
    failed_files: tuple[FailedFile, ...]
    pruned_runs: tuple[str, ...]
    top_causes: tuple[str, ...]  # sentences with numbers, most costly first


class BaselineInfo(Model, frozen=True, kw_only=True):
    """The run a night is compared with and how it was chosen ("previous": the job's
    latest earlier night)."""
    run: str
    selected_by: Literal["previous", "--baseline"]
    trace_start: str | None


class CheckOutcome(Model, frozen=True, kw_only=True):
    """One `--fail-if`: `value` is None when the metric could not be computed."""
    condition: str
    metric: str
    op: Literal["<", "<=", ">", ">="]
    threshold: float
    value: float | None
    status: Literal["pass", "fail", "missing", "skipped"]
    passed: bool

    @property
    def failed(self) -> bool:
        return not self.passed


class NightlyReport(Report, frozen=True, kw_only=True):
    """One night of a job, `stepscope nightly` (docs/nightly.md): the run report plus the
    night's sections. report.json is this model (schema docs/nightly.schema.json);
    report.md and report.html are rendered from it."""
    nightly: NightlyInfo
    baseline: BaselineInfo | None
    baseline_note: str | None
    diff: Diff | None
    checks: tuple[CheckOutcome, ...]

    @property
    def failed_checks(self) -> tuple[CheckOutcome, ...]:
        return tuple(c for c in self.checks if c.failed)


# ------------------------------------------------------------------ the hang report
Rank = Annotated[int, msgspec.Meta(ge=0)]
Sizes = list[list[int]] | None  # one shape per tensor: [[4027, 5120]]
CollectiveState = Literal["scheduled", "started", "completed"]
StuckKind = Literal["not_entered", "not_completed"]
MismatchField = Literal["op", "dtype", "sizes"]


class GroupProgress(Model, frozen=True, kw_only=True):
    """How far one process group got (keyed by pg_name, the same on every rank)."""
    pg_name: str
    pg_desc: str
    ranks: list[Rank]
    last_completed_by_all: int | None   # collective seq every dumped member completed
    last_enqueued_max: int | None
    ranks_without_dump: list[Rank]
    membership_conflict: bool           # dumps disagree on the member list


class StuckCollective(Model, frozen=True, kw_only=True):
    """The first collective of a group that did not finish everywhere."""
    pg_name: str
    pg_desc: str
    op: str | None                      # e.g. all_to_all (None: no dump holds the entry)
    profiling_name: str | None          # e.g. nccl:all_to_all
    seq: int                            # collective_seq_id in the group
    sizes: Sizes                        # input sizes, from the lowest rank holding it
    output_sizes: Sizes
    dtype: str | None
    state: CollectiveState | None       # of the lowest rank holding it
    kind: StuckKind
    first_created_ns: int | None        # when the first rank enqueued it (epoch ns)
    missing_ranks: list[Rank]           # members that never entered it
    waiting_ranks: list[Rank]           # members that entered it and wait
    ranks_without_dump: list[Rank]


class RankOps(Model, frozen=True, kw_only=True):
    """What one rank issued for a sequence number (desync evidence)."""
    rank: int
    ops: list[str]
    sizes: list[Sizes]
    dtypes: list[list[str] | None]


class Mismatch(Model, frozen=True, kw_only=True):
    """One sequence number of one group issued differently across ranks."""
    pg_name: str
    pg_desc: str
    seq: int
    fields: Annotated[list[MismatchField], msgspec.Meta(min_length=1)]
    ranks: list[RankOps]


class CompletionLag(Model, frozen=True, kw_only=True):
    """Members that did not see collectives complete that other members completed."""
    pg_name: str
    pg_desc: str
    lagging_ranks: list[Rank]
    ahead_ranks: list[Rank]
    first_seq: int                      # first collective the laggards did not complete
    last_seq: int                       # last collective the others completed


class P2PWait(Model, frozen=True, kw_only=True):
    """A send or recv that did not complete."""
    pg_name: str
    pg_desc: str
    rank: int
    op: Literal["send", "recv"]
    peer_rank: int | None
    state: Literal["scheduled", "started"]
    sizes: Sizes
    dtype: str | None
    peer_posted: bool | None            # None: the peer left no dump


class Suspect(Model, frozen=True, kw_only=True):
    """A rank that may have caused the hang; `idle`: nothing in flight, so it is stuck
    outside NCCL."""
    rank: int
    idle: bool
    reasons: Annotated[list[str], msgspec.Meta(min_length=1)]


class HangReport(Model, frozen=True, kw_only=True):
    """Everything `stepscope hang` says about one run (docs/hang.md): suspects best first,
    stuck collectives first to hang first."""
    schema_version: int = HANG_SCHEMA_VERSION
    run: str
    verdict: Annotated[str, msgspec.Meta(min_length=1)]
    suspect_ranks: list[Rank]
    suspects: list[Suspect]
    stuck: list[StuckCollective]
    mismatches: list[Mismatch]
    completion_lags: list[CompletionLag]
    p2p_waits: list[P2PWait]
    groups: list[GroupProgress]
    dump_ranks: list[Rank]
    fr_versions: list[str]
    nccl_versions: list[str]
    notes: list[str]


# ------------------------------------------------------------------ serialization
Json: TypeAlias = "dict[str, Json] | list[Json] | str | int | float | bool | None"
JsonObject: TypeAlias = "dict[str, Json]"
"""A model's JSON as plain values (what `to_builtins` returns; what `--fail-if` reads)."""
M = TypeVar("M", bound=Model)

_ENCODER = msgspec.json.Encoder()


def to_json(model: Model) -> str:
    """The one JSON serializer: fields in declaration order, indented by 2."""
    return msgspec.json.format(_ENCODER.encode(model), indent=2).decode()


def to_builtins(model: Model) -> JsonObject:
    """The model as the plain values its JSON holds (dicts, lists, numbers, strings)."""
    out = msgspec.json.decode(_ENCODER.encode(model))
    assert isinstance(out, dict)
    return out


def from_json(text: str | bytes, kind: type[M]) -> M:
    """Parse and validate JSON written by `to_json` back into a model."""
    return msgspec.json.decode(text, type=kind)


SCHEMA_FILES: dict[str, type[Model]] = {
    "report.schema.json": Report,
    "diff.schema.json": Diff,
    "plan.schema.json": PlanResult,
    "nightly.schema.json": NightlyReport,
    "hang.schema.json": HangReport,
}


def json_schema(kind: type[Model]) -> JsonObject:
    """The JSON Schema (2020-12) of a model class, as published in docs/."""
    schema = msgspec.json.schema(kind)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def schema_text(kind: type[Model]) -> str:
    """The published text of a model's JSON Schema (docs/<name>.schema.json)."""
    return json.dumps(json_schema(kind), indent=2, sort_keys=True) + "\n"


def write_schemas(folder: Path) -> list[Path]:
    """Regenerate the published schemas: `python -m stepscope.analyzers.model docs/`."""
    written = []
    for name, kind in SCHEMA_FILES.items():
        path = folder / name
        path.write_text(schema_text(kind))
        written.append(path)
    return written


if __name__ == "__main__":
    import sys

    for written in write_schemas(Path(sys.argv[1] if len(sys.argv) > 1 else "docs")):
        print(written)
