"""Step-time attribution (docs/attribution.md): materialized per run, read as frames.

`materialize` runs inside the ingest transaction (it writes recompute_ops,
collective_waits and step_attribution); the readers work on read-only connections.
"""

from __future__ import annotations

import duckdb
import polars as pl

from stepscope.analyzers._sql import install_macros, run_script, sql
from stepscope.analyzers.model import CATEGORIES

__all__ = ["CATEGORIES", "materialize", "trace_breakdown"]


def materialize(con: duckdb.DuckDBPyConnection, run: str) -> None:
    """Compute and store the attribution tables of `run` (replacing earlier rows); the
    tables are part of the schema (ingest/sql/schema/derived.sql)."""
    install_macros(con)
    run_script(con, "attribution/attribution.sql", {"run": run})


def trace_breakdown(con: duckdb.DuckDBPyConnection, run: str,
                    hta_window: bool = True) -> pl.DataFrame:
    """Whole-trace GPU breakdown per rank with HTA's temporal-breakdown definitions
    (span, busy, compute, non-compute, idle in ns); `hta_window` keeps only GPU ops
    launched before the last step, as HTA's loader does."""
    return con.sql(sql("attribution/trace_breakdown.sql"),
                   params={"run": run, "hta_window": hta_window}).pl()
