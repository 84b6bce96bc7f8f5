"""Per-run summary of what was ingested: ranks, hosts, devices, steps, ops, collectives."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime

import duckdb
import polars as pl

from stepscope.analyzers._sql import as_frame, sql


def run_summary(con: duckdb.DuckDBPyConnection, run: str | None = None) -> pl.DataFrame:
    """One row per run (or only `run`), columns as the fields of RunSummary.

    The attributed columns (summary/attributed.sql) are NULL for a run the analyzers have
    not attributed (a database written by `ingest.ingest` alone has empty derived
    tables)."""
    ingested = as_frame(con.sql(sql("summary/runs.sql"), params={"run": run}))
    attributed = as_frame(con.sql(sql("summary/attributed.sql"), params={"run": run}))
    return ingested.join(attributed, on="run", how="left", maintain_order="left").select(
        f.name for f in fields(RunSummary))


@dataclass(frozen=True)
class RunSummary:
    """One row of `run_summary` (summary/runs.sql, then summary/attributed.sql), in order."""

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
