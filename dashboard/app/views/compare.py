"""Compare: two runs through the diff model (what `stepscope diff A B` renders): a
comparable baseline by default (dashboard.app.baseline) with loud warnings where device,
model or world size differ, MFU points by cause as a waterfall, the breakdowns side by
side, B as the planner predicts it from A's calibration beside the measured B, work per
GPU, setup changes, the communication table, stragglers, the narrative, the ops that
changed most and B's recommendations."""

from __future__ import annotations

from collections.abc import Callable

import polars as pl
import streamlit as st

from stepscope.analyzers.results import CATEGORIES, STAGES, Diff, Expected
from stepscope.dashboard.app import baseline, charts, data
from stepscope.dashboard.app.context import PageContext, timeline_link
from stepscope.dashboard.app.widgets import chart_and_table, plain, recommendation_card, table
from stepscope.dashboard.render.diff import diff_markdown, side_change
from stepscope.dashboard.render.format import fixed, mfu_points, pct, points, short_name
from stepscope.dashboard.render.html_diff import diff_html
from stepscope.dashboard.render.labels import (
    CATEGORY_LABELS,
    COMM_SPLIT,
    STAGE_LABELS,
    group_name,
)
from stepscope.dashboard.render.plan import TERM_LABELS

TITLE = "Compare"
HEADER = "Compare two runs"
BASE = "cmp_base"


def default_baseline(ctx: PageContext, others: list[str]) -> baseline.Baseline | None:
    """A comparable run (baseline.choose) among the others, newest first."""
    assert ctx.run is not None
    devices = {r["run"]: r["devices"] for r in data.summary(ctx.config.db).iter_rows(named=True)}
    previous = baseline.previous_night(ctx.run, data.history(ctx.config.db))
    return baseline.choose(ctx.run, others, previous, devices,
                           lambda r: data.run_key(ctx.config.db, r))


def _baseline(ctx: PageContext) -> tuple[str | None, str]:
    """The baseline (A): the link's `vs`, the user's pick, else a comparable run."""
    others = [r for r in ctx.runs if r != ctx.run]
    if not others:
        return None, ""
    reason = "chosen by you"
    if st.session_state.get(BASE) not in others or st.session_state.get("cmp_for") != ctx.run:
        wanted = ctx.params.get("vs")
        chosen = default_baseline(ctx, others)
        if wanted in others:
            st.session_state[BASE], reason = wanted, "from the link"
        elif chosen is not None:
            st.session_state[BASE], reason = chosen.run, chosen.reason
        st.session_state["cmp_for"] = ctx.run
        st.session_state["cmp_reason"] = reason
    base = st.selectbox("Baseline (A)", others, key=BASE,
                        on_change=lambda: st.session_state.update(cmp_reason="chosen by you"))
    st.query_params["vs"] = base
    return str(base), str(st.session_state.get("cmp_reason", reason))


def points_table(diff: Diff) -> pl.DataFrame:
    pts = diff.mfu_points_by_category
    return pl.DataFrame([{"cause": STAGE_LABELS[s],
                          "MFU points": None if pts is None else round(pts.points(s), 3)}
                         for s in STAGES])


# A cause "moved only by share": its time changed by less than this fraction of A's step,
# yet its MFU points moved by at least SHARE_POINTS.
SAME_TIME = 0.005
SHARE_POINTS = 0.5


def share_effect_note(diff: Diff) -> str | None:
    """Name the causes whose time hardly changed but whose MFU points moved, and why:
    points are each cause's share of the step (docs/diff.md), so the same milliseconds
    weigh less in a longer step and more in a shorter one."""
    pts = diff.mfu_points_by_category
    if pts is None:
        return None
    moved = [f"{STAGE_LABELS[s]} ({diff.a.breakdown_ms.ms(s):.2f} → "
             f"{diff.b.breakdown_ms.ms(s):.2f} ms, {pts.points(s):+.2f} points)"
             for s in STAGES if s in CATEGORIES
             and abs(diff.breakdown_delta_ms.ms(s)) < SAME_TIME * diff.a.step_time_ms
             and abs(pts.points(s)) >= SHARE_POINTS]
    if not moved:
        return None
    longer = diff.step_time_delta_ms > 0
    return (f"Same time, different points: {'; '.join(moved)}. Each cause's points are its "
            f"share of the step, and the same time is a {'smaller' if longer else 'larger'} "
            f"share of a {'longer' if longer else 'shorter'} step.")


def side_by_side(diff: Diff) -> pl.DataFrame:
    return pl.DataFrame([{
        "category": CATEGORY_LABELS[c], "A (ms)": round(diff.a.breakdown_ms.ms(c), 3),
        "B (ms)": round(diff.b.breakdown_ms.ms(c), 3),
        "change (ms)": round(diff.breakdown_delta_ms.ms(c), 3)} for c in CATEGORIES])


def expected_table(e: Expected) -> pl.DataFrame:
    """Per planner term: A measured, B expected from A, B measured, and the points."""
    return pl.DataFrame([{
        "term": TERM_LABELS.get(c.term, c.term), "A ms": round(c.a_ms, 3),
        "expected B ms": round(c.expected_ms, 3), "B ms": round(c.b_ms, 3),
        "expected pts": None if c.expected_points is None else round(c.expected_points, 2),
        "departure pts": (None if c.departure_points is None
                          else round(c.departure_points, 2))} for c in e.terms])


def departures(e: Expected) -> list[str]:
    """Why B departs from the expectation, per term that moved half a point or more (a
    list under the table: a column of sentences would push the numbers out of view), as
    Markdown: the reasons quote names, escaped."""
    return [f"{TERM_LABELS.get(c.term, c.term)}: {plain(c.why)}" for c in e.terms
            if c.why and abs(c.departure_points or 0.0) >= 0.5]


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
    st.markdown(plain(e.narrative))
    table(expected_table(e), "expected vs measured", "cmp_expected")
    for line in departures(e):
        st.markdown(f"- {line}")


def collectives_table(diff: Diff) -> pl.DataFrame:
    """The diff's communication table, each side split like the report's (A → B): exposed
    + wait + in bubble (a column only where a side's p2p ran in the bubble) + overlapped."""
    bubble = any(s is not None and s.bubble_ms for c in diff.collectives for s in (c.a, c.b))
    parts = ("exposed_ms", "straggler_wait_ms", *(("bubble_ms",) if bubble else ()),
             "overlapped_ms")
    names = {"exposed_ms": "exposed ms", "straggler_wait_ms": "wait ms",
             "bubble_ms": "bubble ms", "overlapped_ms": "overlapped ms"}
    return pl.DataFrame([{
        "collective": c.collective, "group": group_name(c.group, 24),
        **{names[p]: side_change(c, p, missing="–", arrow="→") for p in parts},
        "bus GB/s": side_change(c, "bus_bw_gbs", ".0f", "–", "→")}
        for c in diff.collectives])


def headline(diff: Diff) -> None:
    a, b = diff.a, diff.b
    cols = st.columns(3)
    cols[0].metric("MFU (A → B)", f"{pct(a.mfu)} → {pct(b.mfu)}",
                   None if diff.mfu_delta_points is None
                   else f"{mfu_points(diff.mfu_delta_points, 2)} points")
    cols[1].metric("Step time, ms (A → B)", f"{a.step_time_ms:.2f} → {b.step_time_ms:.2f}",
                   f"{diff.step_time_delta_ms:+.2f} ms", delta_color="inverse")
    cols[2].metric("World size (A → B)", f"{a.world_size} → {b.world_size}")


def render(ctx: PageContext) -> None:
    st.header(HEADER)
    if ctx.run is None:
        st.info("No run yet: upload traces first.")
        return
    base, reason = _baseline(ctx)
    if base is None:
        st.info("Only one run in the database: ingest another to compare.")
        return
    st.caption(f"Explaining **{plain(ctx.run)}** (B, the sidebar's run) against "
               f"**{plain(base)}** (A: {plain(reason)}).")
    diff = data.diff(ctx.config.db, base, ctx.run, ctx.dtype, ctx.peak_tflops)
    model_differs = baseline.model_differs(
        data.run_key(ctx.config.db, base), data.run_key(ctx.config.db, ctx.run),
        data.report(ctx.config.db, base, ctx.dtype, ctx.peak_tflops),
        data.report(ctx.config.db, ctx.run, ctx.dtype, ctx.peak_tflops),
        data.ops(ctx.config.db, base), data.ops(ctx.config.db, ctx.run))
    for warning in baseline.warnings(diff, model_differs):
        st.warning(plain(warning), icon="⚠️")
    headline(diff)
    st.markdown(plain(diff.narrative))
    work = baseline.work_per_gpu(diff)
    if work is not None:
        st.info(plain(work))
    _section("MFU points by cause", lambda: _points(diff))
    _section("The breakdowns side by side", lambda: chart_and_table(
        charts.diff_breakdown(diff), side_by_side(diff), "breakdown", "cmp_bd", folded=True))
    _section("Predicted from A vs measured", lambda: predicted_vs_measured(ctx, base))
    _details(ctx, diff)


def _section(title: str, draw: Callable[[], None]) -> None:
    """Draw one section; one that fails says so, naming the error, and the sections
    below it still render (a failure above had left the rest of the page blank)."""
    try:
        draw()
    except Exception as exc:  # noqa: BLE001 - any failure of a section is reported in place
        st.error(f"{title}: this section could not be drawn ({type(exc).__name__}: "
                 f"{plain(str(exc))}). The other sections are unaffected; please report it.")


def _points(diff: Diff) -> None:
    if diff.mfu_points_by_category is None:
        return
    chart_and_table(charts.diff_waterfall(diff), points_table(diff), "MFU points by cause",
                    "cmp_points", folded=True)
    total = sum(diff.mfu_points_by_category.as_dict().values())
    st.caption(f"The causes' points add up to the MFU change ({points(total, 2, signed=True)}"
               f" points; MFU {fixed(100 * (diff.a.mfu or 0))}% → "
               f"{fixed(100 * (diff.b.mfu or 0))}%).")
    note = share_effect_note(diff)
    if note is not None:
        st.caption(plain(note))


def _details(ctx: PageContext, diff: Diff) -> None:
    _section("Setup changes", lambda: _setup(diff))
    _section("Communication", lambda: _communication(diff))
    _section("Stragglers", lambda: _stragglers(ctx, diff))
    _section("Ops that changed most", lambda: _details_rest(diff))


def _setup(diff: Diff) -> None:
    st.subheader("Setup changes")
    if diff.setup_changes:
        table(pl.DataFrame([{"what": c.what, "A": _shown(c.a), "B": _shown(c.b)}
                            for c in diff.setup_changes]), "setup changes", "cmp_setup")
    else:
        st.caption("Same setup.")


def _shown(value: object) -> str:
    """A setup value as text: unknown (None) is "unknown", never the word None."""
    return "unknown" if value is None else str(value)


def _communication(diff: Diff) -> None:
    if diff.collectives:
        st.subheader("Communication (per rank and step, A → B)")
        st.caption(COMM_SPLIT)
        table(collectives_table(diff), "communication changes", "cmp_comm")


def _details_rest(diff: Diff) -> None:
    """The ops that changed most, B's recommendations and the downloads."""
    if diff.top_ops:
        st.subheader("Ops that changed most")
        table(pl.DataFrame([{"op": short_name(o.op, 60), "A (ms)": round(o.a_ms, 3),
                             "B (ms)": round(o.b_ms, 3), "change (ms)": round(o.delta_ms, 3)}
                            for o in diff.top_ops]), "op changes", "cmp_ops")
    _recommendations(diff)
    cols = st.columns(2)
    cols[0].download_button("Download this comparison (HTML)", diff_html(diff),
                            f"stepscope-diff-{diff.a.run}-{diff.b.run}.html", "text/html",
                            key="dl_diff_html")
    cols[1].download_button("Download this comparison (Markdown)", diff_markdown(diff),
                            f"stepscope-diff-{diff.a.run}-{diff.b.run}.md", "text/markdown",
                            key="dl_diff_md")


def _stragglers(ctx: PageContext, diff: Diff) -> None:
    st.subheader("Stragglers")
    s = diff.stragglers
    rows = ([("new in B", x) for x in s.new] + [("resolved", x) for x in s.resolved]
            + [("still", x) for x in s.persisting])
    if not rows:
        st.caption("None on either run.")
        return
    for what, x in rows:
        run = diff.a.run if what == "resolved" else diff.b.run
        st.markdown(f"- **{what}**: rank {x.rank} ({plain(x.host or '?')}), the others waited "
                    f"{x.waited_on_ms:.2f} ms/step for it · "
                    f"[its Timeline in {plain(run)}]({timeline_link(run, x.rank)})")


def _recommendations(diff: Diff) -> None:
    st.subheader(f"What to fix in {plain(diff.b.run)}")
    if not diff.recommendations:
        st.caption("No recommendation: no category costs enough for a fix to pay off.")
        return
    for rec in diff.recommendations:
        recommendation_card(rec, step_time_ms=diff.b.step_time_ms)
