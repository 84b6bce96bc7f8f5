"""Kernels: the GPU ops with the most time per step, and how much they vary over ranks
(a slow GPU shows as one rank far above the others)."""

from __future__ import annotations

import polars as pl
import streamlit as st

from stepscope.dashboard.app import charts, data
from stepscope.dashboard.app.context import PageContext
from stepscope.dashboard.app.widgets import chart_and_table, code
from stepscope.dashboard.render.format import numbered_names

TITLE = "Kernels"
HEADER = "Kernels"
KERNEL_WIDTH = 30
COLUMNS = {
    "kernel": st.column_config.TextColumn(
        help="shortened in the middle; the full name is in the chart's hover and the list "
             "below the table"),
    "min": st.column_config.NumberColumn(help="ms/step of the fastest rank"),
    "max": st.column_config.NumberColumn(help="ms/step of the slowest rank"),
    "calls": st.column_config.NumberColumn(help="calls per step"),
    "slowest": st.column_config.NumberColumn(help="the rank where it takes longest"),
    "share": st.column_config.NumberColumn(help="share of the run's GPU time"),
}


def render(ctx: PageContext) -> None:
    st.header(HEADER)
    if ctx.run is None:
        st.info("No run yet: upload traces first.")
        return
    rows = data.kernels(ctx.config.db, ctx.run)
    if not rows:
        st.info("No GPU ops in the complete steps of this run (CPU-only traces?).")
        return
    names = numbered_names([r.name for r in rows], KERNEL_WIDTH)
    frame = pl.DataFrame([{
        "kernel": name, "kind": r.kind,
        "ms/step": r.mean_ms, "min": r.min_ms,
        "max": r.max_ms, "calls": r.calls_per_step, "slowest": r.slowest_rank,
        "share": r.share_of_gpu_time}
        for r, name in zip(rows, names, strict=True)]
    ).with_columns(pl.selectors.float().round(3))
    chart_and_table(charts.kernels(rows), frame, "kernels", "kernels",
                    column_config=COLUMNS)
    st.caption("Long names are shortened in the middle (start and end kept); hover a bar "
               "for the full name, or open the list below.")
    with st.expander("Full kernel names"):
        st.markdown("\n".join(f"{i}. {code(r.name)}" for i, r in enumerate(rows, start=1)))
