"""The database's schema version and how a file gets there (docs/schema.md, "Versions and
migrations").

The schema is the sum of an ordered list of migrations, as in sqlite-utils: migration N
brings a database to version N, runs once, in order, in its own transaction, and records
N in `schema_info` in that same transaction. A new file runs them all; a file at an older
version runs those after its version when it is opened for writing. Migration 1 creates
version 1's tables and is idempotent, because stepscope builds added columns and tables
while the version stayed 1: a file stamped 1 runs it again to complete its layout.

Before anything is written, `classify` tells what the file is: new (no tables), a
stepscope database of a known version, or something else — a DuckDB file of other
tables, or one written by a newer stepscope — which is refused (UsageError, exit 2).

A read-only connection cannot migrate: an older file is read through temporary views
that give it the current layout (missing columns NULL, missing tables empty), in that
connection only; the next write migrates the file itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb

from stepscope.ingest.errors import UsageError
from stepscope.ingest.sql_files import run_script, sql, transaction


@dataclass(frozen=True)
class Migration:
    """One step of the schema: the ingest/sql/ scripts that bring a database to `version`."""

    version: int
    scripts: tuple[str, ...]
    what: str


MIGRATIONS = (
    Migration(1, ("schema/core.sql", "schema/nccl.sql", "schema/derived.sql",
                  "schema/history.sql"),
              "the ingest's, the NCCL, the derived and the history tables"),
    Migration(2, ("migrations/0002_owned_tables.sql",),
              "stepscope_tables, the registry of the tables stepscope owns"),
    Migration(3, ("migrations/0003_comm_graphs.sql",),
              "communication kernels' library, op and role; CUDA/HIP graph ids and links; "
              "the step window's source"),
    Migration(4, ("migrations/0004_nccl_gpus.sql",),
              "NCCL logs per GPU: busId, nvmlDev, GPUDirect RDMA status; communicators' "
              "useGdr; channels' GPU; WARN lines counted"),
    Migration(5, ("migrations/0005_layout_idle.sql",),
              "ranks.host_note; the idle split (step_attribution.idle_*_ns, idle_gaps, "
              "host_activity); run_nodes whose nodes x gpus_per_node is the world size"),
    Migration(6, ("migrations/0006_memory_splits.sql",),
              "memory_events (the allocator's [memory] events); all_to_all split sizes"),
    Migration(7, ("migrations/0007_exposure_claims.sql",),
              "collective_exposure.exposed_claim_ns: the exposed time each collective "
              "claims in full (the planner's calibration)"),
    Migration(8, ("migrations/0008_clock_offsets.sql",),
              "clock_offsets (each host's clock from the matched collectives' ends) and "
              "the view rank_clocks"),
    Migration(9, ("migrations/0009_bounded_steps.sql",),
              "complete_steps: a step needs both ends (the first Optimizer.step# step, "
              "which starts at the trace's start, is not complete)"),
    Migration(10, ("migrations/0010_capture_steps.sql",),
              "complete_steps: a step that captures a CUDA/HIP graph (window_source "
              "'capture') is not complete where its rank has other complete steps"),
    Migration(11, ("migrations/0011_nccl_bench.sql",),
              "nccl_bench and nccl_bench_summary: nccl-tests result tables and average "
              "bus bandwidth read from the logs"),
    Migration(12, ("migrations/0012_profiler_config.sql",),
              "ranks.profiler_config: the profiler's settings the trace records "
              "(record_shapes, profile_memory, ...)"),
    Migration(13, ("migrations/0013_rank_ranges.sql",),
              "ranks.distributed_info: a process group's long, evenly stepping rank list "
              "stored as a range (the export puts the list back)"),
)
SCHEMA_VERSION = MIGRATIONS[-1].version
"""The version this stepscope writes (and the newest it reads)."""


def classify(con: duckdb.DuckDBPyConnection, path: str | Path) -> int | None:
    """The schema version of the database behind `con`, or None for a new (empty) file.
    Raises UsageError for a file stepscope must not touch: other tables and no stepscope
    version, or a version newer than this stepscope's."""
    (n_objects, has_info, tables), = con.execute(sql("catalog/state.sql")).fetchall()
    version = _recorded_version(con) if has_info else None
    if version is None:
        if n_objects == 0:
            return None
        listed = ", ".join((tables or [])[:4]) + (", ..." if len(tables or []) > 4 else "")
        raise UsageError(
            f"{path}: not a stepscope database (a DuckDB file with other tables: "
            f"{listed or 'views only'}); stepscope writes only to its own databases: "
            "use another --db, e.g. a new file name")
    (unkeyed,), = con.execute(sql("catalog/missing_keys.sql")).fetchall()
    if unkeyed:
        raise UsageError(
            f"{path}: not a stepscope database (a DuckDB file whose tables "
            f"{', '.join(unkeyed[:4])} are named like stepscope's but lack their keys); "
            "stepscope writes only to its own databases: use another --db, e.g. a new "
            "file name")
    if version > SCHEMA_VERSION:
        raise UsageError(
            f"{path}: written by a newer stepscope (schema version {version}; this one "
            f"reads versions 1 to {SCHEMA_VERSION}); upgrade stepscope "
            "(pip install -U stepscope)")
    return version


def _recorded_version(con: duckdb.DuckDBPyConnection) -> int | None:
    (text,), = con.execute(sql("catalog/version.sql")).fetchall()
    # only plain ASCII digits, as stepscope writes it: int() also took ' 13', '1_3', '+13'
    if not isinstance(text, str) or not (text.isascii() and text.isdigit()):
        return None
    version = int(text)
    return version if version >= 1 else None


def pending(version: int | None) -> tuple[Migration, ...]:
    """The migrations a database at `version` (None: new) runs, in order. Version 1
    re-runs migration 1, whose statements are all idempotent (see the module doc)."""
    start = 0 if version is None or version == 1 else version
    return tuple(m for m in MIGRATIONS if m.version > start)


def migrate(con: duckdb.DuckDBPyConnection, version: int | None) -> None:
    """Bring the database from `version` (None: new) to SCHEMA_VERSION, one transaction
    per migration; a failed migration rolls back and leaves the version before it."""
    for step in pending(version):
        with transaction(con):
            for script in step.scripts:
                run_script(con, script, {})
            con.execute(sql("catalog/version_set.sql"), {"v": str(step.version)})


Layout = tuple[tuple[str, str, str | None, str | None, int | None, str | None], ...]
"""catalog/layout.sql's rows: (kind, name, column_name, data_type, position, definition)."""


def layout(con: duckdb.DuckDBPyConnection) -> Layout:
    """The tables' columns and the views' definitions of the database behind `con`."""
    return tuple(con.execute(sql("catalog/layout.sql")).fetchall())


def read_as_current(con: duckdb.DuckDBPyConnection, current: Layout) -> None:
    """Make an older database, open read-only, look like the current schema in this
    connection (catalog/compat_views.sql): temporary views shadow its tables where a
    column or a table is missing, and the current views are created over them."""
    rows = [dict(zip(("kind", "name", "column_name", "data_type", "position", "definition"),
                     row, strict=True)) for row in current]
    for (stmt,) in con.execute(sql("catalog/compat_views.sql"), {"layout": rows}).fetchall():
        con.execute(stmt)  # built by the SQL file from the catalog, names quoted there


def check_tables(con: duckdb.DuckDBPyConnection, path: str | Path, current: Layout) -> None:
    """Refuse a database at the current version that lacks one of the current schema's
    tables (dropped by hand, or a copy cut short): every query would otherwise end in
    DuckDB's CatalogException."""
    present = {row[1] for row in layout(con) if row[0] == "table"}
    missing = sorted({row[1] for row in current if row[0] == "table"} - present)
    if missing:
        raise UsageError(
            f"{path}: a damaged stepscope database (table(s) {', '.join(missing[:4])}"
            f"{', ...' if len(missing) > 4 else ''} missing); ingest the traces again into "
            "a new --db")


def owned_run_tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The owned tables whose rows belong to a run (catalog/owned_run_tables.sql)."""
    return [r[0] for r in con.execute(sql("catalog/owned_run_tables.sql")).fetchall()]


__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "Migration", "check_tables", "classify", "layout",
           "migrate",
           "owned_run_tables", "pending", "read_as_current"]
