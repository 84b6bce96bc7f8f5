"""Compare: two runs through the diff model (what `stepscope diff A B` renders): MFU
points by cause as a waterfall, the breakdowns side by side, setup changes, narrative,
and B as the planner predicts it from A's calibration beside the measured B."""

from __future__ import annotations

import polars as pl
import streamlit as st

from stepscope.analyzers.model import CATEGORIES, STAGES, Diff, Expected
from stepscope.dashboard import charts, data
from stepscope.dashboard.context import PageContext
from stepscope.dashboard.render.format import pct
from stepscope.dashboard.render.labels import CATEGORY_LABELS, STAGE_LABELS
from stepscope.dashboard.render.plan import TERM_LABELS
from stepscope.dashboard.widgets import chart_and_table, table

TITLE = "Compare"
HEADER = "Compare two runs"
BASE = "cmp_base"


def _baseline(ctx: PageContext) -> str | None:
    others = [r for r in ctx.runs if r != ctx.run]
    if not others:
        return None
    if st.session_state.get(BASE) not in others:
        wanted = st.query_params.get("vs")
        st.session_state[BASE] = wanted if wanted in others else others[0]
    base = st.selectbox("Baseline (A)", others, key=BASE)
    st.query_params["vs"] = base
    return str(base)


def points_table(diff: Diff) -> pl.DataFrame:
    points = diff.mfu_points_by_category
    return pl.DataFrame([{"cause": STAGE_LABELS[s],
                          "MFU points": None if points is None else round(points.points(s), 3)}
                         for s in STAGES])


# A cause "moved only by share": its time changed by less than this fraction of A's step,
# yet its MFU points moved by at least SHARE_POINTS.
SAME_TIME = 0.005
SHARE_POINTS = 0.5


def share_effect_note(diff: Diff) -> str | None:
    """Name the causes whose time hardly changed but whose MFU points moved, and why:
    points are each cause's share of the step (docs/diff.md), so the same milliseconds
    weigh less in a longer step and more in a shorter one."""
    points = diff.mfu_points_by_category
    if points is None:
        return None
    moved = [f"{STAGE_LABELS[s]} ({diff.a.breakdown_ms.ms(s):.2f} → "
             f"{diff.b.breakdown_ms.ms(s):.2f} ms, {points.points(s):+.2f} points)"
             for s in STAGES if s in CATEGORIES
             and abs(diff.breakdown_delta_ms.ms(s)) < SAME_TIME * diff.a.step_time_ms
             and abs(points.points(s)) >= SHARE_POINTS]
    if not moved:
        return None
    longer = diff.step_time_delta_ms > 0
    return (f"Same time, different points: {'; '.join(moved)}. Each cause's points are its "
            f"share of the step, and the same time is a {'smaller' if longer else 'larger'} "
            f"share of a {'longer' if longer else 'shorter'} step.")


def side_by_side(diff: Diff) -> pl.DataFrame:
    return pl.DataFrame([{
        "category": CATEGORY_LABELS[c], f"{diff.a.run} (ms)": round(diff.a.breakdown_ms.ms(c), 3),
        f"{diff.b.run} (ms)": round(diff.b.breakdown_ms.ms(c), 3),
        "change (ms)": round(diff.breakdown_delta_ms.ms(c), 3)} for c in CATEGORIES])


def expected_table(e: Expected) -> pl.DataFrame:
    """Per planner term: A measured, B expected from A, B measured, and the points."""
    return pl.DataFrame([{
        "term": TERM_LABELS.get(c.term, c.term), "A (ms)": round(c.a_ms, 3),
        "expected B (ms)": round(c.expected_ms, 3), "B (ms)": round(c.b_ms, 3),
        "expected points": None if c.expected_points is None else round(c.expected_points, 2),
        "departure points": (None if c.departure_points is None
                             else round(c.departure_points, 2)),
        "why": c.why if abs(c.departure_points or 0.0) >= 0.5 else ""} for c in e.terms])


def predicted_vs_measured(ctx: PageContext, base: str) -> None:
    """B as the planner expects it from A at B's scale and layout, beside B measured."""
    assert ctx.run is not None
    st.subheader("Predicted from A vs measured")
    e, why_not = data.expected(ctx.config.db, base, ctx.run, ctx.dtype)
    if e is None:
        st.caption(why_not or "No expectation.")
        return
    diff = data.diff(ctx.config.db, base, ctx.run, ctx.dtype)
    cols = st.columns(2)
    cols[0].metric("MFU, expected → measured", f"{pct(e.mfu)} → {pct(diff.b.mfu)}",
                   None if e.departure_points is None else f"{e.departure_points:+.2f} points")
    cols[1].metric("Step, expected → measured",
                   f"{e.step_ms:.2f} → {diff.b.step_time_ms:.2f} ms", f"{e.departure_ms:+.2f} ms",
                   delta_color="inverse")
    st.markdown(e.narrative)
    table(expected_table(e), "expected vs measured", "cmp_expected")


def render(ctx: PageContext) -> None:
    st.header(HEADER)
    if ctx.run is None:
        st.info("No run yet: upload traces first.")
        return
    base = _baseline(ctx)
    if base is None:
        st.info("Only one run in the database: ingest another to compare.")
        return
    st.caption(f"Explaining **{ctx.run}** (B, the sidebar's run) against **{base}** (A).")
    diff = data.diff(ctx.config.db, base, ctx.run, ctx.dtype)
    cols = st.columns(3)
    delta = diff.mfu_delta_points
    cols[0].metric("MFU", f"{pct(diff.a.mfu)} → {pct(diff.b.mfu)}",
                   None if delta is None else f"{delta:+.2f} points")
    cols[1].metric("Step time", f"{diff.a.step_time_ms:.2f} → {diff.b.step_time_ms:.2f} ms",
                   f"{diff.step_time_delta_ms:+.2f} ms", delta_color="inverse")
    cols[2].metric("World size", f"{diff.a.world_size} → {diff.b.world_size}")
    st.markdown(diff.narrative)
    if diff.mfu_points_by_category is not None:
        chart_and_table(charts.diff_waterfall(diff), points_table(diff), "MFU points by cause",
                        "cmp_points")
        note = share_effect_note(diff)
        if note is not None:
            st.caption(note)
    chart_and_table(charts.diff_breakdown(diff), side_by_side(diff), "breakdown", "cmp_bd")
    predicted_vs_measured(ctx, base)
    st.subheader("Setup changes")
    if diff.setup_changes:
        table(pl.DataFrame([{"what": c.what, "A": str(c.a), "B": str(c.b)}
                            for c in diff.setup_changes]), "setup changes", "cmp_setup")
    else:
        st.caption("Same setup.")
    if diff.top_ops:
        st.subheader("Ops that changed most")
        table(pl.DataFrame([{"op": o.op, "A (ms)": round(o.a_ms, 3), "B (ms)": round(o.b_ms, 3),
                             "change (ms)": round(o.delta_ms, 3)} for o in diff.top_ops]),
              "op changes", "cmp_ops")
