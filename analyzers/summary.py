"""Per-run summary of what was ingested: ranks, hosts, devices, steps, ops, collectives."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
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
    ingested = fetch_rows(con, "summary/runs.sql", params, IngestedRow)
    attributed = {row["run"]: row
                  for row in fetch_rows(con, "summary/attributed.sql", params, AttributedRow)}
    return [_record(row, attributed.get(row["run"])) for row in ingested]


def _record(ingested: IngestedRow, attributed: AttributedRow | None) -> RunSummary:
    """A RunSummary of a run's rows (summary/runs.sql, summary/attributed.sql); a run
    never attributed has None in the attributed columns. A query whose columns are not
    RunSummary's fails here (TypeError), not with a silently missing column."""
    a = attributed
    return RunSummary(**ingested,
                      attributed_step_ms=a["attributed_step_ms"] if a else None,
                      compute_share=a["compute_share"] if a else None,
                      top_loss=a["top_loss"] if a else None,
                      top_loss_share=a["top_loss_share"] if a else None)


def _runs_param(runs: Sequence[str] | None) -> dict[str, object]:
    return {"runs": None if runs is None else list(runs)}


FROM_ATTRIBUTED = {"query": "attributed"}   # a field's metadata: from summary/attributed.sql


@dataclass(frozen=True)
class RunSummary:
    """One row of `run_summary`, in order: the one list of the summary's columns. The
    fields with FROM_ATTRIBUTED metadata come from summary/attributed.sql, the others from
    summary/runs.sql (tests/analyzers/test_relational.py checks both queries against them)."""

    run: str
    status: str | None
    world_size: int | None
    n_ranks: int | None
    hosts: int | None                      # NULL: no rank's trace names its host
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
    # NULL before attribution ran
    attributed_step_ms: float | None = field(metadata=FROM_ATTRIBUTED)
    compute_share: float | None = field(metadata=FROM_ATTRIBUTED)
    # the non-compute category costing most, NULL when none costs anything
    top_loss: str | None = field(metadata=FROM_ATTRIBUTED)
    top_loss_share: float | None = field(metadata=FROM_ATTRIBUTED)
    ingested_at: datetime | None


ATTRIBUTED = tuple(f.name for f in fields(RunSummary) if f.metadata.get("query") == "attributed")
"""The columns of summary/attributed.sql besides `run`."""


class IngestedRow(TypedDict):
    """A row of summary/runs.sql: RunSummary's fields but the attributed ones, in order
    (tests/analyzers/test_relational.py holds the query, this and RunSummary together)."""
    run: str
    status: str | None
    world_size: int | None
    n_ranks: int | None
    hosts: int | None
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


class AttributedRow(TypedDict):
    """A row of summary/attributed.sql: `run` and the ATTRIBUTED fields."""
    run: str
    attributed_step_ms: float | None
    compute_share: float | None
    top_loss: str | None
    top_loss_share: float | None


def summary_rows(frame: pl.DataFrame) -> list[RunSummary]:
    """The rows of a `run_summary` frame as typed records."""
    return [RunSummary(**row) for row in frame.iter_rows(named=True)]
