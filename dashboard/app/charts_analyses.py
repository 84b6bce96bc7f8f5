"""Plotly figures of the roofline, memory and all_to_all views: pure functions over the
report's sections (analyzers.results.Roofline, MemorySection, AllToAll)."""

from __future__ import annotations

import math

import plotly.graph_objects as go

from stepscope.analyzers.results import AllToAll, MemorySection, Roofline, RoofRow
from stepscope.dashboard.app.charts import LAYOUT
from stepscope.dashboard.render.format import chart_text, numbered_names

KIND_COLORS = {"gemm": "#2e8b57", "attention": "#1f77b4", "conv": "#9467bd",
               "elementwise": "#ff7f0e", "normalization": "#d62728"}


def _figure(title: str, **layout: object) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(title=chart_text(title), **{**LAYOUT, **layout})
    return fig


def roofline_plot(section: Roofline) -> go.Figure:
    """The roof min(P, I x B) on log axes and each kernel at (intensity, TFLOP/s); ops
    without FLOPs (elementwise) sit on the memory roof's slope at their GB/s."""
    fig = _figure("Kernels against the roofline", xaxis_title="FLOP per byte (log)",
                  yaxis_title="TFLOP/s (log)", xaxis_type="log", yaxis_type="log")
    peak, hbm = section.peak_flops_per_gpu, section.hbm_gbs
    rows = [r for r in section.kernels if r.intensity]
    if peak and hbm:
        lo = min([r.intensity for r in rows if r.intensity] + [1.0]) / 4
        hi = max([r.intensity for r in rows if r.intensity] + [4 * peak / (hbm * 1e9)]) * 4
        xs = [lo * (hi / lo) ** (i / 60) for i in range(61)]
        fig.add_scatter(x=xs, y=[min(peak, x * hbm * 1e9) / 1e12 for x in xs], mode="lines",
                        name="roof", line={"color": "#616161"})
    for kind in sorted({r.kind for r in rows}):
        mine = [r for r in rows if r.kind == kind and r.tflops]
        fig.add_scatter(x=[r.intensity for r in mine], y=[r.tflops for r in mine],
                        mode="markers", name=kind, text=[chart_text(r.name) for r in mine],
                        marker={"color": KIND_COLORS.get(kind), "size": [
                            6 + 20 * math.sqrt(r.time_share) for r in mine]},
                        hovertemplate="%{text}<br>%{x:.1f} FLOP/B, %{y:.1f} TFLOP/s"
                                      "<extra></extra>")
    return fig


def roof_shares(rows: tuple[RoofRow, ...], title: str) -> go.Figure:
    """Share of the roof per row (kind or kernel), longest time first."""
    # numbered as in the table under it, so two kernels whose names start alike stay two
    # bars (Plotly merges bars of one label); the full name is in the hover
    labelled = [(label, r) for label, r in zip(numbered_names([r.name for r in rows], 40),
                                               rows, strict=True)
                if r.roof_share is not None][:20]
    fig = _figure(title, xaxis_title="share of the roof", xaxis_tickformat=".0%",
                  yaxis_autorange="reversed", height=120 + 24 * len(labelled))
    fig.add_bar(orientation="h", x=[r.roof_share for _, r in labelled],
                y=[chart_text(label) for label, _ in labelled],
                customdata=[chart_text(r.name) for _, r in labelled],
                marker_color=[KIND_COLORS.get(r.kind, "#8c564b") for _, r in labelled],
                hovertemplate="%{customdata}: %{x:.1%}<extra></extra>")
    return fig


def efficiency_parts(section: Roofline) -> go.Figure:
    """The MFU waterfall's kernel-efficiency stage by op: points lost per part."""
    parts = section.kernel_efficiency
    fig = _figure("Kernel efficiency by op (MFU points)", xaxis_title="MFU points",
                  yaxis_autorange="reversed", height=120 + 26 * len(parts))
    fig.add_bar(orientation="h", x=[p.points for p in parts],
                y=[chart_text(p.label[:70]) for p in parts], marker_color="#8c564b",
                hovertemplate="%{y}: %{x:.2f}<extra></extra>")
    return fig


def memory_per_rank(section: MemorySection) -> go.Figure:
    """Peak allocated and reserved per rank (GB), the device's memory as a line."""
    ranks = sorted(section.ranks, key=lambda r: r.rank)
    fig = _figure("Peak device memory per rank", barmode="overlay", yaxis_title="GB",
                  xaxis_title="rank")
    x = [r.rank for r in ranks]
    if any(r.peak_reserved_bytes is not None for r in ranks):
        fig.add_bar(name="peak reserved", x=x,
                    y=[(r.peak_reserved_bytes or 0) / 1e9 for r in ranks],
                    marker_color="#b8b8b8")
    fig.add_bar(name="peak allocated", x=x, y=[r.peak_allocated_bytes / 1e9 for r in ranks],
                marker_color="#1f77b4")
    if any(r.device_memory_bytes for r in ranks):
        fig.add_scatter(name="device memory", x=x, mode="lines",
                        y=[(r.device_memory_bytes or 0) / 1e9 for r in ranks],
                        line={"color": "#d62728", "dash": "dash"})
    return fig


def a2a_per_rank(section: AllToAll) -> go.Figure:
    """all_to_all bytes received per rank and step (MB), the mean as a line."""
    ranks = sorted(section.ranks, key=lambda r: r.rank)
    fig = _figure("all_to_all bytes received per rank and step", yaxis_title="MB",
                  xaxis_title="rank")
    x = [r.rank for r in ranks]
    fig.add_bar(name="received", x=x, y=[r.received_bytes / 1e6 for r in ranks],
                marker_color="#ff7f0e")
    if ranks:
        mean = sum(r.received_bytes for r in ranks) / len(ranks) / 1e6
        fig.add_scatter(name="mean", x=x, y=[mean] * len(x), mode="lines",
                        line={"color": "#616161", "dash": "dash"})
    return fig
