"""Ranks: rank x step heatmaps (step time, straggler wait suffered and caused), each
rank's breakdown grouped by host, and the stragglers with their evidence."""

from __future__ import annotations

import polars as pl
import streamlit as st

from stepscope.analyzers.model import CATEGORIES, Report
from stepscope.dashboard import charts, data
from stepscope.dashboard.context import PageContext
from stepscope.dashboard.render.labels import CATEGORY_LABELS
from stepscope.dashboard.widgets import chart_and_table, table

TITLE = "Ranks"
HEADER = "Ranks"
METRICS = {
    "step_ms": "step time",
    "wait_suffered_ms": "straggler wait suffered",
    "wait_caused_ms": "straggler wait caused (others waiting on this rank)",
}


def rank_table(report: Report) -> pl.DataFrame:
    return pl.DataFrame([
        {"rank": r.rank, "host": r.host, "steps": r.n_steps, "step time (ms)": r.step_time_ms,
         **{CATEGORY_LABELS[c]: r.breakdown_ms.ms(c) for c in CATEGORIES}}
        for r in report.per_rank]).with_columns(pl.selectors.float().round(3))


def stragglers(report: Report) -> None:
    st.subheader("Stragglers")
    if not report.stragglers:
        st.success("None: no rank is consistently the last to arrive.")
        return
    for s in report.stragglers:
        st.markdown(f"**rank {s.rank}** ({s.host or 'unknown host'}): the others waited "
                    f"{s.waited_on_ms:.2f} ms/step for it; {s.evidence}")
    table(pl.DataFrame([{
        "rank": s.rank, "host": s.host, "slowdown": round(s.slowdown, 3),
        "waited on (ms/step)": round(s.waited_on_ms, 3), "waiting ranks": s.waiting_ranks,
        "arrived last": s.arrived_last, "matched collectives": s.matched_collectives,
        "evidence": s.evidence} for s in report.stragglers]), "stragglers", "stragglers")


def render(ctx: PageContext) -> None:
    st.header(HEADER)
    if ctx.run is None:
        st.info("No run yet: upload traces first.")
        return
    report = data.report(ctx.config.db, ctx.run, ctx.dtype)
    stragglers(report)
    st.subheader("Rank × step")
    metric = st.radio("Colour by", list(METRICS), format_func=METRICS.__getitem__,
                      horizontal=True, key="ranks_metric")
    grid = data.grid(ctx.config.db, ctx.run)
    frame = pl.DataFrame({"rank": grid.rank, "host": grid.host, "step": grid.step,
                          "complete": grid.complete, "step time (ms)": grid.step_ms,
                          "wait suffered (ms)": grid.wait_suffered_ms,
                          "wait caused (ms)": grid.wait_caused_ms})
    chart_and_table(charts.rank_step_heatmap(grid, metric, METRICS[metric]),
                    frame.with_columns(pl.selectors.float().round(3)), "rank x step",
                    "grid")
    st.subheader("Per rank")
    chart_and_table(charts.rank_breakdown(report), rank_table(report), "per rank",
                    "per_rank", side=False)
