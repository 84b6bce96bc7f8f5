"""Overview of a run: step time and its breakdown per step, MFU/HFU against the peak
with the waterfall of lost points, the top recommendations with predicted gains and
evidence, notes and caveats."""

from __future__ import annotations

import polars as pl
import streamlit as st

from stepscope.analyzers.model import CATEGORIES, Report
from stepscope.dashboard import charts, data
from stepscope.dashboard.context import PageContext, deep_link
from stepscope.dashboard.render.format import layout_degrees, layout_nodes, pct
from stepscope.dashboard.render.labels import (
    CATEGORY_LABELS,
    IDLE_LABELS,
    IDLE_PARTS,
    STAGE_LABELS,
    idle_shown,
)
from stepscope.dashboard.widgets import chart_and_table, table

TITLE = "Overview"
HEADER = "Overview"


def headline(report: Report) -> None:
    """The numbers a user looks for first."""
    mfu = report.mfu
    losses = [(report.breakdown_ms.ms(c), c) for c in CATEGORIES if c != "compute"]
    top_ms, top_cat = max(losses)
    cols = st.columns([2, 2, 2, 3, 2])
    cols[0].metric("Step time", f"{report.step_time_ms:.2f} ms")
    cols[1].metric("MFU", pct(mfu.mfu))
    cols[2].metric("HFU", pct(mfu.hfu))
    share = top_ms / report.step_time_ms if report.step_time_ms else None
    cols[3].metric(f"Largest loss: {CATEGORY_LABELS[top_cat]}", f"{top_ms:.2f} ms",
                   help=f"{pct(share)} of the step")
    named = ", ".join(f"rank {s.rank}" for s in report.stragglers)
    cols[4].metric("Stragglers", named or "none")
    run = report.run
    st.caption(f"{run.ranks} of {run.world_size} ranks on {len(run.hosts) or '?'} host(s) · "
               f"{run.device} · layout {layout_degrees(report.layout, '×')} · "
               f"{layout_nodes(report.layout)} · status {run.status} · "
               f"[link to this view]({deep_link('overview', run.name)})")


def step_table(report: Report) -> pl.DataFrame:
    rows = [{"step": "mean", "step time (ms)": report.step_time_ms,
             **{CATEGORY_LABELS[c]: report.breakdown_ms.ms(c) for c in CATEGORIES}}]
    rows += [{"step": str(s.step) + ("" if s.complete else " (last)"),
              "step time (ms)": s.step_time_ms,
              **{CATEGORY_LABELS[c]: s.breakdown_ms.ms(c) for c in CATEGORIES}}
             for s in report.per_step]
    return pl.DataFrame(rows).with_columns(pl.selectors.numeric().round(3))


def idle_split(report: Report) -> None:
    """Why the GPU was idle: the three parts of idle, then what the host ran meanwhile."""
    idle = report.idle_split
    step = report.step_time_ms
    if idle is None or not idle_shown(report):
        return
    st.markdown("**Idle: why the GPU waited** (the parts sum to idle)")
    table(pl.DataFrame([{"part of idle": IDLE_LABELS[p], "ms/step": round(idle.split_ms.ms(p), 3),
                         "share of step": pct(idle.split_ms.ms(p) / step if step else None)}
                        for p in IDLE_PARTS]), "idle split", "idle_split")
    st.caption(f"{idle.gaps_per_step:.0f} idle gaps per step, {idle.short_gaps_per_step:.0f} "
               f"of them at most {idle.short_gap_us:.0f} µs; of the wait for the host, "
               f"{idle.host_bound_after_sync_ms:.2f} ms right after a synchronization and "
               f"{idle.host_bound_data_loader_ms:.2f} ms in the DataLoader.")
    if idle.host_activity:
        table(pl.DataFrame([{"the host ran meanwhile": a.name, "kind": a.kind,
                             "thread": a.thread, "ms/step": round(a.ms, 3)}
                            for a in idle.host_activity]), "host activity", "host_activity")


def waterfall_table(report: Report) -> pl.DataFrame:
    mfu = report.mfu
    rows = [{"stage": STAGE_LABELS.get(w.name, w.name), "points": round(w.points, 2)}
            for w in mfu.waterfall]
    if mfu.mfu is not None:
        rows.append({"stage": "= MFU", "points": round(100 * mfu.mfu, 2)})
    return pl.DataFrame(rows, schema={"stage": pl.String, "points": pl.Float64})


def render(ctx: PageContext) -> None:
    st.header(HEADER)
    if ctx.run is None:
        st.info("No run yet: upload traces first.")
        return
    report = data.report(ctx.config.db, ctx.run, ctx.dtype)
    headline(report)
    st.subheader("Where the step time went")
    chart_and_table(charts.step_breakdown(report), step_table(report), "per step", "steps")
    idle_split(report)
    st.subheader("How far from the hardware")
    mfu = report.mfu
    if mfu.mfu is None:
        st.warning(f"MFU not computed: {mfu.message}")
    else:
        st.markdown(
            f"**MFU {pct(mfu.mfu)}**, HFU {pct(mfu.hfu)} of "
            f"{(mfu.peak_flops_per_gpu or 0) / 1e12:.1f} TFLOP/s {mfu.dtype} per GPU "
            f"({mfu.device}; peak table {mfu.peak_table_version}); model FLOPs from the "
            f"{mfu.flops_source}.")
        chart_and_table(charts.mfu_waterfall(mfu), waterfall_table(report), "MFU waterfall",
                        "waterfall")
        if mfu.message:
            st.caption(mfu.message)
    _recommendations(report)
    if report.notes or report.layout.notes:
        st.subheader("Notes")
        for note in (*report.notes, *report.layout.notes):
            st.caption(f"• {note}")


def _recommendations(report: Report) -> None:
    st.subheader("What to fix")
    if not report.recommendations:
        st.success("No recommendation: no category costs enough for a fix to pay off.")
        return
    for rec in report.recommendations[:5]:
        points = (f", about +{rec.expected_mfu_points:.1f} MFU points"
                  if rec.expected_mfu_points is not None else "")
        with st.container(border=True):
            st.markdown(f"**{rec.title}** · {rec.severity} · expected gain "
                        f"**{rec.expected_gain_ms:.2f} ms/step**{points}")
            st.markdown(f"Evidence: {rec.evidence}")
            st.caption(rec.detail)
