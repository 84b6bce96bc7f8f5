"""The report model: one plain dict per run (docs/report.md), built from the database.

Renderers (dashboard/render_report.py) turn it into Markdown; JSON is the dict itself.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import duckdb

from analyzers._sql import sql
from analyzers.advisor import gather, recommendations
from analyzers.attribution import CATEGORIES
from analyzers.layout import layout
from analyzers.mfu import ModelSpec, mfu_section
from analyzers.nccl import build_nccl_section
from analyzers.pipeline import pipeline
from analyzers.stragglers import stragglers

REPORT_SCHEMA_VERSION = 1

RUN_SQL = """
SELECT r.run, r.status, r.world_size, r.n_ranks, r.failed_files,
    (SELECT mode(coalesce(device_name, CASE WHEN device IS NULL THEN 'CPU only'
                                            ELSE 'GPU (unnamed)' END))
     FROM ranks WHERE run = $run) AS device,
    (SELECT list(DISTINCT host ORDER BY host) FROM ranks WHERE run = $run AND host IS NOT NULL)
        AS hosts,
    (SELECT mode(timeline) FROM step_attribution WHERE run = $run) AS timeline,
    (SELECT host_source FROM run_nodes WHERE run = $run) AS host_source,
    (SELECT list(DISTINCT step_source ORDER BY step_source) FROM ranks
     WHERE run = $run AND step_source IS NOT NULL) AS step_sources
FROM runs r WHERE r.run = $run
"""
MATCH_SQL = """
SELECT match_method, count(*) FROM collective_waits WHERE run = $run GROUP BY 1 ORDER BY 1
"""


def _stage_of(pipe: dict[str, Any] | None) -> dict[int, int]:
    """Pipeline stage of each pipeline rank (empty without a pipeline)."""
    if not pipe:
        return {}
    return {r: s["stage"] for s in pipe["per_stage"] for r in s["ranks"]}


def _breakdown(row: dict[str, Any]) -> dict[str, float]:
    return {cat: float(row[cat] or 0.0) for cat in CATEGORIES}


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def build_report(con: duckdb.DuckDBPyConnection, run: str, spec: ModelSpec | None = None,
                 peak_tflops: float | None = None, dtype: str | None = None) -> dict[str, Any]:
    """The full report of one run as JSON-ready data (times in ms)."""
    info = next(iter(con.execute(RUN_SQL, {"run": run}).fetchall()), None)
    if info is None:
        raise KeyError(run)
    (name, status, world_size, n_ranks, failed, device, hosts, timeline, host_source,
     step_sources) = info
    rank_rows = con.sql(sql("rank_means.sql"), params={"run": run}).pl().to_dicts()
    per_rank = [{"rank": r["rank"], "host": r["host"], "n_steps": r["n_steps"],
                 "step_time_ms": r["step_time_ms"], "breakdown_ms": _breakdown(r)}
                for r in rank_rows]
    step_rows = con.sql(sql("step_means.sql"), params={"run": run}).pl().to_dicts()
    per_step = [{"step": r["step"], "complete": r["complete"], "n_ranks": r["n_ranks"],
                 "step_time_ms": r["step_time_ms"], "breakdown_ms": _breakdown(r)}
                for r in step_rows]
    step_time = _mean([r["step_time_ms"] for r in per_rank])
    breakdown = {cat: _mean([r["breakdown_ms"][cat] for r in per_rank]) for cat in CATEGORIES}
    pipe = pipeline(con, run, per_rank)
    methods = dict(con.sql(MATCH_SQL, params={"run": run}).fetchall())
    notes = _notes(per_rank, methods, timeline) + _coverage_notes(
        list(step_sources or []), int(n_ranks or 0), int(world_size or 0))
    report = {
        "schema_version": REPORT_SCHEMA_VERSION,
        "run": {"name": name, "status": status, "world_size": world_size, "ranks": n_ranks,
                "device": device, "hosts": list(hosts or []), "host_source": host_source,
                "step_source": ", ".join(step_sources or []) or None, "timeline": timeline,
                "failed_files": failed},
        "layout": layout(con, run, int(world_size or n_ranks), pipe["stages"] if pipe else None),
        "step_time_ms": step_time,
        "breakdown_ms": breakdown,
        "per_rank": per_rank,
        "per_step": per_step,
        "stragglers": stragglers(con, run, step_time, per_rank, _stage_of(pipe)),
        "pipeline": pipe,
        "collective_matching": {k: int(v) for k, v in methods.items()},
        "notes": notes,
    }
    report["mfu"] = mfu_section(con, run, report, spec, peak_tflops, dtype)
    ctx = gather(con, run, report, spec)
    report["collectives"] = ctx.collectives
    report["recommendations"] = recommendations(ctx)
    nccl = build_nccl_section(con, run)
    if nccl is not None:
        report["nccl"] = dataclasses.asdict(nccl)
    return report


STEP_SOURCE_NOTES = {
    "optimizer_step": "no ProfilerStep#N: steps end where each Optimizer.step ends",
    "whole_window": ("no ProfilerStep#N, step marker, Optimizer.step or repeating annotation: "
                     "the whole profiled window is taken as one step (pass --step-marker NAME "
                     "when the loop is annotated)"),
}


def _coverage_notes(step_sources: list[str], n_ranks: int, world_size: int) -> list[str]:
    """Which step source was used (when not ProfilerStep#N), and what a partial rank set
    cannot tell."""
    notes = []
    for source in step_sources:
        if source in STEP_SOURCE_NOTES:
            notes.append(STEP_SOURCE_NOTES[source])
        elif source.startswith("marker:"):
            notes.append(f"steps are the calls of the annotation '{source[7:]}' (--step-marker)")
        elif source.startswith("annotation:"):
            notes.append(f"no ProfilerStep#N: steps are the calls of the repeating top-level "
                         f"annotation '{source[11:]}'")
    if 0 < n_ranks < world_size:
        notes.append(
            f"only {n_ranks} of {world_size} ranks were traced: the breakdown covers the ranks "
            "present; matching collectives across ranks, straggler detection and the pipeline "
            "shape need every rank of the groups involved")
    return notes


def _notes(per_rank: list[dict[str, Any]], methods: dict[str, int],
           timeline: str | None) -> list[str]:
    notes = []
    if not per_rank:
        notes.append("no ProfilerStep#N in the traces: nothing to attribute per step")
    if timeline == "cpu":
        notes.append("CPU-only traces: attributed on the CPU timeline of the training threads")
    if methods.get("step_order"):
        notes.append(
            f"{methods['step_order']} collective calls had no process-group metadata; they "
            "were matched across ranks by collective name and order within the step")
    return notes
