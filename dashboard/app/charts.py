"""Plotly figures of the dashboard: pure functions over the typed models (a Report, a
Diff, a PlanResult) and the drill-down structures of analyzers.detail. They compute
nothing the models do not hold; they only choose marks, colours and labels."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import plotly.graph_objects as go

from stepscope.analyzers.detail import KernelRow, StepTimeline
from stepscope.analyzers.results import (
    CATEGORIES,
    STAGES,
    Breakdown,
    CollectiveStat,
    Diff,
    Mfu,
    PlanResult,
    Report,
)
from stepscope.dashboard.render.format import (
    chart_text,
    fixed,
    numbered_names,
    pct,
    share,
    short_name,
)
from stepscope.dashboard.render.format import points as fmt_points
from stepscope.dashboard.render.labels import CATEGORY_LABELS, STAGE_LABELS, peak_source

COLORS = {
    "compute": "#2e8b57", "recompute": "#8fd19e", "exposed_comm": "#d62728",
    "straggler_wait": "#ff7f0e", "bubble": "#9467bd", "memory": "#1f77b4",
    "idle": "#b8b8b8", "kernel_efficiency": "#8c564b",
}
LAYOUT = {"template": "plotly_white", "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
          "legend": {"orientation": "h", "y": -0.28, "yanchor": "top", "traceorder": "normal"},
          "font": {"family": "sans-serif"}}


def _figure(title: str, **layout: object) -> go.Figure:
    """A figure in the dashboard's layout; the title is shown literally (chart_text: it
    may quote run names)."""
    fig = go.Figure()
    fig.update_layout(title=chart_text(title), **{**LAYOUT, **layout})
    return fig


def stacked_breakdown(labels: Sequence[str | Sequence[str]],
                      breakdowns: Sequence[Breakdown], title: str,
                      axis_title: str = "ms per step") -> go.Figure:
    """One stacked bar per label: the attribution categories, summing to the step."""
    fig = _figure(title, barmode="stack", yaxis_title=axis_title)
    x: list[object] = [chart_text(label) if isinstance(label, str)
                       else [chart_text(part) for part in label] for label in labels]
    if x and not isinstance(x[0], str):  # multi-category axis (host, rank)
        x = [list(level) for level in zip(*x, strict=True)]
    for cat in CATEGORIES:
        fig.add_bar(name=CATEGORY_LABELS[cat], x=x, y=[b.ms(cat) for b in breakdowns],
                    marker_color=COLORS[cat],
                    hovertemplate=f"{CATEGORY_LABELS[cat]}: %{{y:.2f}} ms<extra></extra>")
    return fig


def step_breakdown(report: Report) -> go.Figure:
    """Per step (mean over ranks) and the run's mean: where the step time went."""
    labels = [f"step {s.step}" + ("" if s.complete else " (last)") for s in report.per_step]
    values = [s.breakdown_ms for s in report.per_step]
    return stacked_breakdown([*labels, "mean"], [*values, report.breakdown_ms],
                             "Step time by category (mean over ranks)")


def rank_breakdown(report: Report) -> go.Figure:
    """Per rank, grouped by host: each rank's mean complete step."""
    ranks = sorted(report.per_rank, key=lambda r: (r.host or "", r.rank))
    fig = stacked_breakdown([(r.host or "unknown host", f"rank {r.rank}") for r in ranks],
                            [r.breakdown_ms for r in ranks], "Per rank, grouped by host")
    # the legend above the bars: below them, rotated rank labels push the host row
    # under it (16 ranks on 4 hosts at 1000 px)
    # under the title, which then sits at the top (Plotly centres it in the margin)
    fig.update_layout(legend={"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},
                      margin={"l": 10, "r": 10, "t": 110, "b": 10},
                      title={"y": 1.0, "yref": "container", "yanchor": "top",
                             "pad": {"t": 10}})
    return fig


def waterfall_shares(report: Report, short: bool = False) -> list[str]:
    """Beside each stage's points, the share of the step its time took (kernel
    efficiency: the efficiency itself), so 88% idle next to -5 points reads right."""
    step = report.step_time_ms
    out = []
    for w in report.mfu.waterfall:
        if w.name == "kernel_efficiency":
            out.append(f"eff. {fixed(100 + w.points)}%" if short
                       else f"efficiency {fixed(100 + w.points)}%")
        else:
            sh = share(report.breakdown_ms.ms(w.name), step)
            out.append(sh if short else f"{sh} of the step")
    return out


WATERFALL_TOP = 118.0   # the y range's top: room above the peak's bar for its label
LINE_UNITS = 5.5        # one 11 px label line in % of peak (about 2.9 px per point at 1000 px)
LABEL_PAD = 1.5         # clearance from the HFU line, in % of peak


def _label_box(anchor: float, yanchor: str, height: float) -> tuple[float, float]:
    return (anchor - height, anchor) if yanchor == "top" else (anchor, anchor + height)


def waterfall_label_places(bars: Sequence[tuple[float, float]], lines: Sequence[int],
                           hfu: float | None, below_first: Sequence[bool]
                           ) -> list[tuple[float, str]]:
    """(y, yanchor) of each waterfall bar's label in % of peak, `bars` as (low, high):
    below its bar (a loss) or above it (the peak, the MFU), else on the other side,
    else clear of the HFU line, so that no label is crossed by the HFU line or drops
    under the axis onto the category labels (the DLRM job's bars all end near 0)."""
    out = []
    for (lo, hi), n, below in zip(bars, lines, below_first, strict=True):
        height = n * LINE_UNITS
        sides = [(lo, "top"), (hi, "bottom")]
        tries = [*(sides if below else sides[::-1])]
        if hfu is not None:
            tries += [(hfu + 2 * LABEL_PAD, "bottom"), (hfu - 2 * LABEL_PAD, "top")]
        out.append(next((t for t in tries if _label_fits(_label_box(*t, height), hfu)),
                        tries[0]))
    return out


def _label_fits(box: tuple[float, float], hfu: float | None) -> bool:
    lo, hi = box
    clear = hfu is None or not (lo - LABEL_PAD < hfu < hi + LABEL_PAD)
    return lo >= 0 and hi <= WATERFALL_TOP and clear


def mfu_waterfall(report: Report) -> go.Figure:
    """From 100% of peak down to the MFU: the points lost at each stage, with the share
    of the step each stage's time took. The labels are placed here, not by Plotly, so
    none is crossed by the HFU line or printed over the category labels
    (waterfall_label_places)."""
    mfu: Mfu = report.mfu
    steps = list(mfu.waterfall)
    shares = waterfall_shares(report, short=True)
    # the HFU legend sits inside the plot's empty top right (the last bars are low), so
    # a narrow page has room for the title
    fig = _figure(f"MFU {pct(mfu.mfu or 0)}: points lost per stage (share of the step "
                  "under each)",
                  yaxis_title="% of peak", showlegend=mfu.hfu is not None, height=480,
                  legend={"orientation": "h", "x": 1.0, "xanchor": "right", "y": 1.0,
                          "yanchor": "top", "bgcolor": "rgba(255,255,255,0.8)"})
    x = ["peak", *[STAGE_LABELS.get(w.name, w.name) for w in steps], "MFU"]
    texts = ["100", *[f"{fmt_points(w.points)}<br>{sh}" for w, sh in
                      zip(steps, shares, strict=True)], fixed(100 * (mfu.mfu or 0))]
    fig.add_trace(go.Waterfall(showlegend=False, x=x,
        measure=["absolute", *["relative"] * len(steps), "total"],
        y=[100.0, *[w.points for w in steps], 0.0],
        customdata=["", *shares, ""],
        hovertemplate="%{x}: %{y:.3g} points (%{customdata})<extra></extra>",
        textposition="none", cliponaxis=False,
        connector={"line": {"color": "#999"}},
        decreasing={"marker": {"color": COLORS["exposed_comm"]}},
        totals={"marker": {"color": COLORS["compute"]}},
        increasing={"marker": {"color": COLORS["compute"]}}))
    fig.update_yaxes(range=[0, WATERFALL_TOP])
    hfu = None if mfu.hfu is None else 100 * mfu.hfu
    levels = list(itertools.accumulate([100.0, *[w.points for w in steps]]))
    bars = [(0.0, 100.0), *[(min(a, b), max(a, b)) for a, b in itertools.pairwise(levels)],
            (0.0, 100 * (mfu.mfu or 0))]
    places = waterfall_label_places(bars, [1, *[2] * len(steps), 1], hfu,
                                    [False, *[True] * len(steps), False])
    for name, text, (y, anchor) in zip(x, texts, places, strict=True):
        fig.add_annotation(x=name, y=y, yanchor=anchor, text=text, showarrow=False,
                           font={"size": 11, "color": "#444"})
    if hfu is not None:
        # named in the legend, not on the line: a label on the line sits on the bars
        fig.add_hline(y=hfu, line_dash="dot", line_color="#555")
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", hoverinfo="skip",
                                 name=f"HFU {pct(mfu.hfu)} (dotted line)",
                                 line={"dash": "dot", "color": "#555"}))
    return fig


@dataclass(frozen=True)
class Heat:
    """One view of the rank x step grid: the value of each (rank, step), its unit and
    the colour scale's range."""

    ranks: list[int]
    steps: list[int]
    z: list[list[float | None]]
    unit: str
    zmin: float
    zmax: float
    diverging: bool = False


def rank_step_heatmap(heat: Heat, title: str) -> go.Figure:
    """Ranks x steps coloured by one view of the grid; a click on a cell opens the
    Timeline there (the page wires the selection). Plotly cannot select a heatmap's
    cells, so an invisible marker sits on each cell: it carries the hover and the click."""
    fig = _figure(title, xaxis_title="step", yaxis_title="rank",
                  height=max(260, 16 * len(heat.ranks) + 140))
    scale = "RdBu_r" if heat.diverging else [[0.0, "#ffffff"], [1.0, "#b30000"]]
    steps, ranks = [str(s) for s in heat.steps], [str(r) for r in heat.ranks]
    fig.add_trace(go.Heatmap(
        z=heat.z, x=steps, y=ranks, zmin=heat.zmin, zmax=heat.zmax, colorscale=scale,
        xgap=1, ygap=1, colorbar={"title": {"text": heat.unit, "side": "right"}},
        hoverinfo="skip"))
    cells = [(x, y, row[i]) for y, row in zip(ranks, heat.z, strict=True)
             for i, x in enumerate(steps)]
    fig.add_scatter(
        x=[c[0] for c in cells], y=[c[1] for c in cells], customdata=[c[2] for c in cells],
        mode="markers", showlegend=False, name="cells",
        marker={"symbol": "square", "size": 14, "color": "rgba(0,0,0,0)"},
        hovertemplate=("rank %{y}, step %{x}: %{customdata:.3f} " + heat.unit
                       + "<br>click: open the Timeline here<extra></extra>"))
    fig.update_layout(hovermode="closest", hoverdistance=-1)
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(type="category")
    return fig


def timeline(tl: StepTimeline, stragglers: Sequence[int] = (), aligned: bool = False
             ) -> go.Figure:
    """Gantt of one step: each rank's window coloured by what the attribution gave each
    instant to (idle is grey); ms from the rank's own window start, or (`aligned`) on the
    aligned clock from the earliest window start (docs/timeline.md)."""
    lanes = {r: f"rank {r}" + (" (straggler)" if r in stragglers else "") for r in tl.ranks}
    shift = dict(zip(tl.ranks, tl.offset_ms, strict=True)) if aligned and tl.offset_ms \
        else {}
    binned = f" (drawn by time in bins of {tl.bin_ms:.3f} ms)" if tl.bin_ms else ""
    fig = _figure(f"Step {tl.step}: what each instant went to{binned}", barmode="overlay",
                  xaxis_title=("ms on the aligned clock from the earliest window start"
                               if shift else "ms from the rank's step start"),
                  height=max(260, 28 * len(tl.ranks) + 140))
    for cat in CATEGORIES:
        idx = [i for i, c in enumerate(tl.category) if c == cat]
        if not idx:
            continue
        names = [chart_text(short_name(tl.label[i] or CATEGORY_LABELS[cat], 90))
                 if tl.label else CATEGORY_LABELS[cat] for i in idx]
        fig.add_bar(name=CATEGORY_LABELS[cat], orientation="h",
                    y=[lanes[tl.rank[i]] for i in idx],
                    x=[tl.end_ms[i] - tl.start_ms[i] for i in idx],
                    base=[tl.start_ms[i] + shift.get(tl.rank[i], 0.0) for i in idx],
                    marker_color=COLORS[cat],
                    marker_line_width=0, customdata=names,
                    hovertemplate=(f"<b>%{{customdata}}</b><br>{CATEGORY_LABELS[cat]}: "
                                   "from %{base:.3f} ms, %{x:.3f} ms<extra>%{y}</extra>"))
    fig.update_yaxes(autorange="reversed", categoryorder="array",
                     categoryarray=[lanes[r] for r in tl.ranks])
    return fig


COMM_PARTS = (("exposed_ms", "exposed", COLORS["exposed_comm"]),
              ("straggler_wait_ms", "straggler wait", COLORS["straggler_wait"]),
              ("bubble_ms", "in bubble (p2p)", COLORS["bubble"]),
              ("overlapped_ms", "overlapped", "#c9d6e3"))


def collective_label(c: CollectiveStat, width: int = 48) -> str:
    """A collective's bar label (its group's name comes from the trace: chart_text)."""
    return chart_text(short_name(f"{c.collective} · {c.group_label}", width))


def collectives_exposure(report: Report) -> go.Figure:
    """Per collective and group: time per step split into exposed, straggler wait, in
    the bubble and overlapped (they add up to its time; the first three over all rows
    are the report's categories)."""
    rows = report.collectives
    labels = [collective_label(c) for c in rows]
    fig = _figure("Communication per rank and step: where each collective's time went",
                  barmode="stack", xaxis_title="ms per rank and step",
                  height=max(280, 32 * len(rows) + 150))
    for field, name, color in COMM_PARTS:
        values = [getattr(c, field) for c in rows]
        if not any(values):
            continue
        fig.add_bar(name=name, orientation="h", y=labels, x=values, marker_color=color,
                    customdata=[chart_text(f"{c.collective} · {c.group_label}")
                                for c in rows],
                    hovertemplate=f"%{{customdata}}<br>{name}: %{{x:.3f}} ms<extra></extra>")
    fig.update_yaxes(autorange="reversed")
    return fig


def bus_bandwidth(report: Report) -> go.Figure:
    """Achieved bus bandwidth of each collective against its link's peak."""
    rows = [c for c in report.collectives if c.bus_bw_gbs is not None]
    labels = [collective_label(c) for c in rows]
    fig = _figure("Bus bandwidth vs the link's peak", barmode="overlay", xaxis_title="GB/s",
                  height=max(260, 30 * len(rows) + 120))
    fig.add_bar(name="link peak", orientation="h", y=labels,
                x=[c.link_peak_gbs or 0.0 for c in rows], marker_color="#dddddd",
                text=[c.link + (" (assumed peak)" if (peak_source(c) or "").startswith(
                    "assumed") else "") for c in rows], textposition="auto",
                textangle=0, cliponaxis=False)
    fig.add_bar(name="achieved", orientation="h", y=labels, x=[c.bus_bw_gbs for c in rows],
                marker_color=COLORS["memory"], width=0.4)
    fig.update_yaxes(autorange="reversed")
    return fig


def pipeline_stages(report: Report) -> go.Figure:
    """Bubble and idle per pipeline stage, against the 1F1B theory (a dotted line named
    in the legend: a label on the line would sit on the first stage's bar)."""
    pipe = report.pipeline
    fig = _figure("Per stage", barmode="group", yaxis_title="ms per step",
                  legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0})
    if pipe is None:
        return fig
    x = [f"stage {s.stage}" for s in pipe.per_stage]
    fig.add_bar(name="bubble", x=x, y=[s.bubble_ms for s in pipe.per_stage],
                marker_color=COLORS["bubble"])
    fig.add_bar(name="idle", x=x, y=[s.idle_ms for s in pipe.per_stage],
                marker_color=COLORS["idle"])
    theory_ms = pipe.bubble_theory * report.step_time_ms
    fig.add_hline(y=theory_ms, line_dash="dot", line_color="#333")
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", hoverinfo="skip",
                             name=f"1F1B theory {theory_ms:.2f} ms ({pct(pipe.bubble_theory)} "
                                  "of the step, dotted)",
                             line={"dash": "dot", "color": "#333"}))
    return fig


def kernels(rows: Sequence[KernelRow], top: int = 20) -> go.Figure:
    """Top kernels by mean ms per step, with the range over ranks as error bars."""
    shown = list(rows)[:top]
    # numbered, so that two kernels whose names start alike keep their own bars
    names = [chart_text(n) for n in numbered_names([r.name for r in shown], 40)]
    fig = _figure("Top GPU ops (mean over ranks; bars: min–max over ranks)",
                  xaxis_title="ms per step", height=max(260, 24 * len(shown) + 120),
                  showlegend=False)
    fig.add_bar(orientation="h", y=names, x=[r.mean_ms for r in shown],
                marker_color=[COLORS["exposed_comm"] if r.kind == "comm" else
                              COLORS["memory"] if r.kind in ("memcpy", "memset") else
                              COLORS["compute"] for r in shown],
                error_x={"type": "data", "symmetric": False,
                         "array": [r.max_ms - r.mean_ms for r in shown],
                         "arrayminus": [r.mean_ms - r.min_ms for r in shown]},
                customdata=[[chart_text(r.name), r.slowest_rank] for r in shown],
                hovertemplate="%{customdata[0]}<br>%{x:.3f} ms; slowest rank "
                              "%{customdata[1]}<extra></extra>")
    fig.update_yaxes(autorange="reversed")
    return fig


def waterfall_columns(diff: Diff) -> list[str]:
    """The waterfall's columns: A, the causes, B. The runs are marked "A:" and "B:" so a
    run named like a cause (`recompute`) or two runs of one name keep their own columns
    (plotly merges equal category names into one column)."""
    return [f"A: {chart_text(diff.a.run)}", *[STAGE_LABELS[s] for s in STAGES],
            f"B: {chart_text(diff.b.run)}"]


def diff_waterfall(diff: Diff) -> go.Figure:
    """MFU of run a, the points each cause moved, MFU of run b."""
    points = diff.mfu_points_by_category
    fig = _figure(f"MFU {diff.a.run} → {diff.b.run}: points by cause", showlegend=False,
                  yaxis_title="% of peak")
    if points is None or diff.a.mfu is None or diff.b.mfu is None:
        return fig
    fig.add_trace(go.Waterfall(
        x=waterfall_columns(diff),
        measure=["absolute", *["relative"] * len(STAGES), "total"],
        y=[100 * diff.a.mfu, *[points.points(s) for s in STAGES], 0.0],
        text=[fixed(100 * diff.a.mfu),
              *[fmt_points(points.points(s), 2, signed=True) for s in STAGES],
              fixed(100 * diff.b.mfu)], textposition="outside",
        decreasing={"marker": {"color": COLORS["exposed_comm"]}},
        increasing={"marker": {"color": COLORS["compute"]}},
        totals={"marker": {"color": COLORS["memory"]}}))
    return fig


def diff_breakdown(diff: Diff) -> go.Figure:
    return stacked_breakdown([diff.a.run, diff.b.run],
                             [diff.a.breakdown_ms, diff.b.breakdown_ms],
                             "Step time by category, side by side")


PLAN_LABELS = 12  # layouts named beside their point (best first); the others in the hover


def plan_scatter(result: PlanResult) -> go.Figure:
    """Candidate layouts: predicted MFU against memory per GPU (best first); the best
    PLAN_LABELS are named beside their points where the name overlaps no other
    (label_positions), every one in the hover."""
    plans = result.plans
    fig = _figure("Candidate layouts", xaxis_title="memory per GPU (GB)",
                  yaxis_title="predicted MFU (%)", showlegend=False)
    names = [f"TP{p.tp} PP{p.pp} DP{p.dp}" for p in plans]
    x, y = [p.memory_gb for p in plans], [100 * p.mfu for p in plans]
    where = label_positions(x, y, names[:PLAN_LABELS])
    where += [None] * (len(names) - len(where))
    fig.add_scatter(
        x=x, y=y, mode="markers+text", customdata=names, hovertemplate=(
            "%{customdata}: %{y:.1f}% MFU, %{x:.2f} GB per GPU<extra></extra>"),
        text=[n if w else "" for n, w in zip(names, where, strict=True)],
        textposition=[w or "top center" for w in where],
        marker={"size": 11, "color": [COLORS["compute"] if p.fits else COLORS["exposed_comm"]
                                      for p in plans]})
    return fig


# Where a point's label may go, in order of preference, as (Plotly textposition, the
# label box's offset from the point in label heights / widths: dx, dy of its centre)
LABEL_PLACES = (("top center", 0.0, 1.0), ("bottom center", 0.0, -1.0),
                ("middle right", 0.6, 0.0), ("middle left", -0.6, 0.0))
CHAR_WIDTH, LABEL_HEIGHT = 0.012, 0.06  # of the plot's width / height, at 1000 px


Box = tuple[float, float, float, float]  # left, bottom, right, top, in 0..1 of each axis


def label_positions(x: Sequence[float], y: Sequence[float],
                    texts: Sequence[str]) -> list[str | None]:
    """A Plotly textposition for each of `texts` (the first len(texts) points, most
    important first), or None where every place would overlap a label placed before it
    or a point: a label is shown only where it can be read. Boxes are estimated in the
    plot's share of each axis (CHAR_WIDTH per character, LABEL_HEIGHT)."""
    points = list(zip(_unit(x), _unit(y), strict=True))
    placed: list[Box] = []
    out: list[str | None] = []
    for i, text in enumerate(texts):
        others = points[:i] + points[i + 1:]
        place, box = _free_place(points[i], len(text), placed, others)
        if box is not None:
            placed.append(box)
        out.append(place)
    return out


def _unit(values: Sequence[float]) -> list[float]:
    """`values` scaled to 0..1 of their range (0.5 each when they are all equal)."""
    lo, hi = min(values, default=0.0), max(values, default=0.0)
    return [(v - lo) / (hi - lo) if hi > lo else 0.5 for v in values]


def _free_place(point: tuple[float, float], chars: int, placed: Sequence[Box],
                others: Sequence[tuple[float, float]]) -> tuple[str | None, Box | None]:
    """The first of LABEL_PLACES where a label of `chars` characters at `point` covers
    no placed label and no other point, with its box; (None, None) when none is free."""
    w, h = CHAR_WIDTH * chars, LABEL_HEIGHT
    for place, dx, dy in LABEL_PLACES:
        cx, cy = point[0] + dx * w, point[1] + dy * h
        box = (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)
        if not any(_overlap(box, b) for b in placed) and not any(
                box[0] < px < box[2] and box[1] < py < box[3] for px, py in others):
            return place, box
    return None, None


def _overlap(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


@dataclass(frozen=True)
class TrendPoint:
    """One run of a job over time: when, MFU and where its step time went."""

    run: str
    when: datetime | None
    mfu: float | None
    step_time_ms: float | None
    breakdown_ms: Breakdown | None
    series: str | None = None  # the job it belongs to; None: the one job of the chart


def _mfu_series(points: Sequence[TrendPoint]
                ) -> list[tuple[str, list[TrendPoint], str]]:
    """(legend label, points, Plotly mode) of the MFU traces: one line per series of two
    runs or more, the runs alone in their series as points of one marker trace."""
    names = list(dict.fromkeys(p.series for p in points))
    if len(names) == 1:
        return [("MFU", list(points), "lines+markers")]
    out = []
    for name in names:
        mine = [p for p in points if p.series == name]
        if len(mine) > 1:
            out.append((f"MFU: {name}, …", mine, "lines+markers"))
    alone = [p for p in points if sum(q.series == p.series for q in points) == 1]
    if alone:
        out.append(("MFU: runs with no other of their job", alone, "markers"))
    return out


def trends(points: Sequence[TrendPoint], title: str) -> go.Figure:
    """MFU over time above the breakdown per run (stacked bars): a line per series (the
    runs of one job), a series of one run a lone point; only one job's MFU is a trend."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=("MFU (%)", "ms per step"))
    x = [chart_text(p.run) for p in points]
    for label, mine, mode in _mfu_series(points):
        fig.add_scatter(x=[chart_text(p.run) for p in mine],
                        y=[None if p.mfu is None else 100 * p.mfu for p in mine], mode=mode,
                        name=chart_text(label), row=1, col=1,
                        marker_color="#333" if mode == "markers" or label == "MFU" else None)
    fig.update_xaxes(categoryorder="array", categoryarray=x)
    for cat in CATEGORIES:
        fig.add_bar(x=x, y=[p.breakdown_ms.ms(cat) if p.breakdown_ms else None
                            for p in points], name=CATEGORY_LABELS[cat],
                    marker_color=COLORS[cat], row=2, col=1)
    fig.update_layout(title=chart_text(title), barmode="stack", height=560, **LAYOUT)
    return fig
