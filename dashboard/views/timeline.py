"""Timeline: one step of selected ranks as a Gantt of what the attribution gave each
instant to — bubbles, exposed collectives, the straggler everyone waits for. At most 16
ranks and about 50k rectangles reach the browser (binned beyond)."""

from __future__ import annotations

import polars as pl
import streamlit as st

from stepscope.analyzers.detail import MAX_TIMELINE_RANKS, timeline_ranks
from stepscope.dashboard import charts, data
from stepscope.dashboard.context import PageContext
from stepscope.dashboard.render.labels import CATEGORY_LABELS
from stepscope.dashboard.widgets import chart_and_table

TITLE = "Timeline"
HEADER = "Timeline"


def render(ctx: PageContext) -> None:
    st.header(HEADER)
    if ctx.run is None:
        st.info("No run yet: upload traces first.")
        return
    report = data.report(ctx.config.db, ctx.run, ctx.dtype)
    steps = [s.step for s in report.per_step if s.complete] or [s.step for s in report.per_step]
    if not steps:
        st.info("No profiled steps (ProfilerStep#N) in this run: nothing to draw.")
        return
    all_ranks = sorted(r.rank for r in report.per_rank)
    straggler_ranks = [s.rank for s in report.stragglers]
    stages = [list(s.ranks) for s in report.pipeline.per_stage] if report.pipeline else []
    default = timeline_ranks(straggler_ranks, stages, all_ranks)
    slowest = max((s for s in report.per_step if s.step in steps),
                  key=lambda s: s.step_time_ms).step
    cols = st.columns([1, 3])
    step = cols[0].selectbox("Step", steps, index=steps.index(slowest), key="tl_step")
    ranks = cols[1].multiselect(
        f"Ranks (at most {MAX_TIMELINE_RANKS}; default: stragglers, every pipeline stage)",
        all_ranks, default=default, max_selections=MAX_TIMELINE_RANKS,
        key=f"tl_ranks_{ctx.run}")
    if not ranks:
        st.info("Pick at least one rank.")
        return
    tl = data.timeline(ctx.config.db, ctx.run, step, tuple(ranks))
    if tl.bin_ms is not None:
        st.caption(f"Too many segments to draw one by one: shown in bins of "
                   f"{tl.bin_ms:.3f} ms, each coloured by the category that holds most of it.")
    frame = pl.DataFrame({"rank": tl.rank, "start (ms)": tl.start_ms, "end (ms)": tl.end_ms,
                          "category": [CATEGORY_LABELS[c] for c in tl.category]})
    chart_and_table(charts.timeline(tl, straggler_ranks),
                    frame.with_columns(pl.selectors.float().round(4)),
                    f"step {step} segments", "timeline", side=False)
    st.caption(f"{tl.rectangles} rectangles · times from each rank's own step start "
               "(hosts' clocks differ) · grey is idle")
