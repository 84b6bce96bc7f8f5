"""Roofline: each op kind and kernel against the compute and HBM roofs of its device,
the GEMM shapes that lose the most time, and the MFU waterfall's kernel-efficiency
stage split into named ops (docs/roofline.md)."""

from __future__ import annotations

import polars as pl
import streamlit as st

from stepscope.analyzers.flops.roofline import chart_note, shares_note
from stepscope.analyzers.results import RoofRow
from stepscope.dashboard.app import charts_analyses, data
from stepscope.dashboard.app.context import PageContext
from stepscope.dashboard.app.widgets import chart_and_table, plain, table
from stepscope.dashboard.render.format import numbered_names, pct

TITLE = "Roofline"
HEADER = "Kernels against their roofline"


NAME_WIDTH = 30
COLUMNS = {
    "ms": st.column_config.NumberColumn(help="kernel time per step (ms, mean over ranks)"),
    "FLOP/B": st.column_config.NumberColumn(help="arithmetic intensity: FLOPs per byte of "
                                                 "least HBM traffic"),
    "bound": st.column_config.TextColumn(help="the roof it is under: compute or memory "
                                              "(HBM), by its intensity vs the ridge point"),
    "roof": st.column_config.NumberColumn(help="share of that roof it reaches"),
    "lost": st.column_config.NumberColumn(help="ms/step it would save at its full roof"),
}


def rows_frame(rows: tuple[RoofRow, ...], first: str = "name",
               numbered: bool = False) -> pl.DataFrame:
    """One row per op kind, kernel or GEMM shape, in few short columns so the table fits
    a 1000 px window (the dtype joins the name unless the name says it, as an op kind's
    'GEMMs (bf16)'; `numbered`: long kernel names shortened and numbered, as on the
    Kernels page)."""
    names = [r.name if r.dtype is None or f"({r.dtype})" in r.name else f"{r.name} {r.dtype}"
             for r in rows]
    if numbered:
        names = numbered_names(names, NAME_WIDTH)
    return pl.DataFrame([{
        first: name, "ms": r.time_ms, "TFLOP/s": r.tflops, "GB/s": r.gbs,
        "FLOP/B": r.intensity, "bound": r.bound, "roof": r.roof_share,
        "lost": r.lost_ms} for r, name in zip(rows, names, strict=True)],
        schema_overrides={"TFLOP/s": pl.Float64, "GB/s": pl.Float64,
                          "FLOP/B": pl.Float64, "roof": pl.Float64,
                          "lost": pl.Float64}).with_columns(
        pl.selectors.float().round(4)).with_columns(
        # rates in the hundreds: one decimal reads as well and keeps the table in 1000 px
        pl.col("TFLOP/s", "GB/s", "FLOP/B").round(1))


def render(ctx: PageContext) -> None:
    st.header(HEADER)
    if ctx.run is None:
        st.info("No run yet: upload traces first.")
        return
    section = data.report(ctx.config.db, ctx.run, ctx.dtype).roofline
    if section is None or not section.kinds:
        st.info("No roofline for this run: "
                + (plain(section.message) if section else "no GPU kernels"))
        return
    cols = st.columns(4)
    cols[0].metric("Compute roof", f"{(section.peak_flops_per_gpu or 0) / 1e12:.1f} TFLOP/s"
                   if section.peak_flops_per_gpu else "unknown")
    cols[1].metric("HBM roof", f"{section.hbm_gbs:.0f} GB/s" if section.hbm_gbs else "unknown")
    cols[2].metric("Ridge point", f"{section.ridge_flops_per_byte:.0f} FLOP/B"
                   if section.ridge_flops_per_byte else "-")
    cols[3].metric("Kernel time with shapes", pct(section.coverage))
    if section.message:
        st.caption(plain(section.message))
    st.subheader("Op kinds")
    empty = chart_note(section)
    if empty:
        st.caption(plain(empty))
    chart_and_table(charts_analyses.roofline_plot(section), rows_frame(section.kinds, "op kind"),
                    "op kinds", "rf_kinds", column_config=COLUMNS)
    if section.kernel_efficiency:
        st.subheader("Kernel efficiency by op")
        st.caption(f"The MFU waterfall's kernel-efficiency stage ({section.stage_points:.2f} "
                   "points) split into the ops that lose it; the parts add up to the stage.")
        parts = pl.DataFrame([{"part": p.label, "points": round(p.points, 3),
                               "ms/step": p.time_ms, "share of roof": p.roof_share}
                              for p in section.kernel_efficiency],
                             schema_overrides={"ms/step": pl.Float64,
                                               "share of roof": pl.Float64})
        chart_and_table(charts_analyses.efficiency_parts(section), parts,
                        "kernel efficiency by op", "rf_parts")
    if section.gemm_shapes:
        st.subheader("GEMM shapes losing the most time")
        frame = rows_frame(section.gemm_shapes, "M x N x K").with_columns(
            pl.Series("op", [r.op for r in section.gemm_shapes]))
        table(frame, "GEMM shapes", "rf_shapes", COLUMNS)
    st.subheader("Top kernels")
    no_bars = shares_note(section)
    if no_bars:
        st.caption(plain(no_bars))
    chart_and_table(charts_analyses.roof_shares(section.kernels, "Share of the roof"),
                    rows_frame(section.kernels, "kernel", numbered=True), "top kernels",
                    "rf_kernels", column_config=COLUMNS)
