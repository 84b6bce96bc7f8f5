"""Pipeline: stages x microbatches, the measured bubble against (S-1)/(S-1+M), and the
bubble and idle time of each stage."""

from __future__ import annotations

import polars as pl
import streamlit as st

from stepscope.dashboard import charts, data
from stepscope.dashboard.context import PageContext
from stepscope.dashboard.render.format import pct
from stepscope.dashboard.widgets import chart_and_table

TITLE = "Pipeline"
HEADER = "Pipeline"


def render(ctx: PageContext) -> None:
    st.header(HEADER)
    if ctx.run is None:
        st.info("No run yet: upload traces first.")
        return
    report = data.report(ctx.config.db, ctx.run, ctx.dtype)
    pipe = report.pipeline
    if pipe is None:
        st.info("No pipeline parallelism in this run (no point-to-point traffic between "
                "stages).")
        return
    cols = st.columns(4)
    cols[0].metric("Stages × microbatches", f"{pipe.stages} × {pipe.microbatches}")
    cols[1].metric("Pipelines", pipe.pipelines)
    cols[2].metric("Bubble measured", pct(pipe.bubble_fraction))
    cols[3].metric("1F1B theory (S−1)/(S−1+M)", pct(pipe.bubble_theory),
                   f"{100 * (pipe.bubble_fraction - pipe.bubble_theory):+.1f} points measured",
                   delta_color="inverse")
    frame = pl.DataFrame([{"stage": s.stage, "ranks": ", ".join(map(str, s.ranks)),
                           "bubble (ms)": round(s.bubble_ms, 3), "idle (ms)": round(s.idle_ms, 3)}
                          for s in pipe.per_stage])
    chart_and_table(charts.pipeline_stages(report), frame, "stages", "stages")
