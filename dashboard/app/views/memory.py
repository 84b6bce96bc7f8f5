"""Memory: peak allocated and reserved device memory per rank and step against the
device's memory, and the ops whose allocations are live at a rank's peak
(docs/memory.md)."""

from __future__ import annotations

import polars as pl
import streamlit as st

from stepscope.dashboard.app import charts_analyses, data
from stepscope.dashboard.app.context import PageContext
from stepscope.dashboard.app.widgets import chart_and_table, plain, table
from stepscope.dashboard.render.format import pct
from stepscope.dashboard.render.memory import NO_EVENTS

TITLE = "Memory"
HEADER = "Memory per rank"


def _gb(value: int | None) -> float | None:
    return None if value is None else round(value / 1e9, 3)


def render(ctx: PageContext) -> None:
    st.header(HEADER)
    if ctx.run is None:
        st.info("No run yet: upload traces first.")
        return
    report = data.report(ctx.config.db, ctx.run, ctx.dtype)
    section = report.memory
    if section is None:
        st.info(report.memory_note or NO_EVENTS)
        return
    top = next(r for r in section.ranks if r.rank == section.peak_rank)
    cols = st.columns(4)
    cols[0].metric("Peak allocated", f"{section.peak_allocated_bytes / 1e9:.2f} GB")
    cols[1].metric("Peak reserved", f"{section.peak_reserved_bytes / 1e9:.2f} GB"
                   if section.peak_reserved_bytes is not None else "unknown")
    cols[2].metric("Device memory", f"{top.device_memory_bytes / 1e9:.1f} GB"
                   if top.device_memory_bytes else "unknown",
                   help=f"rank {top.rank}: {pct(top.reserved_share)} reserved")
    cols[3].metric("Most memory", f"rank {top.rank}")
    if section.message:
        st.caption(plain(section.message))
    frame = pl.DataFrame([{
        "rank": r.rank, "host": r.host, "peak allocated GB": _gb(r.peak_allocated_bytes),
        "peak reserved GB": _gb(r.peak_reserved_bytes), "share of device": r.reserved_share,
        "headroom GB": _gb(r.headroom_bytes), "peak step": r.peak_step,
        "op at peak": r.op_at_peak} for r in section.ranks],
        schema_overrides={"peak reserved GB": pl.Float64, "share of device": pl.Float64,
                          "headroom GB": pl.Float64, "peak step": pl.Int64,
                          "op at peak": pl.String, "host": pl.String})
    chart_and_table(charts_analyses.memory_per_rank(section), frame, "memory per rank",
                    "mem_ranks")
    ranks = [r.rank for r in section.ranks]
    rank = st.selectbox("Rank", ranks, index=ranks.index(top.rank), key="mem_rank")
    row = next(r for r in section.ranks if r.rank == rank)
    st.subheader(f"Rank {rank}: live allocations at its peak")
    if row.ops_at_peak:
        table(pl.DataFrame([{"op": o.op, "GB": round(o.bytes / 1e9, 3),
                             "allocations": o.allocations} for o in row.ops_at_peak]),
              "live at the peak", "mem_ops")
    else:
        st.caption("Not known: the events carry no addresses to pair allocations with frees.")
    if row.steps:
        table(pl.DataFrame([{"step": s.step, "peak allocated GB": _gb(s.peak_allocated_bytes),
                             "peak reserved GB": _gb(s.peak_reserved_bytes)}
                            for s in row.steps],
                           schema_overrides={"peak reserved GB": pl.Float64}),
              "peaks per step", "mem_steps")
