"""Critical path: the chain that sets each step's length, followed across ranks (the path
per step, rank by rank, and what is on it), and a what-if control that recomputes the
step time on the dependency graph with a rank, an op kind or a collective made faster."""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl
import streamlit as st

from stepscope.analyzers.critical_path.whatif import WhatIf
from stepscope.analyzers.results import CriticalPath, StepPath
from stepscope.dashboard.app import data
from stepscope.dashboard.app.context import PageContext
from stepscope.dashboard.app.widgets import PLOTLY_CONFIG, chart_and_table, plain, table
from stepscope.dashboard.render.critical_path import (
    PATH_COLORS,
    PATH_LABELS,
    path_and_step,
    whatif_line,
)
from stepscope.dashboard.render.format import short_names
from stepscope.ingest import UsageError

TITLE = "Critical path"
HEADER = "Critical path"
KINDS = {"rank": "a rank", "op": "an op kind (kernel name)", "collective": "a collective"}


def _path_figure(step: StepPath) -> go.Figure:
    """The path of one step: one lane per rank, each run of the path on its rank."""
    fig = go.Figure()
    fig.update_layout(title=f"Step {step.step}: {step.path_ms:.3f} ms on rank "
                            f"{step.reference_rank}'s window, {step.jumps} jumps",
                      barmode="overlay", template="plotly_white", xaxis_title="ms from the "
                      "window start", yaxis={"type": "category", "title": ""},
                      margin={"l": 10, "r": 10, "t": 40, "b": 10})
    for cat, color in PATH_COLORS.items():
        runs = [r for r in step.runs if r.category == cat]
        if not runs:
            continue
        fig.add_bar(name=PATH_LABELS[cat], orientation="h", marker_color=color,
                    y=[f"rank {r.rank}" for r in runs], x=[r.ms for r in runs],
                    base=[r.start_ms for r in runs],
                    hovertemplate="%{y}: %{x:.3f} ms from %{base:.3f} ms<extra></extra>")
    return fig


def _step(cp: CriticalPath) -> StepPath:
    steps = {s.step: s for s in cp.steps}
    chosen = st.selectbox("Step", list(steps), key="cp_step",
                          format_func=lambda k: f"step {k} (reference rank "
                                                f"{steps[k].reference_rank})")
    return steps[chosen]


def _step_view(step: StepPath) -> None:
    runs = pl.DataFrame([{"rank": r.rank, "from ms": round(r.start_ms, 4),
                          "ms": round(r.ms, 4), "mostly": r.category, "segments": r.segments}
                         for r in step.runs],
                        schema={"rank": pl.Int64, "from ms": pl.Float64, "ms": pl.Float64,
                                "mostly": pl.Utf8, "segments": pl.Int64})
    st.plotly_chart(_path_figure(step), width="stretch", config=PLOTLY_CONFIG, key="fig_cp")
    with st.expander("The path's runs (where it stays before each jump)"):
        table(runs, "path runs", "cp_runs")
    # names shortened in the middle (distinct ones kept distinct) so every column shows
    names = short_names([o.op for o in step.top_ops], 44)
    ops = pl.DataFrame([{"op": name, "category": o.category, "ms": round(o.ms, 4),
                         "share": round(o.share, 4), "ranks": ", ".join(map(str, o.ranks))}
                        for o, name in zip(step.top_ops, names, strict=True)])
    table(ops, "top ops on the path", "cp_ops")


def _whatif_control(ctx: PageContext, cp: CriticalPath, straggler: int | None) -> None:
    """The what-if form; the rank control opens on the report's straggler when it names
    one (the rank a user came to try first), else on the first rank."""
    st.subheader("What-if")
    st.caption("The step time if it were faster, recomputed on the dependency graph of every "
               "step (docs/critical_path.md), not scaled in proportion.")
    kind = st.radio("Make faster", list(KINDS), format_func=KINDS.get, horizontal=True,
                    key="cp_kind")
    ranks = sorted({r for s in cp.steps for r in s.ranks})
    median = False
    if kind == "rank":
        rank = st.selectbox("Rank", ranks, key="cp_rank",
                            index=ranks.index(straggler) if straggler in ranks else 0)
        median = st.checkbox("at the median rank's speed, kernel by kernel", value=True,
                             key="cp_median")
        spec = WhatIf(ranks=(int(rank),))
    elif kind == "op":
        kernels = [o.op for o in cp.top_ops if o.category in ("compute", "recompute")]
        op = st.text_input("Kernel or launching op name contains", kernels[0] if kernels
                           else "", key="cp_op")
        spec = WhatIf(op=op.strip() or None)
    else:
        comms = [o.op for o in cp.top_ops if o.category in ("collective", "p2p")]
        default = comms[0].split(" (")[0] if comms else "all_reduce"
        spec = WhatIf(collective=st.text_input("Collective (NAME or NAME:GROUP)", default,
                                               key="cp_coll").strip() or None)
    speed = None if median else st.number_input("Speedup (x)", min_value=1.01,
                                                 max_value=1000.0, value=2.0, step=0.25,
                                                 key="cp_speedup")
    spec = WhatIf(ranks=spec.ranks, op=spec.op, collective=spec.collective,
                  speedup=None if speed is None else float(speed))
    if not (spec.ranks or spec.op or spec.collective):
        st.info("Name what to make faster.")
        return
    try:
        result = data.whatif(ctx.config.db, ctx.run or "", spec)
    except UsageError as exc:
        st.warning(plain(str(exc)))
        return
    st.success(plain(whatif_line(result)))
    st.metric("Predicted step", f"{result.predicted_step_time_ms:.2f} ms",
              f"{-result.gain_ms:+.2f} ms", delta_color="inverse")


def render(ctx: PageContext) -> None:
    st.header(HEADER)
    if ctx.run is None:
        st.info("No run yet: upload traces first.")
        return
    report = data.report(ctx.config.db, ctx.run, ctx.dtype)
    cp = report.critical_path
    if cp is None or cp.message or not cp.steps:
        st.info("No critical path: "
                + (plain(cp.message) if cp and cp.message else "nothing to follow"))
        return
    top = cp.by_rank[0] if cp.by_rank else None
    cols = st.columns(5)
    cols[0].metric("Path per step", f"{cp.path_ms:.2f} ms",
                   help="each step's reference rank's window (the longest of the step)")
    cols[1].metric("Step time", f"{report.step_time_ms:.2f} ms",
                   help="the mean over ranks of each rank's window, as the breakdown")
    cols[2].metric("Steps", len(cp.steps))
    cols[3].metric("Ranks on the path", len({r for s in cp.steps for r in s.ranks}))
    cols[4].metric("Most path time", f"rank {top.key}" if top else "–",
                   f"{100 * top.share:.0f}% of the path" if top else None,
                   delta_color="off")
    st.caption(f"path per step: {plain(path_and_step(cp, report.step_time_ms))}")
    _step_view(_step(cp))
    cats = pl.DataFrame([{"on the path": PATH_LABELS.get(k, k), "ms/step": round(ms, 4)}
                         for k, ms in cp.by_category_ms.items() if ms > 0])
    fig = go.Figure(go.Bar(x=cats["on the path"].to_list(), y=cats["ms/step"].to_list(),
                           marker_color=[PATH_COLORS.get(k, "#999")
                                         for k, ms in cp.by_category_ms.items() if ms > 0]))
    fig.update_layout(title="The path by category (mean over steps)", template="plotly_white",
                      yaxis_title="ms per step", margin={"l": 10, "r": 10, "t": 40, "b": 10})
    chart_and_table(fig, cats, "path by category", "cp_cats")
    if cp.whatifs:
        st.markdown("**The report's what-ifs**")
        for w in cp.whatifs:
            st.markdown(f"- {plain(whatif_line(w))}")
    _whatif_control(ctx, cp, report.stragglers[0].rank if report.stragglers else None)
    for note in cp.notes:
        st.caption(f"note: {plain(note)}")
