"""The report's critical-path section and the what-if results (docs/critical_path.md).
"""

from __future__ import annotations

from typing import Literal

from stepscope.analyzers.results.base import Model


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
