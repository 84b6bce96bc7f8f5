"""Pipeline: stages x microbatches, the measured bubble against (S-1)/(S-1+M) and, when
it is far above, what makes up the difference (P2P transfers, stage imbalance, a slow
rank: analyzers.parallel.bubble) with advice; the bubble and idle time of each stage."""

from __future__ import annotations

import polars as pl
import streamlit as st

from stepscope.analyzers.parallel.bubble import bubble_excess
from stepscope.analyzers.results import Report
from stepscope.dashboard.app import charts, data, explain
from stepscope.dashboard.app.context import PageContext, timeline_link
from stepscope.dashboard.app.widgets import chart_and_table, plain
from stepscope.dashboard.render.format import pct, points, share

TITLE = "Pipeline"
HEADER = "Pipeline"
PART_LABELS = {"p2p_transfer": "P2P transfer time", "stage_imbalance": "stage imbalance",
               "slow_rank": "a slow rank", "other": "other (schedule)"}


def excess(report: Report) -> None:
    """Why the bubble is above the theory, part by part, and what to do."""
    found = bubble_excess(report)
    if found is None:
        st.caption("The measured bubble is close to the theory.")
        return
    step = report.step_time_ms
    ratio = found.measured_ms / found.theory_ms if found.theory_ms else float("inf")
    st.markdown(f"**The bubble is {ratio:.1f}× the theory**: {found.measured_ms:.2f} ms/step "
                f"measured, {found.theory_ms:.2f} ms in theory; the "
                f"{found.excess_ms:.2f} ms above it:")
    # a list, not a table: each part's reason is a sentence
    st.markdown("\n".join(f"- **{PART_LABELS[p.name]}: {p.ms:.2f} ms/step** "
                          f"({share(p.ms, step)} of the step): {plain(p.detail)}"
                          for p in found.parts))
    slow = [s.rank for s in report.stragglers if any(p.name == "slow_rank"
                                                     for p in found.parts)]
    link = f" · [the slow rank's Timeline]({timeline_link(report.run.name, slow[0])})" \
        if slow else ""
    st.info(f"**What to do**: {plain(found.advice)}{link}")


def render(ctx: PageContext) -> None:
    st.header(HEADER)
    if ctx.run is None:
        st.info("No run yet: upload traces first.")
        return
    report = data.report(ctx.config.db, ctx.run, ctx.dtype, ctx.peak_tflops)
    pipe = report.pipeline
    if pipe is None:
        st.info("No pipeline parallelism in this run (no point-to-point traffic between "
                "stages).")
        return
    cols = st.columns(2)
    cols[0].metric("Stages × microbatches", f"{pipe.stages} × {pipe.microbatches}",
                   help=f"{pipe.pipelines} pipeline(s)")
    cols[1].metric("Pipelines", pipe.pipelines)
    cols = st.columns(2)
    cols[0].metric("Bubble measured", pct(pipe.bubble_fraction), help=explain.BUBBLE.help())
    cols[1].metric("1F1B theory (S−1)/(S−1+M)", pct(pipe.bubble_theory),
                   f"{points(100 * (pipe.bubble_fraction - pipe.bubble_theory), signed=True)}"
                   " points measured", delta_color="inverse")
    excess(report)
    frame = pl.DataFrame([{"stage": s.stage, "ranks": ", ".join(map(str, s.ranks)),
                           "bubble ms": round(s.bubble_ms, 3), "idle ms": round(s.idle_ms, 3)}
                          for s in pipe.per_stage])
    chart_and_table(charts.pipeline_stages(report), frame, "stages", "stages")
    st.caption(explain.STRAGGLER_WAIT.caption())
