"""Step-time attribution (docs/attribution.md): materialized per run, read as frames.

`materialize` runs inside the ingest transaction (it writes recompute_ops,
collective_waits and step_attribution); the readers work on read-only connections.
"""

from __future__ import annotations

import duckdb
import polars as pl

from analyzers._sql import run_script, sql

CATEGORIES = (
    "compute", "recompute", "exposed_comm", "straggler_wait", "bubble", "memory", "idle",
)


def ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(sql("attribution_schema.sql"))


def materialize(con: duckdb.DuckDBPyConnection, run: str) -> None:
    """Compute and store the attribution tables of `run` (replacing earlier rows)."""
    ensure_schema(con)
    run_script(con, "attribution.sql", {"run": run})


def step_attribution(con: duckdb.DuckDBPyConnection, run: str) -> pl.DataFrame:
    """One row per rank and step, times in ns (see step_attribution in docs/schema.md)."""
    return con.sql(
        "SELECT * FROM step_attribution WHERE run = $run ORDER BY rank, step",
        params={"run": run}).pl()
