"""Runs as a whole, for the layers above: which runs a database holds (names, and the
tokens the dashboard caches on) and renaming the files a run lists.

Readers take an open connection (`connect_read_only`); `relabel_files` opens the file
for writing and changes it in one transaction.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from stepscope.ingest.db import connect_write
from stepscope.ingest.sql_files import run_script, sql, transaction


def run_names(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Every run of the database, sorted by name (ingest/sql/runs/names.sql)."""
    return [r[0] for r in con.execute(sql("runs/names.sql")).fetchall()]


def run_tokens(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """run -> when it was ingested (text), newest first (ingest/sql/runs/tokens.sql): a
    re-ingested run gets a new token, so caches keyed on it recompute."""
    return dict(con.execute(sql("runs/tokens.sql")).fetchall())


def run_exists(con: duckdb.DuckDBPyConnection, run: str) -> bool:
    (n,), = con.execute(sql("runs/exists.sql"), {"run": run}).fetchall()
    return bool(n)


def relabel_files(db: str | Path, run: str, prefix: str, label: str) -> None:
    """In the file names `run` stores (its sources, failed files, each rank's and each
    NCCL file's source_file), replace `prefix` by `label`: the dashboard's uploads are
    read from a temporary folder and listed as 'upload:NAME' (ingest/sql/runs/relabel.sql)."""
    con = connect_write(db)
    try:
        with transaction(con):
            run_script(con, "runs/relabel.sql", {"prefix": prefix, "label": label, "run": run})
    finally:
        con.close()


__all__ = ["relabel_files", "run_exists", "run_names", "run_tokens"]
