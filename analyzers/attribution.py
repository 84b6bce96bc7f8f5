"""Step-time attribution (docs/attribution.md): materialized per run, read as frames.

`materialize` runs inside the ingest transaction (it writes recompute_ops,
collective_waits and step_attribution); the readers work on read-only connections.
"""

from __future__ import annotations

import duckdb
import polars as pl

from stepscope.analyzers._sql import install_macros, run_script, sql
from stepscope.analyzers.model import CATEGORIES

__all__ = ["CATEGORIES", "SHORT_GAP_NS", "materialize", "trace_breakdown"]


# An idle gap this short, and this much of a longer gap after the launch call, is launch
# overhead (docs/attribution.md, "Idle: why the GPU waited").
SHORT_GAP_NS = 30_000


def materialize(con: duckdb.DuckDBPyConnection, run: str) -> None:
    """Compute and store the attribution tables of `run` (replacing earlier rows; the
    tables are part of the schema, ingest/sql/schema/derived.sql and the migrations), then
    split its idle time (attribution/idle.sql reads attribution.sql's temp tables)."""
    install_macros(con)
    run_script(con, "attribution/attribution.sql", {"run": run})
    run_script(con, "attribution/idle.sql", {"run": run, "short_gap_ns": SHORT_GAP_NS})


def trace_breakdown(con: duckdb.DuckDBPyConnection, run: str,
                    hta_window: bool = True) -> pl.DataFrame:
    """Whole-trace GPU breakdown per rank with HTA's temporal-breakdown definitions
    (span, busy, compute, non-compute, idle in ns); `hta_window` keeps only GPU ops
    launched before the last step, as HTA's loader does."""
    return con.sql(sql("attribution/trace_breakdown.sql"),
                   params={"run": run, "hta_window": hta_window}).pl()
