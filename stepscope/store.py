"""Read-only access to a stepscope database, handing back polars DataFrames."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from stepscope.analyzers import run_summary
from stepscope.analyzers.summary import RunSummary, summary_records
from stepscope.ingest import UsageError, connect_read_only, run_names
from stepscope.ingest.sql_files import as_frame

if TYPE_CHECKING:
    import polars as pl

PUBLIC_TABLES = (
    "runs", "ranks", "process_groups", "threads", "cpu_ops", "gpu_ops", "gpu_annotations",
    "steps", "collectives", "recompute_ops", "collective_waits", "collective_exposure",
    "step_attribution", "nccl_sources", "fr_groups", "fr_entries", "nccl_processes",
    "nccl_comms", "nccl_channels", "nccl_rings", "nccl_warnings", "nccl_ops",
)


class Store:
    """A read-only connection to a stepscope DuckDB file."""

    def __init__(self, db: str | Path) -> None:
        self.path = Path(db)
        self.con = connect_read_only(self.path)

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def runs(self) -> list[str]:
        return run_names(self.con)

    def summary(self, run: str | None = None) -> pl.DataFrame:
        """One row per run: ranks, hosts, devices, steps, GPU ops, collectives."""
        if run is not None:
            self.require_run(run)
        return run_summary(self.con, run)

    def summary_records(self, runs: Sequence[str] | None = None) -> list[RunSummary]:
        """The rows of `summary` for these runs (None: every run) as typed records,
        without polars."""
        for run in runs or ():
            self.require_run(run)
        return summary_records(self.con, runs)

    def table(self, name: str, run: str | None = None) -> pl.DataFrame:
        """A whole public table, optionally restricted to one run."""
        if name not in PUBLIC_TABLES:
            raise UsageError(f"unknown table '{name}'; choose from {', '.join(PUBLIC_TABLES)}")
        # through DuckDB's relational API: the name is checked above, no SQL text is built
        rows = self.con.table(name)
        if run is None:
            return as_frame(rows)
        self.require_run(run)
        return as_frame(rows.filter(
            duckdb.ColumnExpression("run") == duckdb.ConstantExpression(run)))

    def sql(self, query: str, params: Mapping[str, object] | None = None) -> pl.DataFrame:
        """Any read-only SQL over the schema in docs/schema.md."""
        return as_frame(self.con.sql(query, params=None if params is None else dict(params)))

    def require_run(self, run: str) -> None:
        known = self.runs()
        if run not in known:
            listing = ", ".join(known) if known else "none yet"
            raise UsageError(f"{self.path}: no run named '{run}' (runs: {listing})")
