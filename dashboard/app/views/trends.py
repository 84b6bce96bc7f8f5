"""Trends: MFU and the step-time breakdown over time per job, from the nightly history
(`stepscope nightly`); before the first nightly, every run ordered by ingest time."""

from __future__ import annotations

import polars as pl
import streamlit as st

from stepscope.analyzers.results import CATEGORIES, Breakdown
from stepscope.dashboard.app import baseline, charts, data
from stepscope.dashboard.app.charts import TrendPoint
from stepscope.dashboard.app.context import PageContext
from stepscope.dashboard.app.widgets import chart_and_table

TITLE = "Trends"
HEADER = "Trends"


def history_points(frame: pl.DataFrame) -> list[TrendPoint]:
    points = []
    for row in frame.iter_rows(named=True):
        has = all(row.get(f"{c}_ms") is not None for c in CATEGORIES)
        points.append(TrendPoint(
            run=row["run"], when=row["trace_start"] or row["ingested_at"], mfu=row["mfu"],
            step_time_ms=row["step_time_ms"],
            breakdown_ms=Breakdown(**{c: row[f"{c}_ms"] for c in CATEGORIES}) if has else None))
    return points


def run_points(ctx: PageContext) -> list[TrendPoint]:
    """Every run, oldest ingest first, with when it was ingested and its series: runs of
    one job (the same device and model spec, else op shapes per rank: Compare's
    `comparable`) share one, named after its first run."""
    summary = list(data.summary(ctx.config.db).iter_rows(named=True))
    when = {r["run"]: r["ingested_at"] for r in summary}
    devices = {r["run"]: r["devices"] for r in summary}
    oldest_first = list(reversed(ctx.runs))
    series = baseline.same_job_series(oldest_first, devices,
                                      lambda r: data.run_key(ctx.config.db, r))
    job = {run: s[0] for s in series for run in s}
    points = []
    for run in oldest_first:
        report = data.report(ctx.config.db, run, ctx.dtype, ctx.peak_tflops)
        points.append(TrendPoint(run=run, when=when.get(run), mfu=report.mfu.mfu,
                                 step_time_ms=report.step_time_ms,
                                 breakdown_ms=report.breakdown_ms, series=job[run]))
    return points


def render(ctx: PageContext) -> None:
    st.header(HEADER)
    if not ctx.runs:
        st.info("No run yet: upload traces first.")
        return
    history = data.history(ctx.config.db)
    if history:
        job = st.selectbox("Job", sorted(history), key="trend_job")
        points = history_points(history[job])
        title = f"{job}: night over night"
    else:
        st.caption("No nightly history yet (`stepscope nightly` records one): every run, "
                   "oldest ingest first; a line joins only the runs of one job (the same "
                   "device and model spec, else op shapes per rank), the others are points "
                   "of their own series.")
        points = run_points(ctx)
        title = "All runs by ingest time"
    frame = pl.DataFrame([{"run": p.run, "series": p.series,
                           "when (UTC)": None if p.when is None else str(p.when)[:19],
                           "MFU %": None if p.mfu is None else round(100 * p.mfu, 3),
                           "step time (ms)": None if p.step_time_ms is None
                           else round(p.step_time_ms, 3)} for p in points],
                         schema={"run": pl.String, "series": pl.String,
                                 "when (UTC)": pl.String,
                                 "MFU %": pl.Float64, "step time (ms)": pl.Float64})
    chart_and_table(charts.trends(points, title), frame, "trend", "trend")
