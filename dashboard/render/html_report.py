"""`stepscope report --format html`: the run report (analyzers.results.Report) as one
self-contained HTML file (html_page.py).

Big tables are aggregated (slowest ranks, per host) and long details folded into
<details>, so 1,024 ranks stay a few hundred KB. Each section is one function of the
model; `report_sections` is reused by the nightly report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from stepscope.analyzers.flops.peaks import peak_label
from stepscope.analyzers.results import (
    Breakdown,
    FailedFile,
    Mfu,
    RankTimes,
    Recommendation,
    Report,
)
from stepscope.dashboard.render.alltoall import alltoall_block
from stepscope.dashboard.render.blocks import html
from stepscope.dashboard.render.clocks import clocks_block
from stepscope.dashboard.render.critical_path import critical_path_html
from stepscope.dashboard.render.format import (
    EN_DASH,
    layout_degrees,
    layout_nodes,
    mb,
    mfu_pct,
    num,
    pct,
    rank_list_short,
    share,
)
from stepscope.dashboard.render.html_nccl import nccl_section
from stepscope.dashboard.render.html_page import (
    card,
    cards,
    esc,
    folded,
    page,
    section,
    swatch,
    table,
)
from stepscope.dashboard.render.labels import (
    CATEGORIES,
    COMM_SPLIT,
    IDLE_LABELS,
    IDLE_PARTS,
    STAGE_LABELS,
    idle_shown,
    link_cell,
)
from stepscope.dashboard.render.labels import CATEGORY_LABELS as LABELS
from stepscope.dashboard.render.memory import memory_block
from stepscope.dashboard.render.report import FAILED_SHOWN, gain_words
from stepscope.dashboard.render.roofline import roofline_block
from stepscope.dashboard.render.sections import walk
from stepscope.dashboard.render.stragglers import no_straggler_line
from stepscope.dashboard.render.svg_charts import stacked_bars, waterfall

FULL_RANK_TABLE_MAX = 256   # more ranks: slowest ranks and per-host tables only
RANK_CHART_MAX = 32         # more ranks: percentile ranks and the slowest in the chart
SLOWEST_SHOWN = 16
STEP_ROWS_OPEN = 20


def _header(report: Report) -> str:
    run, lay = report.run, report.layout
    meta = (f"{run.ranks} of {run.world_size} ranks on {len(run.hosts) or '?'} "
            f"host(s) · {run.device} · {layout_degrees(lay, '×')} · {layout_nodes(lay)} · "
            f"timeline {run.timeline or EN_DASH} · status {run.status}")
    notes = "".join(f"<li>{esc(n)}</li>" for n in (*report.notes, *lay.notes))
    return (f"<h1>stepscope report: {esc(run.name)}</h1><p class=\"meta\">{esc(meta)}</p>"
            + failed_files_html(run.failed_files)
            + (f"<ul>{notes}</ul>" if notes else ""))


def failed_files_html(files: Sequence[FailedFile]) -> str:
    """The trace files of a partial run that could not be ingested, each with why; the
    first FAILED_SHOWN by name, the rest folded."""
    if not files:
        return ""
    items = [f"<li><code>{esc(f.file)}</code>: {esc(f.error)}</li>" for f in files]
    rest = items[FAILED_SHOWN:]
    more = (f"<details><summary>{len(rest)} more</summary><ul>{''.join(rest)}</ul></details>"
            if rest else "")
    return (f'<p class="bad"><b>Partial run</b>: {len(files)} trace file(s) could not be '
            f"ingested; the report covers the others:</p>"
            f"<ul>{''.join(items[:FAILED_SHOWN])}</ul>{more}")


def _largest_loss(breakdown: Breakdown) -> tuple[str, float] | None:
    losses = [(breakdown.ms(c), c) for c in CATEGORIES
              if c != "compute" and breakdown.ms(c) > 0]
    if not losses:
        return None
    ms, cat = max(losses)
    return cat, ms


def _cards(report: Report) -> str:
    step = report.step_time_ms
    traced = bool(report.run.ranks)  # NCCL evidence alone: no step time, no straggler
    items = [card("step time", f"{step:.2f} ms" if traced else EN_DASH),
             card("MFU", mfu_pct(report.mfu.mfu, report.mfu.lower_bound, EN_DASH),
                  _covers(report.mfu)),
             card("HFU", mfu_pct(report.mfu.hfu, report.mfu.lower_bound, EN_DASH))]
    loss = _largest_loss(report.breakdown_ms)
    if loss:
        of_step = f"{share(loss[1], step)} of the step" if step else ""
        items.append(card("largest loss", esc(LABELS[loss[0]]),
                          f"{loss[1]:.2f} ms · {of_step}"))
    items.append(card("stragglers", str(len(report.stragglers)) if traced else EN_DASH))
    return cards(items)


def _covers(mfu: Mfu) -> str:
    """The MFU card's line under the value: what a lower bound covers."""
    if not mfu.lower_bound or mfu.shaped_share is None:
        return ""
    return f"{pct(mfu.shaped_share, 0)} of compute time has shapes"


def _breakdown(report: Report) -> str:
    step, bd = report.step_time_ms, report.breakdown_ms.as_dict()
    if not report.run.ranks:  # NCCL evidence alone: no step to break down
        return section("Where the step time went",
                       "<p>Not attributed: the run holds no profiler traces.</p>",
                       anchor="breakdown")
    chart = stacked_bars([("mean step", bd)], CATEGORIES, LABELS,
                         "Where the step time went (mean over ranks, ms per step)")
    rows = [[swatch(c) + esc(LABELS[c]), f"{bd[c]:.2f}",
             pct(bd[c] / step if step else None, missing=EN_DASH)] for c in CATEGORIES]
    rows.append(["<b>step</b>", f"<b>{step:.2f}</b>", "100%"])
    return section(f"Where the step time went ({step:.2f} ms/step)", chart,
                   table(["category", "ms/step", "share"], rows, numeric=(1, 2)),
                   _idle(report), anchor="breakdown")


def _idle(report: Report) -> str:
    """The idle split and what the host ran while the GPU waited."""
    idle, step = report.idle_split, report.step_time_ms
    if idle is None or not idle_shown(report):
        return ""
    rows = [[esc(IDLE_LABELS[p]), f"{idle.split_ms.ms(p):.2f}",
             share(idle.split_ms.ms(p), step, missing=EN_DASH)] for p in IDLE_PARTS]
    host = [[f"<code>{esc(a.name)}</code>", esc(a.kind), esc(a.thread), f"{a.ms:.2f}"]
            for a in idle.host_activity[:5]]
    return ("<h3>Idle: why the GPU waited</h3>"
            + table(["part of idle", "ms/step", "share"], rows, numeric=(1, 2))
            + (table(["the host ran meanwhile", "kind", "thread", "ms/step"], host,
                     numeric=(3,)) if host else ""))


def _mfu_facts(mfu: Mfu) -> list[str]:
    lower = mfu.lower_bound
    facts = [f"<b>MFU {mfu_pct(mfu.mfu, lower, EN_DASH)}</b>, "
             f"HFU {mfu_pct(mfu.hfu, lower, EN_DASH)} "
             f"of {(mfu.peak_flops_per_gpu or 0.0) / 1e12:.1f} TFLOP/s "
             f"{esc(peak_label(mfu.peak_dtype, mfu.dtype))} per "
             f"GPU ({esc(mfu.device)}; peak table {esc(mfu.peak_table_version)})",
             f"model FLOPs per step: {num(mfu.model_flops_per_step, '.4g', EN_DASH)} (from "
             f"the {esc(mfu.flops_source)})"]
    if mfu.lower_bound:
        facts.append(f"covers: {esc(mfu.headline)}")
    if mfu.peak_reason:
        facts.append(f"peak: {esc(mfu.peak_reason)}")
    if mfu.achieved_tflops_per_gpu is not None:
        facts.append(f"achieved {mfu.achieved_tflops_per_gpu:.1f} TFLOP/s per GPU while "
                     "computing")
    if mfu.message:
        facts.append(f"note: {esc(mfu.message)}")
    return facts


def _mfu(report: Report) -> str:
    mfu = report.mfu
    if mfu.mfu is None:
        return section("MFU", f"<p>Not computed: {esc(mfu.message)}</p>", anchor="mfu")
    stages = [(w.name, STAGE_LABELS[w.name], w.points) for w in mfu.waterfall]
    chart = waterfall(stages, 100 * mfu.mfu, "MFU waterfall: points of peak lost per cause")
    items = "".join(f"<li>{f}</li>" for f in _mfu_facts(mfu))
    return section("MFU", f"<ul>{items}</ul>", chart, anchor="mfu")


def recommendations_section(recs: Sequence[Recommendation],
                            step_time_ms: float | None = None) -> str:
    """The advisor's recommendations, most valuable first (also in the diff report);
    `step_time_ms` (the run's, or B's) gives each gain's share of the step."""
    if not recs:
        return section("Recommendations",
                       "<p>None: no category costs enough for a fix to pay off.</p>",
                       anchor="recommendations")
    parts = []
    for r in recs:
        parts.append(f'<div class="rec {esc(r.severity)}"><b>[{esc(r.severity)}] '
                     f"{esc(r.title)}</b> (<code>{esc(r.id)}</code>): expected gain "
                     f"{esc(gain_words(r, step_time_ms))}.<br>evidence: "
                     f"{esc(r.evidence)}<br>{esc(r.detail)}</div>")
    return section("Recommendations", *parts, anchor="recommendations")


def _stragglers(report: Report) -> str:
    rows = report.stragglers
    if not rows:
        line = no_straggler_line(report)
        return section("Stragglers", f"<p>{esc(line[0].upper() + line[1:])}.</p>",
                       anchor="stragglers")
    headers = ["rank", "host", "waited on ms/step", "slowdown", "evidence"]
    cells = [[esc(s.rank), esc(s.host or EN_DASH), f"{s.waited_on_ms:.2f}",
              num(s.slowdown, missing=EN_DASH), esc(s.evidence)] for s in rows]
    # most severe first: the rest folded
    return section("Stragglers", folded(headers, cells, (0, 2, 3), "stragglers", SLOWEST_SHOWN),
                   anchor="stragglers")


def _communication(report: Report) -> str:
    rows = report.collectives
    if not rows:
        return ""
    cells = [[esc(c.collective), esc(c.group_label), esc(c.group_size),
              f"{c.calls_per_step:.1f}", mb(c.bytes_per_step, EN_DASH),
              f"{c.time_ms:.2f}", f"{c.exposed_ms:.2f}", f"{c.straggler_wait_ms:.2f}",
              f"{c.bubble_ms:.2f}", f"{c.overlapped_ms:.2f}",
              num(c.bus_bw_gbs, ".1f", EN_DASH),
              esc(link_cell(c, EN_DASH))] for c in rows]
    cells.append(["<b>all</b>", "", "", "", "",
                  *[f"<b>{sum(getattr(c, f) for c in rows):.2f}</b>"
                    for f in ("time_ms", "exposed_ms", "straggler_wait_ms", "bubble_ms",
                              "overlapped_ms")], "", ""])
    body = table(
        ["collective", "group", "size", "calls", "MB", "time ms", "exposed ms",
         "straggler wait ms", "in bubble ms", "overlapped ms", "bus GB/s",
         "link (peak GB/s)"], cells, numeric=(2, 3, 4, 5, 6, 7, 8, 9, 10))
    warnings = "".join(f"<li>warning: {esc(c.warning)}</li>" for c in rows if c.warning)
    body += f"<ul>{warnings}</ul>" if warnings else ""
    return section("Communication (per rank and step)", f"<p>{esc(COMM_SPLIT)}</p>", body,
                   anchor="communication")


def _pipeline(report: Report) -> str:
    pipe = report.pipeline
    if pipe is None:
        return section("Pipeline", "<p>No pipeline parallelism (no point-to-point traffic "
                                   "between stages).</p>", anchor="pipeline")
    head = (f"<p>{pipe.stages} stages × {pipe.microbatches} microbatches "
            f"({pipe.pipelines} pipeline(s)); bubble measured "
            f"{pct(pipe.bubble_fraction, missing=EN_DASH)} of the step, 1F1B theory "
            f"(S-1)/(S-1+M) = {pct(pipe.bubble_theory, missing=EN_DASH)}.</p>")
    body = table(["stage", "ranks", "bubble ms", "idle ms"],
                 [[esc(s.stage), esc(rank_list_short(s.ranks)), f"{s.bubble_ms:.2f}",
                   f"{s.idle_ms:.2f}"] for s in pipe.per_stage], numeric=(0, 2, 3))
    return section("Pipeline", head, body, anchor="pipeline")


def _rank_row(r: RankTimes) -> list[str]:
    return [esc(r.rank), esc(r.host or EN_DASH), f"{r.step_time_ms:.2f}",
            *[f"{r.breakdown_ms.ms(c):.2f}" for c in CATEGORIES]]


RANK_HEADERS = ["rank", "host", "step ms", *[LABELS[c] for c in CATEGORIES]]
RANK_NUMERIC = (0, *range(2, 3 + len(CATEGORIES)))


def _chart_ranks(per_rank: Sequence[RankTimes]) -> list[tuple[str, dict[str, float]]]:
    """All ranks when few; else the fastest, median, p90 and the slowest ranks."""
    if len(per_rank) <= RANK_CHART_MAX:
        return [(f"rank {r.rank}", r.breakdown_ms.as_dict()) for r in per_rank]
    ordered = sorted(per_rank, key=lambda r: r.step_time_ms)
    n = len(ordered)
    picks = [("fastest", 0), ("median", n // 2), ("p90", int(0.9 * (n - 1)))]
    rows = [(f"rank {ordered[i].rank} ({tag})", ordered[i].breakdown_ms.as_dict())
            for tag, i in picks]
    rows += [(f"rank {r.rank}", r.breakdown_ms.as_dict()) for r in ordered[::-1][:10]]
    return rows


def _host_rows(per_rank: Sequence[RankTimes]) -> list[list[str]]:
    hosts: dict[str, list[RankTimes]] = {}
    for r in per_rank:
        hosts.setdefault(r.host or EN_DASH, []).append(r)
    rows = []
    for host, ranks in sorted(hosts.items()):
        mean = {c: sum(r.breakdown_ms.ms(c) for r in ranks) / len(ranks) for c in CATEGORIES}
        step = sum(r.step_time_ms for r in ranks) / len(ranks)
        rows.append([esc(host), str(len(ranks)), f"{step:.2f}",
                     f"{max(r.step_time_ms for r in ranks):.2f}",
                     *[f"{mean[c]:.2f}" for c in CATEGORIES]])
    return rows


def _per_rank(report: Report) -> str:
    per_rank = report.per_rank
    if not per_rank:
        return ""
    n = len(per_rank)
    title = ("Per rank (ms/step)" if n <= RANK_CHART_MAX else
             f"Per rank (ms/step): fastest, median, p90 and the 10 slowest of {n} ranks")
    parts = [stacked_bars(_chart_ranks(per_rank), CATEGORIES, LABELS, title)]
    if n > SLOWEST_SHOWN:
        slow = sorted(per_rank, key=lambda r: -r.step_time_ms)[:SLOWEST_SHOWN]
        parts += [f"<h3>The {SLOWEST_SHOWN} slowest ranks</h3>",
                  table(RANK_HEADERS, [_rank_row(r) for r in slow], RANK_NUMERIC)]
    if len({r.host for r in per_rank}) > 1:
        parts += ["<h3>Per host (mean over its ranks)</h3>",
                  table(["host", "ranks", "step ms", "slowest ms",
                         *[LABELS[c] for c in CATEGORIES]], _host_rows(per_rank),
                        (1, *range(2, 4 + len(CATEGORIES))))]
    if n <= FULL_RANK_TABLE_MAX:
        every = table(RANK_HEADERS, [_rank_row(r) for r in per_rank], RANK_NUMERIC)
        parts.append(every if n <= SLOWEST_SHOWN else
                     f"<details><summary>All {n} ranks</summary>{every}</details>")
    else:
        parts.append(f"<p>All {n} ranks: see <code>per_rank</code> in the JSON report.</p>")
    return section("Per rank", *parts, anchor="per-rank")


def _per_step(report: Report) -> str:
    steps = report.per_step
    if not steps:
        return ""
    rows = [[esc(s.step), "yes" if s.complete else "no (last)", esc(s.n_ranks),
             f"{s.step_time_ms:.2f}", *[f"{s.breakdown_ms.ms(c):.2f}" for c in CATEGORIES]]
            for s in steps]
    headers = ["step", "complete", "ranks", "step ms", *[LABELS[c] for c in CATEGORIES]]
    numeric = (0, 2, *range(3, 4 + len(CATEGORIES)))
    body = table(headers, rows, numeric)
    if len(rows) > STEP_ROWS_OPEN:
        body = f"<details><summary>All {len(rows)} steps</summary>{body}</details>"
    return section("Per step (ms, mean over ranks)", body, anchor="per-step")


# how each section of sections.REPORT_SECTIONS is drawn in HTML (the header with its cards)
HTML: dict[str, Callable[[Report], str]] = {
    "header": lambda r: _header(r) + _cards(r),
    "breakdown": _breakdown,
    "mfu": _mfu,
    "roofline": lambda r: html(roofline_block(r.roofline)),
    "recommendations": lambda r: recommendations_section(r.recommendations, r.step_time_ms)
    if r.run.ranks else section("Recommendations", "<p>None: no profiler traces to weigh.</p>",
                                anchor="recommendations"),
    "collectives": _communication,
    "all_to_all": lambda r: html(alltoall_block(r.all_to_all)),
    "memory": lambda r: html(memory_block(r.memory, r.run.timeline == "gpu",
                                                  r.memory_note)),
    "nccl": lambda r: nccl_section(r.nccl),
    "stragglers": _stragglers,
    "pipeline": _pipeline,
    "critical_path": lambda r: critical_path_html(r.critical_path, r.step_time_ms),
    "clocks": lambda r: html(clocks_block(r.clocks)),
    "per_rank": _per_rank,
    "per_step": _per_step,
}


def report_sections(report: Report) -> list[str]:
    """The run report's sections in the order of sections.REPORT_SECTIONS."""
    return walk(HTML, report)


def report_html(report: Report) -> str:
    """`stepscope report --format html`."""
    return page(f"stepscope report: {report.run.name}", report_sections(report))
