"""Ranks: the stragglers with their evidence (and a link to their Timeline), a rank x
step heatmap that opens on who makes the others wait, and each rank's breakdown grouped
by host. A click on a heatmap cell opens the Timeline at that rank and step."""

from __future__ import annotations

from statistics import median

import polars as pl
import streamlit as st

from stepscope.analyzers.detail import MAX_TIMELINE_RANKS, RankStepGrid, timeline_ranks
from stepscope.analyzers.results import CATEGORIES, Report
from stepscope.dashboard.app import charts, data, explain
from stepscope.dashboard.app.charts import Heat
from stepscope.dashboard.app.context import NAV_PAGE, PageContext, timeline_link
from stepscope.dashboard.app.widgets import chart_and_table, plain, table
from stepscope.dashboard.render.format import rank_list_short, share
from stepscope.dashboard.render.labels import CATEGORY_LABELS
from stepscope.dashboard.render.stragglers import no_straggler_line, untraced_ranks

TITLE = "Ranks"
HEADER = "Ranks"
# the default first: who makes the others wait
METRICS = {
    "wait_caused_ms": "wait caused (others waiting on this rank)",
    "wait_suffered_ms": "wait suffered (this rank waiting for others)",
    "step_ms": "step time against the median step",
}
UNITS = {"wait_caused_ms": "ms/step caused", "wait_suffered_ms": "ms/step waited",
         "step_ms": "ms vs median"}
PALE_SHARE = 0.05  # the colour scale spans at least this share of the step


def rank_table(report: Report) -> pl.DataFrame:
    return pl.DataFrame([
        {"rank": r.rank, "host": r.host, "steps": r.n_steps, "step ms": r.step_time_ms,
         **{CATEGORY_LABELS[c]: r.breakdown_ms.ms(c) for c in CATEGORIES}}
        for r in report.per_rank]).with_columns(pl.selectors.float().round(3))


def slowest_step(grid: RankStepGrid, rank: int) -> int | None:
    """The rank's complete step with the most straggler wait caused (else its longest)."""
    rows = [(grid.wait_caused_ms[i], grid.step_ms[i], grid.step[i])
            for i in range(len(grid.rank)) if grid.rank[i] == rank and grid.complete[i]]
    return max(rows)[2] if rows else None


def stragglers(report: Report, grid: RankStepGrid) -> None:
    st.subheader("Stragglers")
    if not report.stragglers:
        line = no_straggler_line(report)
        if untraced_ranks(report) is None:
            st.success(line[0].upper() + line[1:] + ".")
        else:
            st.warning(line[0].upper() + line[1:] + ".")
        return
    run = report.run.name
    for s in report.stragglers:
        link = timeline_link(run, s.rank, slowest_step(grid, s.rank))
        st.markdown(f"**rank {s.rank}** ({plain(s.host or 'unknown host')}): the others "
                    f"waited {s.waited_on_ms:.2f} ms/step for it; {plain(s.evidence)} · "
                    f"[open its Timeline]({link})")
    table(pl.DataFrame([{
        "rank": s.rank, "host": s.host, "others waited ms/step": round(s.waited_on_ms, 3),
        "waiting ranks": s.waiting_ranks, "slowdown": share(s.slowdown, 1.0),
        "arrived last": f"{s.arrived_last} of {s.matched_collectives}"}
        for s in report.stragglers]), "stragglers", "stragglers",
        {"slowdown": st.column_config.TextColumn(help=explain.SLOWDOWN.what
                                                 + " (share of the step)"),
         "arrived last": st.column_config.TextColumn(
             help="matched collectives where it arrived last, of those it took part in")})


def heat(grid: RankStepGrid, metric: str) -> Heat:
    """One view of the grid over complete steps (the incomplete last step would stretch
    the scale), on a scale that starts at 0 (waits) or centres on the median step, and
    spans at least PALE_SHARE of the step so that noise stays pale."""
    idx = [i for i in range(len(grid.rank)) if grid.complete[i]]
    ranks, steps = sorted({grid.rank[i] for i in idx}), sorted({grid.step[i] for i in idx})
    typical = median([grid.step_ms[i] for i in idx]) if idx else 0.0
    values = {(grid.rank[i], grid.step[i]): getattr(grid, metric)[i] - (
        typical if metric == "step_ms" else 0.0) for i in idx}
    z = [[values.get((r, s)) for s in steps] for r in ranks]
    span = max([abs(v) for v in values.values()] + [PALE_SHARE * typical, 1e-6])
    if metric == "step_ms":
        return Heat(ranks, steps, z, UNITS[metric], -span, span, diverging=True)
    return Heat(ranks, steps, z, UNITS[metric], 0.0, span)


def rank_means(grid: RankStepGrid, metric: str) -> dict[int, float]:
    """Mean over complete steps of the metric per rank (what the sentence summarizes)."""
    sums: dict[int, list[float]] = {}
    for i in range(len(grid.rank)):
        if grid.complete[i]:
            sums.setdefault(grid.rank[i], []).append(getattr(grid, metric)[i])
    return {r: sum(v) / len(v) for r, v in sums.items()}


def _group(means: dict[int, float], floor: float) -> list[tuple[float, list[int]]]:
    """Ranks above `floor`, grouped by (rounded) value, largest first."""
    groups: dict[float, list[int]] = {}
    for r, v in sorted(means.items()):
        if v > floor:
            groups.setdefault(round(v, 2), []).append(r)
    return sorted(groups.items(), reverse=True)


def sentence(report: Report, grid: RankStepGrid, metric: str) -> str:
    """What the chart shows, in numbers read from the chart's own data."""
    means = rank_means(grid, metric)
    step = report.step_time_ms
    if not means:
        return "No complete step to compare."
    if metric == "step_ms":
        typical = median(means.values())
        slow = max(means, key=lambda r: means[r])
        return (f"Median rank's step {typical:.2f} ms; slowest rank {slow} at "
                f"{means[slow]:.2f} ms ({means[slow] - typical:+.2f} ms). Red: slower than "
                "the median step, blue: faster (complete steps only).")
    groups = _group(means, 0.01 * step)
    if not groups:
        return f"No rank {'caused' if metric == 'wait_caused_ms' else 'suffered'} more than " \
               f"1% of the step ({0.01 * step:.2f} ms) of straggler wait."
    flagged = {s.rank for s in report.stragglers}
    if metric == "wait_suffered_ms":
        parts = [f"rank{'s' if len(rs) > 1 else ''} {rank_list_short(rs)}: {v:.2f} ms/step"
                 + (" each" if len(rs) > 1 else "") + f" ({share(v, step)} of the step)"
                 for v, rs in groups]
        return "Waited for late ranks (mean over complete steps): " + "; ".join(parts) + "."
    # summed over the waiting ranks: a share of their time together, never past 100%
    others = max(len(means) - 1, 1) * step
    parts = [f"rank{'s' if len(rs) > 1 else ''} {rank_list_short(rs)}: {v:.2f} ms/step"
             + (" each" if len(rs) > 1 else "") + f" ({share(v, others)} of the other "
             "ranks' time)" for v, rs in groups]
    text = ("Made the others wait in the collectives where it arrived last, summed over "
            "the ranks that waited (mean over complete steps): " + "; ".join(parts) + ".")
    if flagged:
        text += (" The Stragglers table also counts the waits passed on through the ranks "
                 "that waited for a straggler.")
    upstream = sorted(r for _, rs in groups for r in rs if r not in flagged)
    if upstream and flagged:
        text += (f" Rank(s) {rank_list_short(upstream)} arrive last too but are not "
                 "stragglers: their own time is the median rank's, they are late because "
                 "they waited upstream.")
    return text


def _open_cell(run: str, default: list[int]) -> None:
    """A click on a heatmap cell: the Timeline at that step, with that rank shown."""
    state = st.session_state.get("fig_grid")
    picked = (state or {}).get("selection", {}).get("points", [])
    if not picked:
        return
    rank, step = int(picked[0]["y"]), int(picked[0]["x"])
    others = [r for r in default if r != rank][:MAX_TIMELINE_RANKS - 1]
    st.session_state["tl_step"] = step
    st.session_state[f"tl_ranks_{run}"] = sorted({rank, *others})
    st.session_state[NAV_PAGE] = "timeline"


def heatmap(report: Report, grid: RankStepGrid) -> None:
    st.subheader("Rank × step")
    metric = st.radio("Colour by", list(METRICS), format_func=METRICS.__getitem__,
                      horizontal=True, key="ranks_metric")
    st.markdown(sentence(report, grid, metric))
    st.caption(explain.WAIT_CAUSED.caption() if metric != "step_ms"
               else "Each cell: the rank's step time minus the median complete step (ms).")
    frame = pl.DataFrame({"rank": grid.rank, "host": grid.host, "step": grid.step,
                          "complete": grid.complete, "step ms": grid.step_ms,
                          "wait suffered ms": grid.wait_suffered_ms,
                          "wait caused ms": grid.wait_caused_ms})
    all_ranks = sorted(r.rank for r in report.per_rank)
    stages = [list(s.ranks) for s in report.pipeline.per_stage] if report.pipeline else []
    default = timeline_ranks([s.rank for s in report.stragglers], stages, all_ranks)
    chart_and_table(charts.rank_step_heatmap(heat(grid, metric), METRICS[metric]),
                    frame.with_columns(pl.selectors.float().round(3)), "rank x step", "grid",
                    folded=True, on_select=lambda: _open_cell(report.run.name, default))
    st.caption("Click a cell to open the Timeline at that rank and step.")


def render(ctx: PageContext) -> None:
    st.header(HEADER)
    if ctx.run is None:
        st.info("No run yet: upload traces first.")
        return
    report = data.report(ctx.config.db, ctx.run, ctx.dtype, ctx.peak_tflops)
    grid = data.grid(ctx.config.db, ctx.run)
    stragglers(report, grid)
    heatmap(report, grid)
    st.subheader("Per rank")
    chart_and_table(charts.rank_breakdown(report), rank_table(report), "per rank",
                    "per_rank", folded=True)
