"""The nightly history of a job: one row per (job, run), written by `stepscope nightly`,
read by `stepscope history` and the dashboard's Trends page (docs/schema.md, `history`).

History rows outlive the runs' traces: `prune` (`--keep N`) deletes old runs' tables so
the database stays bounded over months of nights, and leaves their history rows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime

import duckdb
import polars as pl

from stepscope.analyzers._sql import as_frame, sql
from stepscope.ingest.db import delete_run_rows


@dataclass(frozen=True)
class HistoryRow:
    """One night of a job, as stored in the `history` table (column order)."""

    job: str
    run: str
    trace_start: datetime | None
    ingested_at: datetime
    status: str
    checks: str
    checks_failed: int
    world_size: int | None
    n_ranks: int | None
    device: str | None
    step_time_ms: float | None
    mfu: float | None
    hfu: float | None
    compute_ms: float | None
    recompute_ms: float | None
    exposed_comm_ms: float | None
    straggler_wait_ms: float | None
    bubble_ms: float | None
    memory_ms: float | None
    idle_ms: float | None
    largest_loss: str | None
    largest_loss_ms: float | None
    baseline: str | None
    mfu_delta_points: float | None
    step_time_delta_ms: float | None
    top_cause: str | None


@dataclass(frozen=True)
class HistoryNight(HistoryRow):
    """One row of `read_history`: the stored night plus its change night over night."""

    mfu_change_points: float | None
    step_time_change_ms: float | None
    in_db: bool                      # the run's traces are still in the database


def history_nights(frame: pl.DataFrame) -> list[HistoryNight]:
    """The rows of a `read_history` frame as typed nights, oldest first."""
    return [HistoryNight(**row) for row in frame.iter_rows(named=True)]


def largest_loss(breakdown_ms: dict[str, float]) -> tuple[str | None, float | None]:
    """The non-compute category costing most time per step (None when all are zero)."""
    losses = [(ms, cat) for cat, ms in breakdown_ms.items() if cat != "compute" and ms > 0]
    if not losses:
        return None, None
    ms, cat = max(losses)
    return cat, ms


def trace_start(con: duckdb.DuckDBPyConnection, run: str) -> datetime | None:
    """When the run's traces start (UTC, naive), from the earliest event of any rank."""
    (ns,), = con.execute(sql("history/trace_start.sql"), {"run": run}).fetchall()
    if ns is None:
        return None
    return datetime.fromtimestamp(ns / 1e9, UTC).replace(tzinfo=None)


def record(con: duckdb.DuckDBPyConnection, row: HistoryRow) -> None:
    """Insert the night, replacing the row of a re-run of the same (job, run)."""
    con.execute(sql("history/record.sql"), asdict(row))


def previous_run(con: duckdb.DuckDBPyConnection, job: str, run: str,
                 start: datetime | None) -> str | None:
    """The job's latest earlier night whose traces are still in the database."""
    if start is None:
        return None
    rows = con.execute(sql("history/previous.sql"),
                       {"job": job, "run": run, "start": start}).fetchall()
    return rows[0][0] if rows else None


def prune(con: duckdb.DuckDBPyConnection, job: str, keep: int) -> list[str]:
    """Delete every table row of the job's runs but the newest `keep` (history rows
    stay); returns the pruned runs, oldest last."""
    runs = [r[0] for r in con.execute(sql("history/kept.sql"), {"job": job}).fetchall()][keep:]
    for run in runs:
        delete_run_rows(con, run)  # the owned per-run tables; history is not one
    if runs:
        con.execute("CHECKPOINT")
    return runs


def read_history(con: duckdb.DuckDBPyConnection, job: str,
                 last: int | None = None) -> pl.DataFrame:
    """The job's nights, oldest first, with `mfu_change_points` and
    `step_time_change_ms` night over night; the last `last` rows when given."""
    frame = as_frame(con.sql(sql("history/nights.sql"), params={"job": job}))
    return frame.tail(last) if last is not None else frame


def jobs(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [r[0] for r in con.execute(sql("history/jobs.sql")).fetchall()]
