"""The run report (`stepscope report`): its sections and the `Report` that holds them.
"""

from __future__ import annotations

import msgspec

from stepscope.analyzers.results.analyses import AllToAll, Clocks, MemorySection, Roofline
from stepscope.analyzers.results.base import CATEGORIES, Model
from stepscope.analyzers.results.critical_path import CriticalPath

REPORT_SCHEMA_VERSION = 5  # 2: run.failed_files an array; idle_split. 3: critical_path.
#                           4: roofline, memory, all_to_all sections.
# 5: collectives[].exposed_ms without the straggler wait and the bubble (split out)


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
    # what the MFU covers (docs/mfu.md, "What the MFU covers"): the share of the complete
    # steps' compute-kernel time in ops with shapes (the roofline's coverage; None: no GPU
    # kernels); with the trace's FLOPs and under half of that time shaped, `mfu` counts
    # only the shaped work (`lower_bound`), `mfu_at_shaped_rate` = mfu / shaped_share is
    # the MFU if the other kernels ran at the shaped ones' FLOP rate (None above 100%)
    shaped_share: float | None = None
    lower_bound: bool = False
    mfu_at_shaped_rate: float | None = None
    headline: str | None = None         # the MFU as every output states it, in words


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
    #   | backend (gloo) | kernel_table (link "none": a local phase of an exchange)
    link_peak_gbs: float | None
    link_utilization: float | None
    role: str = "unknown"               # what it is for (analyzers/comm/roles.py)
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
    # which launch of the logs (NcclLaunch.launch); absent when the logs hold one launch
    launch: int | msgspec.UnsetType = msgspec.UNSET


class NcclLaunch(Model, frozen=True, kw_only=True):
    """One launch of the job in the NCCL logs: processes joined by the communicators they
    share (no communicator links two launches), e.g. two runs pasted into one file, whose
    different pids claim the same global ranks."""
    launch: int                         # 1, 2, ... in the order the logs show them
    comm_id: str                        # its largest communicator
    nranks: int                         # that communicator's size
    communicators: int                  # communicators of this launch
    hosts: dict[str, list[int]]         # host -> global ranks
    pids: dict[str, list[int]]          # host -> pids


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


class BenchRow(Model, frozen=True, kw_only=True):
    """One line of an nccl-tests result table, out-of-place or in-place."""
    size_bytes: int
    dtype: str
    in_place: bool
    time_us: float | None
    algbw_gbs: float | None
    busbw_gbs: float | None


class NcclBench(Model, frozen=True, kw_only=True):
    """One nccl-tests result table found in the logs, held against its link's peak
    (analyzers/comm/bench.py; docs/report.md, "nccl-tests")."""
    source_file: str
    bench: int                          # the table's number in its file
    test: str | None                    # all_reduce_perf, sendrecv_perf, ... (None: unnamed)
    test_source: str | None             # log | file_name
    ranks: int | None                   # `# Using devices` lines
    hosts: list[str]
    devices: list[str]
    avg_bus_bw_gbs: float | None        # `# Avg bus bandwidth` as printed
    mean_bus_bw_gbs: float | None       # the mean of the table's busbw values (the same sum)
    best_bus_bw_gbs: float | None
    best_size_bytes: int | None
    best_in_place: bool | None
    link: str                           # nvlink | shm | ib | network | socket | unknown
    link_source: str                    # nccl_log (its communicator's channels) | assumed
    link_peak_gbs: float | None         # one direction
    peak_source: str | None
    best_of_peak: float | None          # best_bus_bw_gbs / link_peak_gbs
    rows: list[BenchRow]


class NcclSection(Model, frozen=True, kw_only=True):
    """What NCCL's own evidence (Flight Recorder dumps, NCCL_DEBUG logs) says about the
    job (analyzers/comm/nccl.py)."""
    versions: list[str]
    sources: list[NcclSource]
    hosts: dict[str, list[int]]         # host -> global ranks (NCCL logs)
    ranks: list[NcclRank]
    groups: list[NcclGroup]
    measured: list[MeasuredOps] = []    # NCCL Inspector bandwidth ([] without it)
    findings: list[NcclFinding]
    # nccl-tests result tables in the logs; absent from the JSON without them
    bench: list[NcclBench] | msgspec.UnsetType = msgspec.UNSET
    # the launches of the logs when there are several (NcclLaunch); absent for one
    launches: list[NcclLaunch] | msgspec.UnsetType = msgspec.UNSET


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
    clocks: Clocks | None = None
    # why a GPU run has no memory section when the traces say profile_memory=1 (else None)
    memory_note: str | None = None
