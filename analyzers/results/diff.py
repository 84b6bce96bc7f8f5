"""A diff of two runs (`stepscope diff`, docs/diff.md).
"""

from __future__ import annotations

from stepscope.analyzers.results.base import STAGES, Model
from stepscope.analyzers.results.report import (
    REPORT_SCHEMA_VERSION,
    Breakdown,
    Layout,
    Recommendation,
    Straggler,
)

DIFF_SCHEMA_VERSION = 3    # 2: `expected` (B as predicted from A, docs/diff.md).
# 3: collectives[].a/b split like the report's (exposed_ms without the wait)


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
