"""Per-run summary of what was ingested: ranks, hosts, devices, steps, ops, collectives."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import duckdb
import polars as pl

from analyzers._sql import as_frame, sql


def run_summary(con: duckdb.DuckDBPyConnection, run: str | None = None) -> pl.DataFrame:
    """One row per run (or only `run`), columns as in analyzers/sql/summary.sql.

    A database written by `ingest.ingest` alone has no derived tables: they are then
    created empty in the connection's temporary catalog (allowed on read-only ones), so
    the attributed columns are NULL."""
    present = {r[0] for r in con.execute(sql("table_names.sql")).fetchall()}
    if "step_attribution" not in present:
        # the same DDL in the connection's temporary catalog: DuckDB has no statement-level
        # switch for it, so the keywords of our own schema file are rewritten (no value is
        # spliced into SQL text)
        con.execute(sql("attribution_schema.sql").replace(
            "CREATE TABLE IF NOT EXISTS", "CREATE TEMP TABLE IF NOT EXISTS").replace(
            "CREATE OR REPLACE VIEW", "CREATE OR REPLACE TEMP VIEW"))
    return as_frame(con.sql(sql("summary.sql"), params={"run": run}))


@dataclass(frozen=True)
class RunSummary:
    """One row of `run_summary`: the columns of analyzers/sql/summary.sql, in order."""

    run: str
    status: str | None
    world_size: int | None
    n_ranks: int | None
    hosts: int
    devices: str | None
    steps: int
    median_step_ms: float | None
    gpu_ops: int
    compute_kernels: int
    comm_kernels: int
    memory_ops: int
    collectives: int
    p2p_ops: int
    collective_types: str | None
    process_groups: int
    failed_files: int | None
    attributed_step_ms: float | None       # NULL before attribution ran
    compute_share: float | None
    top_loss: str | None                   # the non-compute category costing most
    top_loss_share: float | None
    ingested_at: datetime | None


def summary_rows(frame: pl.DataFrame) -> list[RunSummary]:
    """The rows of a `run_summary` frame as typed records."""
    return [RunSummary(**row) for row in frame.iter_rows(named=True)]
