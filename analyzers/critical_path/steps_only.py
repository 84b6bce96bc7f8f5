"""The critical path of each chosen step and nothing else: the graph, what set each
start and the path per step (graph.py, path.py), without the what-if's max-plus graph,
the default what-ifs or any other report section. `stepscope export` draws only the
steps' runs, so building the whole report for them (as the export once did) cost the
report's peak memory at 1,024 ranks (benchmarks/README.md, "bench_export.py")."""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

from stepscope.analyzers.critical_path.analysis import step_summary
from stepscope.analyzers.critical_path.graph import causes, load
from stepscope.analyzers.critical_path.path import parents, step_path
from stepscope.analyzers.results import CriticalPath


def step_paths(con: duckdb.DuckDBPyConnection, run: str,
               steps: Sequence[int] | None = None) -> CriticalPath:
    """The report's `critical_path.steps` of run `run` (the same runs, ranks and times;
    `mean_step_ms` left 0), for `steps` only when given; no step when the run has no GPU
    op in the graph."""
    g, edges = load(con, run)
    if g.n == 0:
        return CriticalPath()
    why = causes(g, edges)
    del edges  # the largest arrays; the path needs only what set each start
    parent = parents(g, why)
    complete = sorted({int(k) for k in g.w_step})
    chosen = complete if steps is None else [k for k in complete if k in set(steps)]
    paths = [p for p in (step_path(g, why, parent, k) for k in chosen) if p is not None]
    return CriticalPath(steps=tuple(step_summary(p, 0.0) for p in paths))


__all__ = ["step_paths"]
