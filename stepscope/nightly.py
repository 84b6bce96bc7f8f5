"""One night of a production job: ingest, report, diff against the baseline, check
thresholds, record history, prune old runs, write report.json / .md / .html.

The library behind `stepscope nightly` (docs/nightly.md); the CLI only parses arguments
and prints. `run_nightly` raises UsageError / NothingIngestedError like `ingest`.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import duckdb

from stepscope import ingest_run
from stepscope.analyzers.builders import diff_reports
from stepscope.analyzers.context import ReportOptions, run_context
from stepscope.analyzers.flops.model_spec import ModelSpec
from stepscope.analyzers.nightly import history
from stepscope.analyzers.nightly.checks import Threshold, evaluate
from stepscope.analyzers.nightly.night import (
    build_nightly,
    history_row,
    iso_utc,
    with_pruned,
)
from stepscope.analyzers.report import report_from_context
from stepscope.analyzers.results import BaselineInfo, NightlyReport
from stepscope.dashboard.render.html_nightly import nightly_html
from stepscope.dashboard.render.nightly import nightly_json, nightly_markdown
from stepscope.ingest import (
    DEFAULT_DB,
    TraceFileError,
    UsageError,
    connect_read_only,
    read_trace,
    run_names,
)
from stepscope.ingest.db import connect_write
from stepscope.ingest.errors import quote_name
from stepscope.ingest.fingerprint import fingerprint
from stepscope.ingest.sources import TraceFile, collect_traces
from stepscope.outputs import OutputError, check_folder_name, check_out_dir, write_files

DEFAULT_OUT_ROOT = Path("stepscope-nightly")


@dataclass(frozen=True)
class NightlyOptions:
    """What `stepscope nightly` was asked to do (defaults as on the command line)."""

    paths: Sequence[str | Path]
    job: str
    db: str | Path = DEFAULT_DB
    run: str | None = None
    out_dir: Path | None = None
    baseline: str = "previous"  # "previous" | "none" | a run in the database
    thresholds: list[Threshold] = field(default_factory=list)
    allow_missing: bool = False
    spec: ModelSpec | None = None
    peak_tflops: float | None = None
    dtype: str | None = None  # None: inferred from the traces
    keep: int | None = None
    jobs: int | None = None
    comm_kernels: Path | None = None  # --comm-kernels: patterns before the bundled table
    read_files: Sequence[Path] = ()  # other files it reads (--model): never an output


@dataclass(frozen=True)
class NightlyOutcome:
    """The night's model and the files written for it; `replaced` when a run of that
    name (the same night, re-run) was in the database and is replaced."""

    night: NightlyReport
    out_dir: Path
    files: list[Path]
    replaced: bool = False
    warnings: tuple[str, ...] = ()  # the ingest's (ingest.writer.IngestResult.warnings)


def _check_options(opts: NightlyOptions) -> None:
    """Usage errors before anything is ingested."""
    check_folder_name("--job", opts.job, "it names runs and folders")
    if opts.run is not None:
        check_folder_name("--run", opts.run, "it names the run and, without --out-dir, "
                          "the reports' folder")
    if opts.keep is not None and opts.keep < 1:
        raise UsageError(f"--keep {opts.keep}: keep at least 1 run (the one just ingested)")
    if opts.baseline not in ("previous", "none"):
        _check_baseline_run(opts)


def _check_baseline_run(opts: NightlyOptions) -> None:
    if opts.baseline == opts.run:
        raise UsageError("--baseline is the run being ingested; pick an earlier run")
    if not Path(opts.db).is_file():
        raise UsageError(f"--baseline '{opts.baseline}': {opts.db} does not exist yet")
    con = connect_read_only(opts.db)
    try:
        known = set(run_names(con))
    finally:
        con.close()
    if opts.baseline not in known:
        raise UsageError(f"--baseline '{opts.baseline}': no such run in {opts.db} "
                         f"(runs: {', '.join(sorted(known)) or 'none yet'}); use "
                         "'previous' or 'none'")


def _first_start(files: Sequence[TraceFile]) -> datetime | None:
    for tf in files:
        try:
            tables = read_trace(tf.path, tf.display)
        except TraceFileError:
            continue
        ns = tables.summary.trace_start_ns
        if ns is not None:
            return datetime.fromtimestamp(ns / 1e9, UTC).replace(tzinfo=None)
    return None


def night_identity(paths: Sequence[str | Path]) -> tuple[datetime | None, str]:
    """(the traces' start, the fingerprint of their content: ingest.fingerprint)."""
    with collect_traces(paths) as traces:
        files = [tf.path for tf in traces.files] + [f.path for f in traces.nccl]
        return _first_start(traces.files), fingerprint(files)


def default_run_name(job: str, paths: Sequence[str | Path]) -> str:
    """'<job>-<YYYYmmddTHHMMSSZ>-<fingerprint>' from the traces' own start time and
    content: re-running the same night gives the same name, so it replaces rather than
    duplicates; a different night that started in the same second gets its own name."""
    start, content = night_identity(paths)
    when = f"{start:%Y%m%dT%H%M%SZ}" if start is not None else "undated"
    return f"{job}-{when}-{content}"


def _baseline(con: duckdb.DuckDBPyConnection, run: str,
              selected_by: Literal["previous", "--baseline"]) -> BaselineInfo:
    return BaselineInfo(run=run, selected_by=selected_by,
                        trace_start=iso_utc(history.trace_start(con, run)))


def _choose_baseline(con: duckdb.DuckDBPyConnection, opts: NightlyOptions, run: str,
                     start: datetime | None) -> tuple[BaselineInfo | None, str | None]:
    if opts.baseline == "none":
        return None, "no baseline requested (--baseline none)"
    if opts.baseline != "previous":
        return _baseline(con, opts.baseline, "--baseline"), None
    prev = history.previous_run(con, opts.job, run, start)
    if prev is None:
        return None, (f"first night of job '{opts.job}' in this database: no earlier run "
                      "to compare with")
    return _baseline(con, prev, "previous"), None


def _analyse(con: duckdb.DuckDBPyConnection, opts: NightlyOptions, run: str,
             status: Literal["complete", "partial"],
             failures: list[tuple[str, str]]) -> tuple[NightlyReport, history.HistoryRow]:
    """The night's model and its history row."""
    start = history.trace_start(con, run)
    ingested_at = datetime.now(UTC).replace(tzinfo=None, microsecond=0)
    options = ReportOptions(spec=opts.spec, peak_tflops=opts.peak_tflops, dtype=opts.dtype)
    ctx = run_context(con, run, options)
    report = report_from_context(ctx)
    baseline, note = _choose_baseline(con, opts, run, start)
    diff = None
    if baseline is not None:
        base_ctx = run_context(con, baseline.run, options)
        diff = diff_reports(base_ctx, report_from_context(base_ctx), ctx, report).diff
    checks = evaluate(opts.thresholds, report, diff, opts.allow_missing)
    night = build_nightly(
        job=opts.job, run=run, trace_start=start, ingested_at=ingested_at, status=status,
        failed_files=failures, report=report, baseline=baseline, baseline_note=note,
        diff=diff, checks=checks)
    return night, history_row(night, start, ingested_at)


REPORT_FILES = ("report.json", "report.md", "report.html")


def write_outputs(night: NightlyReport, out_dir: Path) -> list[Path]:
    """report.json, report.md and report.html of the night in `out_dir`, each written
    atomically (stepscope.outputs)."""
    texts = (nightly_json(night), nightly_markdown(night), nightly_html(night))
    return write_files(out_dir, dict(zip(REPORT_FILES, texts, strict=True)))


def _prepare_out_dir(out_dir: Path) -> list[Path]:
    """Make `out_dir`; the folders it made, deepest first (_unmake removes them when the
    night is not ingested: an empty --out-dir was left behind)."""
    made = [p for p in (out_dir, *out_dir.parents) if not os.path.lexists(p)]
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        hint = ("; give a shorter --job or --run, or an --out-dir" if
                exc.errno == errno.ENAMETOOLONG else "")
        raise UsageError(f"--out-dir {quote_name(out_dir)}: cannot create it "
                         f"({exc.strerror}){hint}") from None
    return made


def _unmake(made: list[Path]) -> None:
    """Remove the folders _prepare_out_dir made, each only if still empty."""
    for folder in made:
        try:
            folder.rmdir()
        except OSError:
            return


def run_nightly(opts: NightlyOptions) -> NightlyOutcome:
    """Ingest one night of `opts.job` and write its reports (see the module doc)."""
    _check_options(opts)
    run = opts.run or default_run_name(opts.job, opts.paths)
    out_dir = opts.out_dir or DEFAULT_OUT_ROOT / run
    read = [*opts.read_files, *([opts.comm_kernels] if opts.comm_kernels else [])]
    check_out_dir(out_dir, db=opts.db, inputs=[*opts.paths, *read], names=REPORT_FILES)
    made = _prepare_out_dir(out_dir)
    try:
        result = ingest_run(opts.paths, db=opts.db, run=run, jobs=opts.jobs,
                            comm_kernels=opts.comm_kernels)
    except BaseException:
        _unmake(made)
        raise
    con = connect_write(opts.db)
    try:
        status: Literal["complete", "partial"] = "partial" if result.failures else "complete"
        night, row = _analyse(con, opts, run, status, list(result.failures))
        history.record(con, row)
        if opts.keep is not None:
            night = with_pruned(night, history.prune(con, opts.job, opts.keep))
    finally:
        con.close()
    try:
        files = write_outputs(night, out_dir)
    except OutputError as exc:
        raise OutputError(f"night '{run}' is recorded in {quote_name(opts.db)} (history "
                          f"committed), but its reports were not written: {exc}; free "
                          "space or pick another --out-dir and re-run the night "
                          "(it replaces itself)") from None
    return NightlyOutcome(night, out_dir, files, replaced=result.replaced,
                          warnings=tuple(result.warnings))
