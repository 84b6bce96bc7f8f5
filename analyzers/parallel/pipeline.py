"""Pipeline parallelism: stages, microbatches, measured bubble vs the 1F1B theory."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

import duckdb

from stepscope.analyzers._sql import sql
from stepscope.analyzers.plan.layouts import bubble_theory
from stepscope.analyzers.results import Pipeline, PipelineStage, RankTimes


def _components(edges: set[tuple[int, int]]) -> list[set[int]]:
    graph: dict[int, set[int]] = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
        graph[b].add(a)
    seen: set[int] = set()
    comps = []
    for start in sorted(graph):
        if start in seen:
            continue
        comp, todo = set(), [start]
        while todo:
            node = todo.pop()
            if node in comp:
                continue
            comp.add(node)
            todo.extend(graph[node] - comp)
        seen |= comp
        comps.append(comp)
    return comps


def _stages(comp: set[int], edges: set[tuple[int, int]], first: set[int]) -> dict[int, int]:
    """Stage index of each rank of one pipeline: distance from its first stage."""
    start = sorted(comp & first) or [min(comp)]
    stage = {start[0]: 0}
    todo = [start[0]]
    while todo:
        node = todo.pop(0)
        for a, b in edges:
            for x, y in ((a, b), (b, a)):
                if x == node and y in comp and y not in stage:
                    stage[y] = stage[node] + 1
                    todo.append(y)
    return stage


@dataclass(frozen=True)
class PipelineTopology:
    """The pipeline's shape from the point-to-point pattern of complete steps."""
    stages: int
    pipelines: int
    microbatches: int
    stage_of: dict[int, int]


def topology(con: duckdb.DuckDBPyConnection, run: str) -> PipelineTopology | None:
    """Stages, pipelines, microbatches and each rank's stage, or None when the run has
    no point-to-point traffic."""
    rows = con.sql(sql("pipeline/p2p.sql"), params={"run": run}).fetchall()
    if not rows:
        return None
    edges = {(int(r), int(p)) for r, p, *_ in rows if r != p}
    ops_per_step: dict[int, float] = defaultdict(float)
    for rank, _peer, _coll, n_ops, n_steps, _sends in rows:
        ops_per_step[int(rank)] += n_ops / max(n_steps, 1)
    firsts = con.sql(sql("pipeline/first_p2p.sql"), params={"run": run}).fetchall()
    first_sender = {int(r) for r, _step, op in firsts if op == "send"}
    comps = _components(edges)
    stage_of: dict[int, int] = {}
    for comp in comps:
        stage_of.update(_stages(comp, edges, first_sender))
    # end stages exchange 2 messages per microbatch (forward + backward), middle ones 4
    return PipelineTopology(stages=max(len(c) for c in comps), pipelines=len(comps),
                            microbatches=max(1, round(min(ops_per_step.values()) / 2)),
                            stage_of=stage_of)


def pipeline(shape: PipelineTopology | None, by_rank: Mapping[int, RankTimes]) -> Pipeline | None:
    """The pipeline section: measured bubble per stage and overall vs the 1F1B theory."""
    if shape is None:
        return None
    stage_of = shape.stage_of
    fractions = [by_rank[r].breakdown_ms.bubble / by_rank[r].step_time_ms
                 for r in stage_of if r in by_rank and by_rank[r].step_time_ms > 0]
    per_stage = []
    for s in sorted(set(stage_of.values())):
        ranks = sorted(r for r, st in stage_of.items() if st == s and r in by_rank)
        if not ranks:
            continue
        per_stage.append(PipelineStage(
            stage=s, ranks=tuple(ranks),
            bubble_ms=sum(by_rank[r].breakdown_ms.bubble for r in ranks) / len(ranks),
            idle_ms=sum(by_rank[r].breakdown_ms.idle for r in ranks) / len(ranks)))
    return Pipeline(
        stages=shape.stages, pipelines=shape.pipelines, microbatches=shape.microbatches,
        bubble_fraction=sum(fractions) / len(fractions) if fractions else 0.0,
        bubble_theory=bubble_theory(shape.stages, shape.microbatches),
        per_stage=tuple(per_stage))
