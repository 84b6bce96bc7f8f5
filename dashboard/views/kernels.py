"""Kernels: the GPU ops with the most time per step, and how much they vary over ranks
(a slow GPU shows as one rank far above the others)."""

from __future__ import annotations

import polars as pl
import streamlit as st

from stepscope.dashboard import charts, data
from stepscope.dashboard.context import PageContext
from stepscope.dashboard.widgets import chart_and_table

TITLE = "Kernels"
HEADER = "Kernels"


def render(ctx: PageContext) -> None:
    st.header(HEADER)
    if ctx.run is None:
        st.info("No run yet: upload traces first.")
        return
    rows = data.kernels(ctx.config.db, ctx.run)
    if not rows:
        st.info("No GPU ops in the complete steps of this run (CPU-only traces?).")
        return
    frame = pl.DataFrame([{
        "kernel": r.name, "kind": r.kind, "ms/step": r.mean_ms, "min": r.min_ms,
        "max": r.max_ms, "std": r.std_ms, "cv": r.std_ms / r.mean_ms if r.mean_ms else None,
        "calls/step": r.calls_per_step, "slowest rank": r.slowest_rank,
        "share of GPU time": r.share_of_gpu_time} for r in rows]
    ).with_columns(pl.selectors.float().round(4))
    chart_and_table(charts.kernels(rows), frame, "kernels", "kernels", side=False)
