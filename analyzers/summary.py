"""Per-run summary of what was ingested: ranks, hosts, devices, steps, ops, collectives."""

from __future__ import annotations

import duckdb
import polars as pl

from analyzers._sql import sql


def run_summary(con: duckdb.DuckDBPyConnection, run: str | None = None) -> pl.DataFrame:
    """One row per run (or only `run`), columns as in analyzers/sql/summary.sql."""
    return con.sql(sql("summary.sql"), params={"run": run}).pl()
