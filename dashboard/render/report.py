"""Markdown and JSON rendering of a run report (analyzers.results.Report).

Pure functions of the model: no database, no recomputed numbers; labels come from
labels.py, number formatting from format.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from stepscope.analyzers.flops.peaks import peak_label
from stepscope.analyzers.results import (
    Breakdown,
    CollectiveStat,
    FailedFile,
    Mfu,
    Pipeline,
    RankTimes,
    Recommendation,
    Report,
    StepTimes,
    Straggler,
    to_json,
)
from stepscope.dashboard.render.alltoall import alltoall_block
from stepscope.dashboard.render.blocks import markdown
from stepscope.dashboard.render.clocks import clocks_block
from stepscope.dashboard.render.critical_path import critical_path_markdown
from stepscope.dashboard.render.format import (
    fixed,
    layout_degrees,
    layout_nodes,
    mb,
    md_code,
    md_text,
    mfu_pct,
    num,
    pct,
    points,
    share,
)
from stepscope.dashboard.render.labels import (
    CATEGORIES,
    CATEGORY_LABELS,
    COMM_SPLIT,
    IDLE_LABELS,
    IDLE_PARTS,
    WATERFALL_LABELS,
    idle_shown,
    link_cell,
)
from stepscope.dashboard.render.memory import memory_block
from stepscope.dashboard.render.nccl import nccl_lines
from stepscope.dashboard.render.roofline import roofline_block
from stepscope.dashboard.render.sections import walk
from stepscope.dashboard.render.stragglers import NONE_FOUND, no_straggler_line

LABELS = CATEGORY_LABELS


def report_json(report: Report) -> str:
    return to_json(report)


def _breakdown_table(breakdown: Breakdown, step_ms: float) -> list[str]:
    lines = ["| category | ms/step | share |", "|---|---:|---:|"]
    for cat in CATEGORIES:
        ms = breakdown.ms(cat)
        lines.append(f"| {LABELS[cat]} | {ms:.2f} | {share(ms, step_ms)} |")
    lines.append(f"| **step** | **{step_ms:.2f}** | 100% |")
    return lines


def idle_lines(report: Report) -> list[str]:
    """Why the GPU was idle (docs/attribution.md): the split, its evidence and what the
    host ran meanwhile; nothing unless `idle_shown` (a GPU run idle >= 1% of the step)."""
    idle, step_ms = report.idle_split, report.step_time_ms
    if idle is None or not idle_shown(report):
        return []
    split = idle.split_ms
    out = ["", "### Idle: why the GPU waited", "", "| part of idle | ms/step | share |",
           "|---|---:|---:|"]
    out += [f"| {IDLE_LABELS[p]} | {split.ms(p):.2f} | {share(split.ms(p), step_ms)} |"
            for p in IDLE_PARTS]
    out += ["", f"- {idle.gaps_per_step:.0f} idle gaps per step, "
                f"{idle.short_gaps_per_step:.0f} of them at most {idle.short_gap_us:.0f} us; "
                f"of the wait for the host, {idle.host_bound_after_sync_ms:.2f} ms right after "
                f"a synchronization and {idle.host_bound_data_loader_ms:.2f} ms in the "
                "DataLoader"]
    if idle.host_activity:
        out += ["", "| the host ran meanwhile | kind | thread | ms/step |", "|---|---|---|---:|"]
        out += [f"| {md_code(a.name)} | {md_text(a.kind)} | {md_text(a.thread)} | "
                f"{a.ms:.2f} |"
                for a in idle.host_activity[:5]]
    return out


def _mfu_lines(mfu: Mfu) -> list[str]:
    out = ["", "## MFU", ""]
    if mfu.mfu is None:
        return out + [f"- not computed: {md_text(mfu.message)}"]
    lower = mfu.lower_bound
    out.append(f"- **MFU {mfu_pct(mfu.mfu, lower)}**, HFU {mfu_pct(mfu.hfu or 0.0, lower)} of "
               f"{(mfu.peak_flops_per_gpu or 0.0) / 1e12:.1f} TFLOP/s "
               f"{md_text(peak_label(mfu.peak_dtype, mfu.dtype))} "
               f"per GPU ({md_text(mfu.device)}; peak table "
               f"{md_text(mfu.peak_table_version)})")
    if mfu.lower_bound:
        out.append(f"- covers: {md_text(mfu.headline)}")
    if mfu.peak_reason:
        out.append(f"- peak: {md_text(mfu.peak_reason)}")
    out.append(f"- model FLOPs per step: {mfu.model_flops_per_step:.4g} "
               f"(from the {md_text(mfu.flops_source)})")
    if mfu.flops_sources_ratio is not None:
        out.append(f"- traces count {mfu.flops_from_trace:.4g} FLOPs per step, "
                   f"{100 * (mfu.flops_sources_ratio - 1):+.1f}% vs the spec")
    if mfu.achieved_tflops_per_gpu is not None:
        out.append(f"- achieved {mfu.achieved_tflops_per_gpu:.1f} TFLOP/s per GPU while "
                   "computing")
    if mfu.message:
        out.append(f"- note: {md_text(mfu.message)}")
    out += ["", "| from 100% of peak, lost to | points |", "|---|---:|"]
    for step in mfu.waterfall:
        out.append(f"| {WATERFALL_LABELS[step.name]} | {points(step.points, 2)} |")
    out.append(f"| **= MFU** | **{fixed(100 * mfu.mfu, 2)}** |")
    return out


def gain_words(r: Recommendation, step_time_ms: float | None) -> str:
    """A recommendation's gain as a reader weighs it: ms per step and its share of the
    step first, MFU points after ('3.52 ms/step (34.0% of the step), about +0.014 MFU
    points'), so a fix of a third of the step never reads as a trivial +0.014."""
    of_step = (f" ({share(r.expected_gain_ms, step_time_ms)} of the step)"
               if step_time_ms else "")
    pts = (f", about {points(r.expected_mfu_points, signed=True)} MFU points"
           if r.expected_mfu_points is not None else "")
    return f"{r.expected_gain_ms:.2f} ms/step{of_step}{pts}"


def recommendation_lines(recs: Sequence[Recommendation],
                         step_time_ms: float | None = None) -> list[str]:
    """The recommendations in Markdown; `step_time_ms` (the run's, or B's in a diff)
    gives each gain's share of the step."""
    out = ["", "## Recommendations", ""]
    if not recs:
        return out + ["- none: no category costs enough for a fix to pay off"]
    for r in recs:
        out.append(f"- **[{md_text(r.severity)}] {md_text(r.title)}** "
                   f"({md_code(r.id, table=False)}): expected gain "
                   f"{gain_words(r, step_time_ms)}.")
        out.append(f"  - evidence: {md_text(r.evidence)}")
        out.append(f"  - {md_text(r.detail)}")
    return out


def collective_lines(rows: Sequence[CollectiveStat]) -> list[str]:
    if not rows:
        return []
    out = ["", "## Communication (per rank and step)", "", COMM_SPLIT, "",
           "| collective | group | calls | MB | time ms | exposed ms | straggler wait ms "
           "| in bubble ms | overlapped ms | bus GB/s | NCCL-measured bus GB/s "
           "| link (peak GB/s) |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for c in rows:
        link = md_text(link_cell(c))
        out.append(f"| {md_text(c.collective)} | {md_text(c.group_label)} | "
                   f"{c.calls_per_step:.1f} | "
                   f"{mb(c.bytes_per_step)} | {c.time_ms:.2f} | "
                   f"{c.exposed_ms:.2f} | {c.straggler_wait_ms:.2f} | {c.bubble_ms:.2f} | "
                   f"{c.overlapped_ms:.2f} | {num(c.bus_bw_gbs, '.1f')} | "
                   f"{num(c.measured_bus_bw_gbs, '.1f')} | {link} |")
    out.append(f"| **all** | | | | **{sum(c.time_ms for c in rows):.2f}** | "
               f"**{sum(c.exposed_ms for c in rows):.2f}** | "
               f"**{sum(c.straggler_wait_ms for c in rows):.2f}** | "
               f"**{sum(c.bubble_ms for c in rows):.2f}** | "
               f"**{sum(c.overlapped_ms for c in rows):.2f}** | | | |")
    warnings = [c.warning for c in rows if c.warning]
    return out + ([""] if warnings else []) + [f"- warning: {md_text(w)}" for w in warnings]


def straggler_lines(stragglers: Sequence[Straggler], report: Report | None = None
                    ) -> list[str]:
    """The Stragglers section; with `report`, "unknown" when ranks were not traced."""
    out = ["", "## Stragglers", ""]
    if not stragglers:
        return out + [f"- {NONE_FOUND if report is None else no_straggler_line(report)}"]
    return out + [f"- **rank {s.rank}** ({md_text(s.host or 'unknown host')}): "
                  f"{s.waited_on_ms:.1f} ms/step of waiting in total; {md_text(s.evidence)}"
                  for s in stragglers]


def pipeline_lines(pipe: Pipeline | None) -> list[str]:
    out = ["", "## Pipeline", ""]
    if pipe is None:
        return out + ["- no pipeline parallelism (no point-to-point traffic between stages)"]
    out.append(f"- {pipe.stages} stages x {pipe.microbatches} microbatches "
               f"({pipe.pipelines} pipeline(s)); bubble measured "
               f"{pct(pipe.bubble_fraction)} of the step, 1F1B theory "
               f"(S-1)/(S-1+M) = {pct(pipe.bubble_theory)}")
    for st in pipe.per_stage:
        out.append(f"- stage {st.stage} (ranks {', '.join(map(str, st.ranks))}): "
                   f"bubble {st.bubble_ms:.2f} ms, idle {st.idle_ms:.2f} ms")
    return out


def _cells(breakdown: Breakdown) -> str:
    return " | ".join(f"{breakdown.ms(c):.2f}" for c in CATEGORIES)


NONE_ATTRIBUTED = "- none: no step of any rank was attributed"


def per_rank_lines(rows: Sequence[RankTimes]) -> list[str]:
    out = ["", "## Per rank (ms/step)", "",
           "| rank | host | step | " + " | ".join(LABELS[c] for c in CATEGORIES) + " |",
           "|---:|---|---:|" + "---:|" * len(CATEGORIES)]
    if not rows:
        return out[:3] + [NONE_ATTRIBUTED]
    return out + [f"| {r.rank} | {md_text(r.host) if r.host else '-'} | {r.step_time_ms:.2f} | "
                  f"{_cells(r.breakdown_ms)} |" for r in rows]


def per_step_lines(rows: Sequence[StepTimes]) -> list[str]:
    out = ["", "## Per step (ms, mean over ranks)", "",
           "| step | complete | step | " + " | ".join(LABELS[c] for c in CATEGORIES) + " |",
           "|---:|---|---:|" + "---:|" * len(CATEGORIES)]
    if not rows:
        return out[:3] + [NONE_ATTRIBUTED]
    return out + [f"| {s.step} | {'yes' if s.complete else 'no (last)'} | "
                  f"{s.step_time_ms:.2f} | {_cells(s.breakdown_ms)} |" for s in rows]


FAILED_SHOWN = 20  # failed files listed by name; the JSON report lists every one


def failed_files_lines(files: Sequence[FailedFile]) -> list[str]:
    """The trace files of a partial run that could not be ingested, each with why (the
    report covers the other files); the first FAILED_SHOWN of them."""
    if not files:
        return []
    out = [f"- **partial run**: {len(files)} trace file(s) could not be ingested; the "
           "report covers the others:"]
    out += [f"  - {md_code(f.file, table=False)}: {md_text(f.error)}"
            for f in files[:FAILED_SHOWN]]
    if len(files) > FAILED_SHOWN:
        out.append(f"  - and {len(files) - FAILED_SHOWN} more (`--format json` lists "
                   "every one)")
    return out


def _header_lines(report: Report) -> list[str]:
    run, lay = report.run, report.layout
    out = [f"# stepscope report: {md_text(run.name)}", ""]
    out.append(f"- {run.ranks} of {run.world_size} ranks on {len(run.hosts) or '?'} "
               f"host(s); device: {md_text(run.device)}; timeline: "
               f"{md_text(run.timeline) if run.timeline else '-'}; status: {md_text(run.status)}")
    out += failed_files_lines(run.failed_files)
    if run.rank_subset is not None:
        out.append(f"- subset: ranks {run.rank_subset} only (--ranks)")
    out.append(f"- layout: {layout_degrees(lay)}; {layout_nodes(lay)} ({md_text(lay.source)}"
               + (f"; nodes: {md_text(lay.node_source)}" if lay.node_source else "") + ")")
    out += [f"- layout note: {md_text(note)}" for note in lay.notes]
    out += [f"- note: {md_text(note)}" for note in report.notes]
    return out


def _breakdown_lines(report: Report) -> list[str]:
    step = report.step_time_ms
    if not report.run.ranks:  # NCCL evidence alone: no step to break down (a header note)
        return ["", "## Where the step time went", "",
                "- not attributed: the run holds no profiler traces"]
    out = ["", f"## Where the step time went ({step:.2f} ms/step, mean over ranks)", ""]
    return out + _breakdown_table(report.breakdown_ms, step) + idle_lines(report)


# how each section of sections.REPORT_SECTIONS is drawn in Markdown
MARKDOWN: dict[str, Callable[[Report], list[str]]] = {
    "header": _header_lines,
    "breakdown": _breakdown_lines,
    "mfu": lambda r: _mfu_lines(r.mfu),
    "roofline": lambda r: markdown(roofline_block(r.roofline)),
    "recommendations": lambda r: recommendation_lines(r.recommendations, r.step_time_ms)
    if r.run.ranks else ["", "## Recommendations", "", "- none: no profiler traces to weigh"],
    "collectives": lambda r: collective_lines(r.collectives),
    "all_to_all": lambda r: markdown(alltoall_block(r.all_to_all)),
    "memory": lambda r: markdown(memory_block(r.memory, r.run.timeline == "gpu",
                                                  r.memory_note)),
    "nccl": lambda r: nccl_lines(r.nccl),
    "stragglers": lambda r: straggler_lines(r.stragglers, r),
    "pipeline": lambda r: pipeline_lines(r.pipeline),
    "critical_path": lambda r: critical_path_markdown(r.critical_path, r.step_time_ms),
    "clocks": lambda r: markdown(clocks_block(r.clocks)),
    "per_rank": lambda r: per_rank_lines(r.per_rank),
    "per_step": lambda r: per_step_lines(r.per_step),
}


def report_markdown(report: Report) -> str:
    """A human report: every section of sections.REPORT_SECTIONS, in that order."""
    return "\n".join(line for lines in walk(MARKDOWN, report) for line in lines) + "\n"
