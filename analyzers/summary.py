"""Per-run summary of what was ingested: ranks, hosts, devices, steps, ops, collectives."""

from __future__ import annotations

import duckdb
import polars as pl

from analyzers._sql import sql


def run_summary(con: duckdb.DuckDBPyConnection, run: str | None = None) -> pl.DataFrame:
    """One row per run (or only `run`), columns as in analyzers/sql/summary.sql.

    A database written by `ingest.ingest` alone has no derived tables: they are then
    created empty in the connection's temporary catalog (allowed on read-only ones), so
    the attributed columns are NULL."""
    present = {r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE NOT temporary").fetchall()}
    if "step_attribution" not in present:
        con.execute(sql("attribution_schema.sql").replace(
            "CREATE TABLE IF NOT EXISTS", "CREATE TEMP TABLE IF NOT EXISTS").replace(
            "CREATE OR REPLACE VIEW", "CREATE OR REPLACE TEMP VIEW"))
    return con.sql(sql("summary.sql"), params={"run": run}).pl()
