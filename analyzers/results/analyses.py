"""The report's roofline, memory and all_to_all sections (docs/roofline.md, docs/memory.md,
docs/alltoall.md).
"""

from __future__ import annotations

from stepscope.analyzers.results.base import Model


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


class ClockHost(Model, frozen=True, kw_only=True, omit_defaults=True):
    """One host's clock against the host of the lowest rank (docs/timeline.md, "Clocks"),
    or a rank's whose clock is not its host's (`rank` set)."""
    host: str
    rank: int | None = None
    offset_us: float            # its clock's lead at the first matched end
    drift_ppm: float            # the lead grows by this many µs per second
    residual_us: float | None   # median |aligned end - the instance's median end|
    matched: int                # matched instances it shares with another host
    aligned: bool               # used to align times (false: see note)
    note: str | None = None


class Clocks(Model, frozen=True, kw_only=True):
    """The hosts' clocks as estimated from the ends of matched collectives and send/recv
    pairs; times of different hosts meet on the aligned clock."""
    hosts: tuple[ClockHost, ...]
    aligned: bool               # every host aligned
    residual_us: float          # the largest host residual
    summary: str
