"""What the pages read, cached per database file and run, on short read-only connections.

Cache keys are (database file, run, the run's `ingested_at`): re-ingesting or deleting a
run changes its token, so its pages recompute while every other run stays cached. A
connection is opened per cache miss and closed at once, so the dashboard never holds the
file while an ingest (another tab, a nightly CLI job) wants to write it. When a writer
holds the file, `run_tokens` answers with the last tokens it saw — the pages keep showing
the last committed state from the cache — and a cache miss raises DatabaseBusyError,
which the app shows as "database busy, retrying".
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import duckdb
import polars as pl
import streamlit as st

from stepscope.analyzers import run_summary
from stepscope.analyzers.builders import RunDiff, calibrate_run, diff_runs
from stepscope.analyzers.comm.collectives import op_times
from stepscope.analyzers.comparable import gpus_per_node, model_spec, op_shapes
from stepscope.analyzers.context import ReportOptions
from stepscope.analyzers.critical_path.analysis import Analysis, analysis_of, check
from stepscope.analyzers.critical_path.whatif import WhatIf
from stepscope.analyzers.detail import (
    KernelRow,
    RankStepGrid,
    StepTimeline,
    rank_step_grid,
    step_timeline,
    top_kernels,
)
from stepscope.analyzers.export import export_chrome
from stepscope.analyzers.nightly.history import jobs as history_jobs
from stepscope.analyzers.nightly.history import read_history
from stepscope.analyzers.report import build_report
from stepscope.analyzers.results import (
    Calibration,
    CriticalPath,
    Diff,
    Expected,
    Report,
    WhatIfResult,
)
from stepscope.dashboard.app.baseline import RunKey
from stepscope.dashboard.render.html_report import report_html
from stepscope.dashboard.render.report import report_markdown
from stepscope.ingest import DatabaseBusyError, UsageError, connect_read_only
from stepscope.ingest import run_tokens as read_tokens

T = TypeVar("T")
# The Timeline's bins across the longest window: at most the chart's plot width in pixels
# (about 550 at a 1,000 px page), so that no drawn rectangle is thinner than a pixel (the
# browser would widen it to one and overstate it: issue 45)
TIMELINE_PIXELS = 500
_LAST_TOKENS: dict[str, dict[str, str]] = {}


@contextmanager
def read_only(db: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection that is closed as soon as the block ends."""
    con = connect_read_only(db)
    try:
        yield con
    finally:
        con.close()


def with_connection(db: Path, work: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
    with read_only(db) as con:
        return work(con)


def run_tokens(db: Path) -> dict[str, str]:
    """run -> its ingested_at, newest first; {} when there is no database yet. While a
    writer holds the file: the tokens last seen (DatabaseBusyError if none)."""
    key = str(db)
    if not db.is_file():
        _LAST_TOKENS.pop(key, None)
        return {}
    try:
        tokens = with_connection(db, read_tokens)
    except DatabaseBusyError:
        if key in _LAST_TOKENS:
            return _LAST_TOKENS[key]
        raise
    _LAST_TOKENS[key] = tokens
    return tokens


def forget_tokens(db: Path) -> None:
    """Drop the remembered tokens (after this process wrote the database)."""
    _LAST_TOKENS.pop(str(db), None)


@st.cache_resource(max_entries=256, show_spinner=False)
def _report(db: str, run: str, token: str, dtype: str | None,
            peak_tflops: float | None = None) -> Report:
    return with_connection(Path(db), lambda con: build_report(
        con, run, dtype=dtype, peak_tflops=peak_tflops))


@st.cache_resource(max_entries=16, show_spinner=False)
def _summary(db: str, tokens: tuple[tuple[str, str], ...]) -> pl.DataFrame:
    return with_connection(Path(db), run_summary)


def report(db: Path, run: str, dtype: str | None = None,
           peak_tflops: float | None = None) -> Report:
    """The report model of one run (cached on db, run, its token and the peak: dtype and
    TFLOP/s, as `stepscope report --dtype --peak-tflops`)."""
    return _report(str(db), run, _token(db, run), dtype, peak_tflops)


@st.cache_resource(max_entries=32, show_spinner=False)
def _report_files(db: str, run: str, token: str, dtype: str | None,
                  peak_tflops: float | None) -> tuple[str, str]:
    rep = _report(db, run, token, dtype, peak_tflops)
    return report_html(rep), report_markdown(rep)


def report_files(db: Path, run: str, dtype: str | None = None,
                 peak_tflops: float | None = None) -> tuple[str, str]:
    """The whole report of a run as `stepscope report --format html` and `--format md`
    write it (the same renderers): (html, markdown)."""
    return _report_files(str(db), run, _token(db, run), dtype, peak_tflops)


def summary(db: Path) -> pl.DataFrame:
    """One row per run (analyzers.run_summary), cached until any run changes."""
    tokens = tuple(sorted(run_tokens(db).items()))
    return _summary(str(db), tokens)


def _token(db: Path, run: str) -> str:
    token = run_tokens(db).get(run)
    if token is None:
        raise KeyError(run)
    return token


@st.cache_resource(max_entries=64, show_spinner=False)
def _grid(db: str, run: str, token: str) -> RankStepGrid:
    return with_connection(Path(db), lambda con: rank_step_grid(con, run))


def grid(db: Path, run: str) -> RankStepGrid:
    """The rank x step grid of a run (analyzers.detail)."""
    return _grid(str(db), run, _token(db, run))


@st.cache_resource(max_entries=64, show_spinner=False)
def _timeline(db: str, run: str, token: str, step: int, ranks: tuple[int, ...]
              ) -> StepTimeline:
    return with_connection(Path(db), lambda con: step_timeline(con, run, step, ranks,
                                                               pixels=TIMELINE_PIXELS))


def timeline(db: Path, run: str, step: int, ranks: tuple[int, ...]) -> StepTimeline:
    """One step of the given ranks as bounded attribution segments, drawn by time where
    they are thinner than one of TIMELINE_PIXELS across the chart."""
    return _timeline(str(db), run, _token(db, run), step, tuple(sorted(ranks)))


def trace_export(db: Path, run: str, step: int, ranks: tuple[int, ...],
                 path: CriticalPath | None) -> bytes:
    """The `stepscope export` file of one step of the given ranks (docs/timeline.md), for
    the Timeline's download button: at most MAX_TIMELINE_RANKS ranks and one step."""
    with tempfile.TemporaryDirectory(prefix="stepscope-export-") as tmp:
        out = Path(tmp) / "trace.json"
        with_connection(db, lambda con: export_chrome(con, run, out, ranks=ranks,
                                                      steps=[step], path=path))
        return out.read_bytes()


@st.cache_resource(max_entries=64, show_spinner=False)
def _kernels(db: str, run: str, token: str) -> tuple[KernelRow, ...]:
    return with_connection(Path(db), lambda con: top_kernels(con, run, limit=50))


def kernels(db: Path, run: str) -> tuple[KernelRow, ...]:
    return _kernels(str(db), run, _token(db, run))


@st.cache_resource(max_entries=64, show_spinner=False)
def _op_times(db: str, run: str, token: str) -> dict[str, float]:
    return with_connection(Path(db), lambda con: op_times(con, run))


@st.cache_resource(max_entries=64, show_spinner=False)
def _run_key(db: str, run: str, token: str) -> RunKey:
    return with_connection(Path(db), lambda con: RunKey(
        model_spec(con, run), op_shapes(con, run), gpus_per_node(con, run)))


def run_key(db: Path, run: str) -> RunKey:
    """What says whether another run is the same job: its model spec and op shapes."""
    return _run_key(str(db), run, _token(db, run))


def ops(db: Path, run: str) -> dict[str, float]:
    """ms per rank and step of each kernel (or leaf CPU op) name of a run."""
    return _op_times(str(db), run, _token(db, run))


@st.cache_resource(max_entries=64, show_spinner=False)
def _diff(db: str, a: str, token_a: str, b: str, token_b: str, dtype: str | None,
          peak_tflops: float | None = None) -> RunDiff:
    options = ReportOptions(dtype=dtype, peak_tflops=peak_tflops)
    return with_connection(Path(db), lambda con: diff_runs(con, a, con, b, options))


def diff(db: Path, a: str, b: str, dtype: str | None = None,
         peak_tflops: float | None = None) -> Diff:
    """The diff model of two runs: what `stepscope diff A B` renders (analyzers.builders)."""
    return _diff(str(db), a, _token(db, a), b, _token(db, b), dtype, peak_tflops).diff


def _calibrate(con: duckdb.DuckDBPyConnection, run: str, dtype: str | None
               ) -> tuple[Calibration | None, str]:
    """The run's calibration (analyzers.builders.calibrate_run), or why there is none."""
    try:
        built = calibrate_run(con, run, ReportOptions(dtype=dtype))
    except UsageError as exc:
        return None, str(exc).removeprefix(f"plan --from {run}: ")
    return built.calibration, f"model spec: {built.spec_source}"


@st.cache_resource(max_entries=32, show_spinner=False)
def _calibration(db: str, run: str, token: str, dtype: str | None
                 ) -> tuple[Calibration | None, str]:
    return with_connection(Path(db), lambda con: _calibrate(con, run, dtype))


def calibration(db: Path, run: str, dtype: str | None = None
                ) -> tuple[Calibration | None, str]:
    """The planner's calibration on a run (analyzers.plan.calibrate), with where its model
    spec came from, or None and the one-line reason (no model.json, CPU-only run, ...)."""
    return _calibration(str(db), run, _token(db, run), dtype)


def expected(db: Path, a: str, b: str, dtype: str | None = None
             ) -> tuple[Expected | None, str | None]:
    """Run B as the planner expects it from run A (the diff's `expected`), or the reason
    there is none."""
    built = _diff(str(db), a, _token(db, a), b, _token(db, b), dtype)
    return built.diff.expected, built.why_no_expected


@st.cache_resource(max_entries=16, show_spinner=False)
def _history(db: str, tokens: tuple[tuple[str, str], ...]) -> dict[str, pl.DataFrame]:
    def read(con: duckdb.DuckDBPyConnection) -> dict[str, pl.DataFrame]:
        return {job: read_history(con, job) for job in history_jobs(con)}
    return with_connection(Path(db), read)


def history(db: Path) -> dict[str, pl.DataFrame]:
    """The nightly history of every job ({} before the first `stepscope nightly`)."""
    return _history(str(db), tuple(sorted(run_tokens(db).items())))


@st.cache_resource(max_entries=8, show_spinner=False)
def _path_graph(db: str, run: str, token: str) -> Analysis:
    return with_connection(Path(db), lambda con: analysis_of(con, run))


def whatif(db: Path, run: str, spec: WhatIf) -> WhatIfResult:
    """A what-if on the run's dependency graph (the graph is read once per run and kept;
    UsageError when the what-if names nothing in the run)."""
    token = _token(db, run)
    graph = _path_graph(str(db), run, token)
    check(graph, spec)
    return graph.whatif(spec, _report(str(db), run, token, None).step_time_ms)
