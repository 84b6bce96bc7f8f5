"""The run report (analyzers.results.Report), built in one pass from the run context.

`build_report` reads the shared facts once (analyzers.context.run_context), then each
analyzer returns its typed section; the advisor judges the finished sections. Renderers
(dashboard/render/report.py, html_report.py) turn the model into Markdown and HTML;
`analyzers.results.to_json` is the JSON.
"""

from __future__ import annotations

import duckdb

from stepscope.analyzers._memory import REPORT_MEMORY_LIMIT, Bound
from stepscope.analyzers._sql import sql
from stepscope.analyzers.advice.recommend import gather, recommendations
from stepscope.analyzers.breakdown.idle import idle_section
from stepscope.analyzers.breakdown.stragglers import stragglers
from stepscope.analyzers.clocks import clocks_section
from stepscope.analyzers.comm.alltoall import alltoall_section
from stepscope.analyzers.comm.collectives import collective_stats
from stepscope.analyzers.comm.nccl import build_nccl_section
from stepscope.analyzers.comm.roles import assign_roles
from stepscope.analyzers.context import ReportOptions, RunContext, no_gpu_timeline, run_context
from stepscope.analyzers.critical_path.analysis import critical_path_section
from stepscope.analyzers.device_memory import memory_section
from stepscope.analyzers.flops.counted_ops import counted_ops
from stepscope.analyzers.flops.mfu import mfu_section
from stepscope.analyzers.flops.model_spec import ModelSpec
from stepscope.analyzers.flops.roofline import roofline_section
from stepscope.analyzers.parallel.pipeline import pipeline
from stepscope.analyzers.profiler_settings import memory_note
from stepscope.analyzers.results import REPORT_SCHEMA_VERSION, Pipeline, Report

__all__ = ["REPORT_SCHEMA_VERSION", "ReportOptions", "build_report", "report_from_context"]



def build_report(con: duckdb.DuckDBPyConnection, run: str, spec: ModelSpec | None = None,
                 peak_tflops: float | None = None, dtype: str | None = None) -> Report:
    """The full report of one run (times in ms); KeyError when there is no such run."""
    options = ReportOptions(spec=spec, peak_tflops=peak_tflops, dtype=dtype)
    return report_from_context(run_context(con, run, options))


def report_from_context(ctx: RunContext) -> Report:
    """Every section from one context, DuckDB's memory bounded (analyzers/_memory.py):
    the sections that grow most with the job (critical path, MFU, roofline) run again
    alone at the connection's own limit when they do not fit, the others with the rest
    of the report."""
    with Bound(ctx.con, REPORT_MEMORY_LIMIT) as bound:
        return bound.fit(lambda: _sections(ctx, bound))


def _sections(ctx: RunContext, bound: Bound) -> Report:
    """Every section, the run's counted ops derived once for all that read them
    (analyzers/flops/counted_ops.py); the advisor sees only finished sections."""
    with counted_ops(ctx.con, ctx.run):
        return _built(ctx, bound)


def _built(ctx: RunContext, bound: Bound) -> Report:
    attr = ctx.attribution
    pipe = pipeline(ctx.topology, attr.by_rank)
    late = stragglers(ctx, stage_of(pipe))
    path = bound.fit(lambda: critical_path_section(ctx, late, ctx.topology))
    mfu = bound.fit(lambda: mfu_section(ctx))
    stats = assign_roles(collective_stats(ctx), ctx.world, ctx.layout)
    idle = idle_section(ctx)
    memory, a2a = memory_section(ctx), alltoall_section(ctx)
    rows = ctx.con.execute(sql("report/match_methods.sql"), {"run": ctx.run}).fetchall()
    methods = {str(k): int(v) for k, v in rows}
    return Report(
        schema_version=REPORT_SCHEMA_VERSION, run=ctx.info, layout=ctx.layout,
        step_time_ms=attr.step_time_ms, breakdown_ms=attr.breakdown_ms,
        per_rank=attr.per_rank, per_step=attr.per_step,
        stragglers=late, pipeline=pipe, collective_matching=methods,
        notes=notes(ctx, methods) + shape_notes(ctx) + coverage_notes(ctx), mfu=mfu,
        collectives=stats,
        recommendations=recommendations(gather(ctx, pipe, late, mfu, stats, idle,
                                               critical_path=path, memory=memory,
                                               all_to_all=a2a)),
        nccl=build_nccl_section(ctx.con, ctx.run), idle_split=idle, critical_path=path,
        roofline=bound.fit(lambda: roofline_section(ctx, mfu)), memory=memory,
        all_to_all=a2a, clocks=clocks_section(ctx.con, ctx.run),
        memory_note=memory_note(ctx.con, ctx.run) if memory is None else None)


def stage_of(pipe: Pipeline | None) -> dict[int, int]:
    """Pipeline stage of each pipeline rank (empty without a pipeline)."""
    if pipe is None:
        return {}
    return {r: s.stage for s in pipe.per_stage for r in s.ranks}


NO_TRACES_NOTE = ("no profiler traces (only NCCL evidence: NCCL logs or Flight Recorder "
                  "dumps): nothing to attribute per step")


def notes(ctx: RunContext, methods: dict[str, int]) -> tuple[str, ...]:
    """Caveats a reader needs before trusting the numbers."""
    out = []
    if not ctx.attribution.per_rank:
        out.append(NO_TRACES_NOTE if not ctx.info.ranks
                   else "no ProfilerStep#N in the traces: nothing to attribute per step")
    if ctx.info.timeline == "cpu":
        out.append(f"{no_gpu_timeline(ctx.info)}: attributed on the CPU timeline of the "
                   "training threads")
    if methods.get("step_order"):
        out.append(
            f"{methods['step_order']} collective calls had no process-group metadata; they "
            "were matched across ranks by collective name and order within the step")
    device = ctx.device
    if device.name is None and device.has_gpu and device.peak is not None:
        p = device.properties
        out.append(f"the traces do not name the GPU (an empty name in deviceProperties): "
                   f"taken as {device.peak.name}, the peak table's entry its properties match "
                   f"(compute capability {p.get('computeMajor')}.{p.get('computeMinor')}, "
                   f"{p.get('numSms')} SMs/CUs, {p.get('totalGlobalMem')} bytes of memory)")
    return tuple(out)


def shape_notes(ctx: RunContext) -> tuple[str, ...]:
    """How communication kernels of other libraries and CUDA/HIP graphs were read."""
    out = []
    for library, calls, matched, local, local_ops in ctx.con.execute(
            sql("report/comm_kernels.sql"), {"run": ctx.run}).fetchall():
        how = ("matched across ranks by their order within the step on their group"
               if matched == calls - local else
               f"{calls - local - matched} not matched across ranks (no sequence number, and "
               "their group could not be told or not every member of it was traced): their "
               "wait for a late rank counts as exposed communication")
        alone = (f"{local} ({local_ops}) run on each rank alone and move nothing between "
                 "GPUs: never matched across ranks, no straggler evidence")
        how = alone if local == calls else f"{how}; {alone}" if local else how
        out.append(f"{calls} {library} kernel calls counted as communication "
                   f"(communication-kernel table); {how}")
    (graph_steps, cpu_steps, graph_ops, capture_steps, recorded), = ctx.con.execute(
        sql("report/graph_steps.sql"), {"run": ctx.run}).fetchall()
    if graph_steps and graph_ops:
        out.append(f"{graph_steps} rank step(s) launched CUDA/HIP graphs: the {graph_ops} GPU "
                   "ops that carry a graph launch's correlation id count for the step that "
                   "launched it")
    if cpu_steps:
        out.append(f"{cpu_steps} rank step(s) launched a graph that no GPU op is linked to: "
                   "the GPU side of those steps is missing from the trace, so each takes its "
                   "CPU step as the window (window_source cpu_step), with the unlinked GPU "
                   "ops that start inside it")
    if capture_steps:
        out.append(capture_note(capture_steps, recorded))
    return tuple(out)


def capture_note(steps: int, recorded: int) -> str:
    """What a step that captures a CUDA/HIP graph measures (docs/attribution.md, "Graph
    captures"): host time, not the captured work."""
    return (f"{steps} rank step(s) capture a CUDA/HIP graph (stream begin- to end-capture): "
            f"{recorded} kernel launches were recorded into the graph, not run, so such a "
            "step is timed on the host (its CPU step, window_source capture) and its GPU "
            "idle is the capture, not the work; it is left out of the means where its rank "
            "has other complete steps, and its ops give no FLOPs")


STEP_SOURCE_NOTES = {
    "optimizer_step": "no ProfilerStep#N: steps end where each Optimizer.step ends",
    "whole_window": ("no ProfilerStep#N, step marker, Optimizer.step or repeating annotation: "
                     "the whole profiled window is taken as one step (pass --step-marker NAME "
                     "when the loop is annotated)"),
}


def coverage_notes(ctx: RunContext) -> tuple[str, ...]:
    """Which step source was used (when not ProfilerStep#N), and what a partial rank set
    cannot tell."""
    notes = []
    for source in ctx.step_sources:
        if source in STEP_SOURCE_NOTES:
            notes.append(STEP_SOURCE_NOTES[source])
        elif source.startswith("marker:"):
            notes.append(f"steps are the calls of the annotation '{source[7:]}' (--step-marker)")
        elif source.startswith("annotation:"):
            notes.append(f"no ProfilerStep#N: steps are the calls of the repeating top-level "
                         f"annotation '{source[11:]}'")
    n_ranks, world_size = int(ctx.info.ranks or 0), int(ctx.info.world_size or 0)
    if ctx.info.rank_subset is not None:
        notes.append(
            f"covers a subset: only ranks {ctx.info.rank_subset} were ingested (--ranks), "
            f"{n_ranks} of {world_size or '?'}; cross-rank matching, stragglers and the "
            "pipeline shape see only these ranks")
    elif 0 < n_ranks < world_size:
        notes.append(
            f"only {n_ranks} of {world_size} ranks were traced: the breakdown covers the ranks "
            "present; matching collectives across ranks, straggler detection and the pipeline "
            "shape need every rank of the groups involved")
    return tuple(notes)
