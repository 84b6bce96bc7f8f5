"""Overview of a run: step time and its breakdown per step, MFU/HFU against the peak
with the waterfall of lost points (and the share of the step behind each stage's
points), the top recommendations with predicted gains, evidence and a link to the
Timeline where they show, notes and caveats."""

from __future__ import annotations

import polars as pl
import streamlit as st

from stepscope.analyzers.flops.peaks import peak_label
from stepscope.analyzers.nightly import history
from stepscope.analyzers.results import CATEGORIES, Recommendation, Report
from stepscope.dashboard.app import charts, data, explain
from stepscope.dashboard.app.context import PageContext, deep_link, timeline_link
from stepscope.dashboard.app.widgets import chart_and_table, plain, recommendation_card, table
from stepscope.dashboard.render.format import (
    fixed,
    layout_degrees,
    layout_nodes,
    mfu_pct,
    pct,
    points,
    share,
)
from stepscope.dashboard.render.labels import (
    CATEGORY_LABELS,
    IDLE_LABELS,
    IDLE_PARTS,
    STAGE_LABELS,
    idle_shown,
)
from stepscope.dashboard.render.stragglers import no_straggler_line, untraced_ranks

TITLE = "Overview"
HEADER = "Overview"


def largest_loss(report: Report) -> tuple[str | None, float]:
    """The non-compute category that costs most (category, ms per step); None when none
    costs anything (the summary's 'none', not an arbitrary zero)."""
    cat, ms = history.largest_loss(report.breakdown_ms.as_dict())
    return cat, ms or 0.0


def straggler_value(report: Report) -> str:
    """The headline's straggler cell: short enough for its column at 1000 px."""
    ranks = [s.rank for s in report.stragglers]
    if not ranks:  # the metric's delta says how many ranks were traced
        return "unknown" if untraced_ranks(report) else "none"
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"{len(ranks)} ranks"


def headline(report: Report) -> None:
    """The numbers a user looks for first, three to a row so none is cut at 1000 px."""
    mfu = report.mfu
    cols = st.columns(3)
    cols[0].metric("Step time", f"{report.step_time_ms:.2f} ms",
                   help="mean over ranks of each rank's mean complete step")
    cols[1].metric("MFU", mfu_pct(mfu.mfu, mfu.lower_bound),
                   f"{pct(mfu.shaped_share, 0)} of compute has shapes" if mfu.lower_bound
                   else None, delta_color="off", delta_arrow="off",
                   help=explain.MFU.help() + (f"\n\n{mfu.headline}" if mfu.lower_bound else ""))
    cols[2].metric("HFU", mfu_pct(mfu.hfu, mfu.lower_bound), help=explain.HFU.help())
    cat, ms = largest_loss(report)
    cols = st.columns(3)
    cols[0].metric(f"Largest loss: {CATEGORY_LABELS[cat] if cat else 'none'}", f"{ms:.2f} ms",
                   f"{share(ms, report.step_time_ms)} of the step", delta_color="off",
                   delta_arrow="off")
    untraced = untraced_ranks(report)
    cols[1].metric("Stragglers", straggler_value(report),
                   untraced.removeprefix("unknown: ") if untraced else None,
                   delta_color="off", delta_arrow="off",
                   help=", ".join(f"rank {s.rank} ({plain(s.host or '?')})"
                                  for s in report.stragglers)
                   or no_straggler_line(report))
    cols[2].metric("Ranks", f"{report.run.ranks} of {report.run.world_size}")
    run = report.run
    st.caption(f"{run.ranks} of {run.world_size} ranks on {len(run.hosts) or '?'} host(s) · "
               f"{plain(run.device)} · layout {layout_degrees(report.layout, '×')} · "
               f"{layout_nodes(report.layout)} · status {run.status} · "
               f"[link to this view]({deep_link('overview', run.name)})")


SHORT = {"compute": "compute", "recompute": "recompute", "exposed_comm": "exposed comm",
         "straggler_wait": "straggler wait", "bubble": "bubble", "memory": "memory",
         "idle": "idle"}


def step_table(report: Report) -> pl.DataFrame:
    """The mean step and every step, in ms (short headers so every column shows)."""
    rows = [{"step": "mean", "step ms": report.step_time_ms,
             **{SHORT[c]: report.breakdown_ms.ms(c) for c in CATEGORIES}}]
    rows += [{"step": str(s.step) + ("" if s.complete else " (last)"),
              "step ms": s.step_time_ms,
              **{SHORT[c]: s.breakdown_ms.ms(c) for c in CATEGORIES}}
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
    """Each stage's points beside the time behind them (its share of the step)."""
    mfu = report.mfu
    shares = charts.waterfall_shares(report)
    rows = [{"stage": STAGE_LABELS.get(w.name, w.name), "points": points(w.points, 2),
             "time": "" if w.name == "kernel_efficiency" else
             f"{report.breakdown_ms.ms(w.name):.2f} ms", "share": sh}
            for w, sh in zip(mfu.waterfall, shares, strict=True)]
    if mfu.mfu is not None:
        rows.append({"stage": "= MFU", "points": fixed(100 * mfu.mfu, 2), "time": "",
                     "share": ""})
    return pl.DataFrame(rows, schema={"stage": pl.String, "points": pl.String,
                                      "time": pl.String, "share": pl.String})


def render(ctx: PageContext) -> None:
    st.header(HEADER)
    if ctx.run is None:
        st.info("No run yet: upload traces first.")
        return
    report = data.report(ctx.config.db, ctx.run, ctx.dtype, ctx.peak_tflops)
    headline(report)
    st.subheader("Where the step time went")
    chart_and_table(charts.step_breakdown(report), step_table(report), "per step", "steps")
    st.caption(explain.EXPOSED.caption())
    idle_split(report)
    st.subheader("How far from the hardware")
    mfu_section(report)
    _recommendations(report)
    if report.notes or report.layout.notes:
        st.subheader("Notes")
        for note in (*report.notes, *report.layout.notes):
            st.caption(f"• {plain(note)}")


def mfu_section(report: Report) -> None:
    mfu = report.mfu
    if mfu.mfu is None:
        st.warning(f"MFU not computed: {plain(mfu.message)}")
        if mfu.message and "--peak-tflops" in mfu.message:
            st.caption("Set **Peak TFLOP/s per GPU** (and the dtype) in the sidebar: the "
                       "dashboard's `--peak-tflops`; the link carries them.")
        return
    st.markdown(
        f"**MFU {mfu_pct(mfu.mfu, mfu.lower_bound)}**, "
        f"HFU {mfu_pct(mfu.hfu, mfu.lower_bound)} of "
        f"{(mfu.peak_flops_per_gpu or 0) / 1e12:.1f} TFLOP/s "
        f"{peak_label(mfu.peak_dtype, mfu.dtype)} per GPU "
        f"({plain(mfu.device)}; peak table {plain(mfu.peak_table_version)}); model FLOPs "
        f"from the {plain(mfu.flops_source)}.")
    chart_and_table(charts.mfu_waterfall(report), waterfall_table(report), "MFU waterfall",
                    "waterfall")
    st.caption(explain.WATERFALL.caption())
    if mfu.message:
        st.caption(plain(mfu.message))


def recommendation_link(report: Report, rec: Recommendation) -> str:
    """Where a recommendation shows on the Timeline: the straggler's rank at its slowest
    step, else the slowest complete step."""
    complete = [s for s in report.per_step if s.complete] or list(report.per_step)
    step = max(complete, key=lambda s: s.step_time_ms).step if complete else None
    rank = next((s.rank for s in report.stragglers if f"rank {s.rank} " in rec.title), None)
    return timeline_link(report.run.name, rank, step)


def _recommendations(report: Report) -> None:
    st.subheader("What to fix")
    if not report.recommendations:
        st.success("No recommendation: no category costs enough for a fix to pay off.")
        return
    for rec in report.recommendations[:5]:
        recommendation_card(rec, recommendation_link(report, rec), report.step_time_ms)
