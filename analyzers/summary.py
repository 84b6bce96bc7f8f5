"""Per-run summary of what was ingested: ranks, hosts, devices, steps, ops, collectives."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import TYPE_CHECKING, TypedDict

import duckdb

from stepscope.analyzers._sql import as_frame, fetch_rows, sql

if TYPE_CHECKING:
    import polars as pl


def run_summary(con: duckdb.DuckDBPyConnection, run: str | None = None) -> pl.DataFrame:
    """One row per run (or only `run`), columns as the fields of RunSummary.

    The attributed columns (summary/attributed.sql) are NULL for a run the analyzers have
    not attributed (a database written by `ingest.ingest` alone has empty derived
    tables)."""
    params = _runs_param(None if run is None else [run])
    ingested = as_frame(con.sql(sql("summary/runs.sql"), params=params))
    attributed = as_frame(con.sql(sql("summary/attributed.sql"), params=params))
    return ingested.join(attributed, on="run", how="left", maintain_order="left").select(
        f.name for f in fields(RunSummary))


def summary_records(con: duckdb.DuckDBPyConnection,
                    runs: Sequence[str] | None = None) -> list[RunSummary]:
    """The rows of `run_summary` for `runs` (None: every run) as typed records, in run
    order, without polars: what `stepscope ingest` prints once its runs are in (polars
    takes longer to import than the summary takes to compute)."""
    params = _runs_param(runs)
    ingested = fetch_rows(con, "summary/runs.sql", params, _IngestedRow)
    attributed = {row["run"]: row
                  for row in fetch_rows(con, "summary/attributed.sql", params, _AttributedRow)}
    return [_record(row, attributed.get(row["run"])) for row in ingested]


class _IngestedRow(TypedDict):
    """A row of summary/runs.sql."""

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
    ingested_at: datetime | None


class _AttributedRow(TypedDict):
    """A row of summary/attributed.sql (only for attributed runs)."""

    run: str
    attributed_step_ms: float | None
    compute_share: float | None
    top_loss: str | None
    top_loss_share: float | None


def _record(ingested: _IngestedRow, attributed: _AttributedRow | None) -> RunSummary:
    """A RunSummary of a run's rows; a run never attributed has None in those columns."""
    return RunSummary(
        **ingested,
        attributed_step_ms=attributed["attributed_step_ms"] if attributed else None,
        compute_share=attributed["compute_share"] if attributed else None,
        top_loss=attributed["top_loss"] if attributed else None,
        top_loss_share=attributed["top_loss_share"] if attributed else None)


def _runs_param(runs: Sequence[str] | None) -> dict[str, object]:
    return {"runs": None if runs is None else list(runs)}


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
