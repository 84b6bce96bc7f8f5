"""Short writes to a shared database: merge a run ingested elsewhere, delete a run.

The single-writer story (docs/schema.md, "Concurrency"): DuckDB lets one process write a
file, or any number of processes read it. A full ingest parses for seconds to minutes;
holding the write lock that long would lock every reader out. So an ingest that shares
its database with readers (the dashboard) writes into a private *staging* file first and
then calls `merge_run`, which copies the finished run into the shared file in one short
transaction: readers see either the old run or the new one, never half of it, and are
locked out only for the copy.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import duckdb

from stepscope.ingest.db import connect_write, delete_run_rows, insert_by_name
from stepscope.ingest.errors import DatabaseBusyError, UsageError
from stepscope.ingest.runs import run_exists
from stepscope.ingest.schema import owned_run_tables
from stepscope.ingest.sql_files import transaction

T = TypeVar("T")


def _copy_run(con: duckdb.DuckDBPyConnection, run: str) -> None:
    """Replace `run` in the main database by its rows in the attached `stg` database, in
    every table stepscope owns whose rows belong to a run (both files are at the current
    schema: the shared one was migrated when opened), through DuckDB's relational API (no
    SQL text names a table)."""
    delete_run_rows(con, run)
    for table in owned_run_tables(con):
        staged = con.table(f"stg.{table}")
        insert_by_name(con, table, staged.filter(
            duckdb.ColumnExpression("run") == duckdb.ConstantExpression(run)))


def merge_run(staging: str | Path, db: str | Path, run: str) -> None:
    """Copy `run` from the staging database into `db` (replacing a run of that name) in
    one transaction. Raises DatabaseBusyError when another connection holds `db`."""
    con = connect_write(db)
    try:
        con.execute("ATTACH $path AS stg (READ_ONLY)", {"path": str(staging)})
        with transaction(con):
            _copy_run(con, run)
    finally:
        con.close()


def delete_run(db: str | Path, run: str) -> None:
    """Remove every row of `run` from the tables stepscope owns in one transaction (the
    nightly `history` keeps its row: it is the job's long-term record; the user's own
    tables are never touched)."""
    con = connect_write(db)
    try:
        if not run_exists(con, run):
            raise UsageError(f"{db}: no run named '{run}'")
        with transaction(con):
            delete_run_rows(con, run)
    finally:
        con.close()


def retry_busy(action: Callable[[], T], timeout_s: float = 60.0, interval_s: float = 0.5,
               on_busy: Callable[[int], None] | None = None) -> T:
    """Run `action`, retrying while the database is busy (another writer holds it), up to
    `timeout_s`; `on_busy(attempt)` lets a caller say "database busy, retrying"."""
    deadline = time.monotonic() + timeout_s
    attempt = 0
    while True:
        try:
            return action()
        except DatabaseBusyError:
            attempt += 1
            if time.monotonic() + interval_s > deadline:
                raise
            if on_busy is not None:
                on_busy(attempt)
            time.sleep(interval_s)


__all__ = ["delete_run", "merge_run", "retry_busy"]
