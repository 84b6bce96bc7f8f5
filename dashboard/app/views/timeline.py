"""Timeline: one step of selected ranks as a Gantt of what the attribution gave each
instant to — bubbles, exposed collectives, the straggler everyone waits for; each
rectangle's hover names the op (kernel, or collective and group). At most 16 ranks and
about 50k rectangles reach the browser (binned beyond). A link may name the rank and the
step (`?page=timeline&run=R&rank=3&step=2`: a straggler, a recommendation, a heatmap cell)."""

from __future__ import annotations

import polars as pl
import streamlit as st

from stepscope.analyzers.detail import MAX_TIMELINE_RANKS, timeline_ranks
from stepscope.analyzers.results import Report
from stepscope.dashboard.app import charts, data
from stepscope.dashboard.app.context import PageContext, link_number
from stepscope.dashboard.app.widgets import chart_and_table
from stepscope.dashboard.render.format import rank_list_short, short_name
from stepscope.dashboard.render.labels import CATEGORY_LABELS
from stepscope.ingest.number_text import whole

TITLE = "Timeline"
HEADER = "Timeline"


LINK_MAX = 2**31 - 1  # a step or rank number (INTEGER columns)


def _linked(ctx: PageContext, name: str, fallback: str) -> int | None:
    """The step or rank a link names, read as every CLI option is (context.link_number)."""
    return link_number(name, ctx.params.get(name), lambda t: whole(t, 0, LINK_MAX), fallback)


def default_ranks(report: Report, focus: int | None) -> list[int]:
    """The stragglers, the first rank of every pipeline stage, the lowest ranks; a
    linked rank always among them."""
    all_ranks = sorted(r.rank for r in report.per_rank)
    stages = [list(s.ranks) for s in report.pipeline.per_stage] if report.pipeline else []
    firsts = [focus] if focus in all_ranks else []
    return timeline_ranks([*firsts, *(s.rank for s in report.stragglers)], stages, all_ranks)


def _arrive(ctx: PageContext, report: Report, steps: list[int]) -> None:
    """On arrival by a link: the step and rank it names (once per session)."""
    if st.session_state.get("tl_arrived") == ctx.run:
        return
    st.session_state["tl_arrived"] = ctx.run
    step = _linked(ctx, "step", "showing the slowest step")
    rank = _linked(ctx, "rank", "showing the default ranks")
    if step in steps:
        st.session_state["tl_step"] = step
    if rank is not None:
        st.session_state[f"tl_ranks_{ctx.run}"] = default_ranks(report, rank)


def render(ctx: PageContext) -> None:
    st.header(HEADER)
    if ctx.run is None:
        st.info("No run yet: upload traces first.")
        return
    report = data.report(ctx.config.db, ctx.run, ctx.dtype, ctx.peak_tflops)
    steps = [s.step for s in report.per_step if s.complete] or [s.step for s in report.per_step]
    if not steps:
        st.info("No profiled steps (ProfilerStep#N) in this run: nothing to draw.")
        return
    _arrive(ctx, report, [s.step for s in report.per_step])
    all_ranks = sorted(r.rank for r in report.per_rank)
    straggler_ranks = [s.rank for s in report.stragglers]
    slowest = max((s for s in report.per_step if s.step in steps),
                  key=lambda s: s.step_time_ms).step
    options = [s.step for s in report.per_step]
    if st.session_state.get("tl_step") not in options:
        st.session_state["tl_step"] = slowest
    # the ranks' chips get the whole width (16 chips fit at 1000 px; beside the step
    # they were cut at the tenth with no word of the rest), and a caption counts them
    step = st.columns([1, 3])[0].selectbox("Step", options, key="tl_step",
                             format_func=lambda s: f"{s}" + ("" if s in steps else " (last)"))
    key = f"tl_ranks_{ctx.run}"
    if key not in st.session_state:
        st.session_state[key] = default_ranks(report, None)
    ranks = st.multiselect(
        f"Ranks (at most {MAX_TIMELINE_RANKS}; default: stragglers, every pipeline stage)",
        all_ranks, max_selections=MAX_TIMELINE_RANKS, key=key)
    if not ranks:
        st.info("Pick at least one rank.")
        return
    st.caption(f"{len(ranks)} of {len(all_ranks)} ranks shown: "
               f"{rank_list_short(sorted(ranks), 8)}")
    tl = data.timeline(ctx.config.db, ctx.run, step, tuple(ranks))
    clocks = report.clocks
    aligned = st.toggle("One clock for all ranks", value=True, key="tl_aligned",
                        help="each host's clock corrected by its offset and drift from "
                             "the matched collectives (the report's Clocks)") \
        if clocks is not None else False
    if tl.bin_ms is not None:
        st.caption(f"Drawn by time in bins of {tl.bin_ms:.3f} ms: segments thinner than a "
                   "pixel are not widened to one; each category gets the bins its time "
                   "fills, so the colours' shares are the breakdown's.")
    frame = pl.DataFrame({"rank": tl.rank, "start (ms)": tl.start_ms, "end (ms)": tl.end_ms,
                          "category": [CATEGORY_LABELS[c] for c in tl.category],
                          "op": [short_name(n, 70) if n else "" for n in tl.label]})
    chart_and_table(charts.timeline(tl, straggler_ranks, aligned),
                    frame.with_columns(pl.selectors.float().round(4)),
                    f"step {step} segments", "timeline", folded=True)
    when = ("times on the aligned clock (" + clocks.summary + ")" if aligned and clocks
            else "times from each rank's own step start (hosts' clocks differ)")
    st.caption(f"{tl.rectangles} rectangles · {when} · grey is idle · hover a rectangle "
               "for the op")
    run = ctx.run
    st.download_button(
        "Export these ranks and this step for Perfetto (trace JSON)",
        data=lambda: data.trace_export(ctx.config.db, run, step, tuple(ranks),
                                       report.critical_path),
        file_name=f"{run}-step{step}.trace.json", mime="application/json",
        help="stepscope export: every rank on the aligned clock with the breakdown, the "
             "critical path and the waits drawn on it; open it at ui.perfetto.dev or "
             "chrome://tracing (docs/timeline.md)")
