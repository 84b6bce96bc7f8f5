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

from stepscope.ingest.db import (
    connect_write,
    delete_run_rows,
    ensure_schema,
    insert_by_name,
    run_tables,
)
from stepscope.ingest.errors import DatabaseBusyError, UsageError
from stepscope.ingest.queries import sql

T = TypeVar("T")

def _copy_run(con: duckdb.DuckDBPyConnection, run: str) -> None:
    """Replace `run` in the main database by its rows in the attached `stg` database,
    through DuckDB's relational API (no SQL text names a table)."""
    main_tables = set(run_tables(con))
    for table in run_tables(con, "stg"):
        if table not in main_tables:  # a derived table the shared file does not have yet
            con.table(f"stg.{table}").limit(0).create(table)
    delete_run_rows(con, run)
    for table in run_tables(con, "stg"):
        staged = con.table(f"stg.{table}")
        insert_by_name(con, table, staged.filter(
            duckdb.ColumnExpression("run") == duckdb.ConstantExpression(run)))
    for (create_view,) in con.execute(sql("schema/missing_views.sql")).fetchall():
        con.execute(create_view)  # unqualified names: they resolve in the shared file


def merge_run(staging: str | Path, db: str | Path, run: str) -> None:
    """Copy `run` from the staging database into `db` (replacing a run of that name) in
    one transaction. Raises DatabaseBusyError when another connection holds `db`."""
    con = connect_write(db)
    try:
        ensure_schema(con)
        con.execute("ATTACH $path AS stg (READ_ONLY)", {"path": str(staging)})
        con.execute("BEGIN TRANSACTION")
        try:
            _copy_run(con, run)
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")
    finally:
        con.close()


def delete_run(db: str | Path, run: str) -> None:
    """Remove every row of `run` from every table of `db` in one transaction (the
    nightly `history` keeps its row: it is the job's long-term record)."""
    con = connect_write(db)
    try:
        (known,), = con.execute(sql("runs/exists.sql"), {"run": run}).fetchall()
        if not known:
            raise UsageError(f"{db}: no run named '{run}'")
        con.execute("BEGIN TRANSACTION")
        try:
            delete_run_rows(con, run)
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")
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
