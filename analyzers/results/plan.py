"""The planner's results (`stepscope plan`, docs/planner.md) and the calibration on a measured
run they can start from.
"""

from __future__ import annotations

from stepscope.analyzers.results.base import Model

PLAN_SCHEMA_VERSION = 2    # 2: `calibration`, `baseline` and each plan's `terms`


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
