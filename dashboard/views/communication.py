"""Communication: per collective and process group, exposed vs overlapped time, bus
bandwidth against the link's peak, and which groups cross nodes."""

from __future__ import annotations

import polars as pl
import streamlit as st

from stepscope.analyzers.model import Report
from stepscope.dashboard import charts, data
from stepscope.dashboard.context import PageContext
from stepscope.dashboard.views import alltoall
from stepscope.dashboard.widgets import chart_and_table

TITLE = "Communication"
HEADER = "Communication"


def collective_table(report: Report) -> pl.DataFrame:
    return pl.DataFrame([{
        "collective": c.collective, "group": c.group_label, "crosses nodes": c.crosses_nodes,
        "group size": c.group_size, "calls/step": round(c.calls_per_step, 2),
        "MB/step": round(c.bytes_per_step / 1e6, 2), "time (ms)": round(c.time_ms, 3),
        "exposed (ms)": round(c.exposed_ms, 3),
        "bus GB/s": None if c.bus_bw_gbs is None else round(c.bus_bw_gbs, 1),
        "link": c.link, "link peak GB/s": c.link_peak_gbs,
        "link use": None if c.link_utilization is None else round(c.link_utilization, 3),
    } for c in report.collectives])


def render(ctx: PageContext) -> None:
    st.header(HEADER)
    if ctx.run is None:
        st.info("No run yet: upload traces first.")
        return
    report = data.report(ctx.config.db, ctx.run, ctx.dtype)
    if not report.collectives:
        st.info("No collectives in this run.")
        return
    crossing = sorted({c.group_label for c in report.collectives if c.crosses_nodes})
    exposed = report.breakdown_ms.exposed_comm
    cols = st.columns(3)
    cols[0].metric("Exposed communication", f"{exposed:.2f} ms/step")
    cols[1].metric("Straggler wait", f"{report.breakdown_ms.straggler_wait:.2f} ms/step")
    cols[2].metric("Groups crossing nodes", len(crossing))
    if crossing:
        st.caption("Crossing nodes: " + ", ".join(crossing))
    frame = collective_table(report)
    chart_and_table(charts.collectives_exposure(report), frame, "collectives", "coll")
    if any(c.bus_bw_gbs is not None for c in report.collectives):
        chart_and_table(charts.bus_bandwidth(report),
                        frame.select("collective", "group", "bus GB/s", "link",
                                     "link peak GB/s", "link use"), "bus bandwidth", "busbw")
    alltoall.render_section(report.all_to_all)
