"""Communication: per collective and process group, where its time went (exposed,
straggler wait, in the pipeline bubble, overlapped: they add up to its time, and summed
over the collectives the first three are the report's categories), bus bandwidth against
the link's peak, and which groups cross nodes."""

from __future__ import annotations

import polars as pl
import streamlit as st

from stepscope.analyzers.results import CollectiveStat, Report
from stepscope.dashboard.app import charts, data, explain
from stepscope.dashboard.app.context import PageContext
from stepscope.dashboard.app.views import alltoall
from stepscope.dashboard.app.widgets import chart_and_table, plain, table
from stepscope.dashboard.render.labels import COMM_SPLIT, group_name, peak_source

TITLE = "Communication"
HEADER = "Communication"
PARTS = ("exposed_ms", "straggler_wait_ms", "bubble_ms", "overlapped_ms")


def totals(report: Report) -> dict[str, float]:
    """Each part over the collectives, and their time ('time_ms'): exposed, straggler
    wait and bubble are the report's categories (the collectives' parts sum to them),
    shown as the Overview shows them."""
    rows = report.collectives
    out = {f: sum(getattr(c, f) for c in rows) for f in ("time_ms", *PARTS)}
    bd = report.breakdown_ms
    out.update(exposed_ms=bd.exposed_comm, straggler_wait_ms=bd.straggler_wait)
    if any(c.is_p2p for c in rows):
        out["bubble_ms"] = bd.bubble
    return out


def collective_table(report: Report) -> pl.DataFrame:
    """One row per collective and group: its time split four ways (they add up)."""
    def row(c: CollectiveStat) -> dict[str, object]:
        return {"collective": c.collective, "group": group_name(c.group_label),
                "time ms": round(c.time_ms, 3), "exposed ms": round(c.exposed_ms, 3),
                "wait ms": round(c.straggler_wait_ms, 3),
                "bubble ms": round(c.bubble_ms, 3),
                "overlapped ms": round(c.overlapped_ms, 3),
                "calls/step": round(c.calls_per_step, 2)}
    return pl.DataFrame([row(c) for c in report.collectives])


def link_table(report: Report) -> pl.DataFrame:
    """One row per collective and group: its traffic and the link it ran on."""
    return pl.DataFrame([{
        "collective": c.collective, "group": group_name(c.group_label),
        "size": c.group_size,
        "MB/step": None if c.bytes_per_step is None else round(c.bytes_per_step / 1e6, 2),
        "bus GB/s": None if c.bus_bw_gbs is None else round(c.bus_bw_gbs, 1),
        "link": c.link, "peak GB/s": c.link_peak_gbs,
        "use": None if c.link_utilization is None else round(c.link_utilization, 3),
        "crosses nodes": c.crosses_nodes,
    } for c in report.collectives])


COLUMN_HELP = {
    "exposed ms": "nothing else ran: the exposed communication category",
    "wait ms": "waiting for the last rank to arrive: the straggler wait category",
    "bubble ms": "point-to-point send/recv between pipeline stages: the bubble category",
    "overlapped ms": "hidden under compute or under another collective",
}


LINK_HELP = {
    "bus GB/s": st.column_config.NumberColumn(
        "bus GB/s", help="bus bandwidth, nccl-tests' convention (docs/diff.md); none for "
        "point-to-point send/recv, whose kernel time includes the wait for the peer"),
    "use": st.column_config.NumberColumn(
        "use", help="bus bandwidth as a share of the link's peak"),
}


def peak_caption(report: Report) -> str | None:
    """Where the table's link peaks come from, one clause per link and peak: NVLink's
    from the device's peak table, a network or socket peak assumed (never measured), so
    a reader weighs 'use' by it."""
    said = dict.fromkeys(f"{c.link} {c.link_peak_gbs:.0f} GB/s {peak_source(c)}"
                         for c in report.collectives if c.link_peak_gbs is not None)
    if not said:
        return None
    assumed = any("assumed" in s for s in said)
    return ("Link peaks: " + "; ".join(said) + "."
            + (" An assumed peak is not measured: 'use' is only as good as it." if assumed
               else ""))


def headline(report: Report) -> None:
    """Exposed + straggler wait + bubble + overlapped = the collectives' time."""
    t = totals(report)
    # the parts side by side with their total; "in bubble" only where p2p ops ran in it
    cols = iter(st.columns(5 if t["bubble_ms"] else 4))
    next(cols).metric("Exposed", f"{t['exposed_ms']:.2f} ms", help=explain.EXPOSED.help())
    next(cols).metric("Straggler wait", f"{t['straggler_wait_ms']:.2f} ms",
                      help=explain.STRAGGLER_WAIT.help())
    if t["bubble_ms"]:
        next(cols).metric("In bubble (p2p)", f"{t['bubble_ms']:.2f} ms",
                          help=explain.BUBBLE.help())
    next(cols).metric("Overlapped", f"{t['overlapped_ms']:.2f} ms",
                      help="time under compute or under another collective")
    next(cols).metric("Communication", f"{t['time_ms']:.2f} ms",
                      help="every collective's time per rank and step")
    bubble = f" + {t['bubble_ms']:.2f} ms in the bubble (p2p)" if t["bubble_ms"] else ""
    st.caption(f"{t['exposed_ms']:.2f} exposed + {t['straggler_wait_ms']:.2f} straggler wait"
               f"{bubble} + {t['overlapped_ms']:.2f} overlapped = {t['time_ms']:.2f} ms per "
               "rank and step. " + COMM_SPLIT)


def render(ctx: PageContext) -> None:
    st.header(HEADER)
    if ctx.run is None:
        st.info("No run yet: upload traces first.")
        return
    report = data.report(ctx.config.db, ctx.run, ctx.dtype, ctx.peak_tflops)
    if not report.collectives:
        st.info("No collectives in this run.")
        return
    headline(report)
    crossing = sorted({c.group_label for c in report.collectives if c.crosses_nodes})
    if crossing:
        st.caption(f"{len(crossing)} group(s) cross nodes: "
                   + ", ".join(plain(g) for g in crossing))
    help_ = {k: st.column_config.NumberColumn(k, help=v) for k, v in COLUMN_HELP.items()}
    chart_and_table(charts.collectives_exposure(report), collective_table(report),
                    "collectives", "coll", column_config=help_)
    st.subheader("Traffic and links")
    for c in report.collectives:
        if c.warning:
            st.warning(plain(c.warning))
    links = link_table(report)
    if any(c.bus_bw_gbs is not None for c in report.collectives):
        chart_and_table(charts.bus_bandwidth(report), links, "traffic and links", "busbw",
                        column_config=LINK_HELP)
    else:
        table(links, "traffic and links", "busbw", LINK_HELP)
    caption = peak_caption(report)
    if caption:
        st.caption(plain(caption))
    alltoall.render_section(report.all_to_all)
