"""Schema versions (docs/schema.md, "Versions and migrations"): a file written at version 1
is read read-only through compatible views without being changed, migrates on its next
write, and reports the same numbers as before; an early version-1 layout gains the
columns and tables it lacks. The old files are built in code from the session's sample
database, as the stepscope of that version left them."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import duckdb
import pytest
from identity import assert_close

import stepscope
from stepscope.analyzers.report import build_report
from stepscope.analyzers.results import to_builtins
from stepscope.analyzers.summary import run_summary
from stepscope.ingest import schema
from stepscope.ingest.db import connect_read_only, connect_write

# a GPU run with NCCL groups, a CPU (gloo) run with recompute on the CPU timeline, a pipeline
RUNS = ("straggler", "cpu-ckpt", "deep_pipeline")
ADDED_IN_VERSION_1 = {"runs": ["rank_subset"],
                      "ranks": ["host_source", "node_gpus", "trace_name", "step_source"]}
TABLES_ADDED_IN_VERSION_1 = ("nccl_sources", "fr_groups", "fr_entries", "nccl_processes",
                             "nccl_comms", "nccl_channels", "nccl_rings", "nccl_warnings",
                             "nccl_ops", "collective_exposure", "history")


def _as_version_1(db: Path) -> None:
    """The file as the last stepscope of schema version 1 left it: no registry, version 1."""
    with duckdb.connect(str(db)) as con:
        con.execute("DROP TABLE stepscope_tables")
        con.execute("UPDATE schema_info SET value = '1' WHERE key = 'schema_version'")


def _as_early_version_1(db: Path) -> None:
    """... as the first builds of version 1 left it: before the columns, tables and
    views that later builds added without a version bump."""
    _as_version_1(db)
    with duckdb.connect(str(db)) as con:
        con.execute("DROP VIEW run_nodes")
        con.execute("DROP VIEW complete_steps")
        for table, columns in ADDED_IN_VERSION_1.items():
            for column in columns:
                con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        for table in TABLES_ADDED_IN_VERSION_1:
            con.execute(f"DROP TABLE {table}")


def _reports(db: Path) -> dict[str, object]:
    with stepscope.open(db) as store:
        out: dict[str, object] = {run: to_builtins(build_report(store.con, run))
                                  for run in RUNS}
        out["summary"] = run_summary(store.con).rows()
    return out


def _layout(db: Path) -> tuple[set[tuple[str, str, str]], set[str]]:
    """(table, column, type) of every table column, and the view names, of a file."""
    with duckdb.connect(str(db), read_only=True) as con:
        columns = set(con.execute(
            "SELECT table_name, column_name, data_type FROM duckdb_columns() "
            "WHERE schema_name = 'main' AND NOT internal").fetchall())
        views = {v for (v,) in con.execute(
            "SELECT view_name FROM duckdb_views() WHERE NOT internal AND NOT temporary"
        ).fetchall()}
    return {c for c in columns if c[0] not in views}, views


def _version(db: Path) -> str:
    with duckdb.connect(str(db), read_only=True) as con:
        return str(con.execute("SELECT value FROM schema_info "
                               "WHERE key = 'schema_version'").fetchall()[0][0])


def _digest(db: Path) -> str:
    return hashlib.sha256(db.read_bytes()).hexdigest()


@pytest.fixture
def copy_of_samples(sample_db: Path, tmp_path: Path) -> Path:
    db = tmp_path / "old.duckdb"
    shutil.copyfile(sample_db, db)
    return db


def test_version_1_reads_unchanged_and_migrates_on_write_with_the_same_reports(
        sample_db: Path, copy_of_samples: Path) -> None:
    want = _reports(sample_db)
    db = copy_of_samples
    _as_version_1(db)
    before = _digest(db)
    assert_close(_reports(db), want)                # read-only, through compatible views
    assert _digest(db) == before and _version(db) == "1"
    connect_write(db).close()                       # the next write migrates
    assert _version(db) == str(schema.SCHEMA_VERSION)
    assert_close(_reports(db), want)
    assert _layout(db) == _layout(sample_db)


def test_early_version_1_gains_the_columns_and_tables_it_lacks(
        sample_db: Path, copy_of_samples: Path, tmp_path: Path) -> None:
    """Read-only, the missing columns read NULL and the missing tables are empty; after a
    write the file has the layout of a new one (added columns last), and every report
    and the summary are what they were read-only."""
    db = copy_of_samples
    _as_early_version_1(db)
    before = _digest(db)
    read_only = _reports(db)
    with stepscope.open(db) as store:
        hosts = store.sql("SELECT DISTINCT host_source FROM ranks")["host_source"].to_list()
        nights = store.sql("SELECT count(*) AS n FROM history")["n"].to_list()
    assert hosts == [None] and nights == [0]
    assert _digest(db) == before
    connect_write(db).close()
    assert _version(db) == str(schema.SCHEMA_VERSION)
    new = tmp_path / "new.duckdb"
    connect_write(new).close()
    assert _layout(db) == _layout(new)
    assert_close(_reports(db), read_only)


def test_a_new_file_runs_every_migration_and_owns_every_table(tmp_path: Path) -> None:
    assert schema.pending(None) == schema.MIGRATIONS
    assert schema.pending(1) == schema.MIGRATIONS      # version 1 completes its layout
    assert schema.pending(schema.SCHEMA_VERSION) == ()
    assert [m.version for m in schema.MIGRATIONS] == list(range(1, schema.SCHEMA_VERSION + 1))
    db = tmp_path / "new.duckdb"
    connect_write(db).close()
    assert _version(db) == str(schema.SCHEMA_VERSION)
    with duckdb.connect(str(db), read_only=True) as con:
        owned = dict(con.execute("SELECT table_name, per_run FROM stepscope_tables").fetchall())
        tables = {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert set(owned) == tables
    assert {t for t, per_run in owned.items() if not per_run} == {
        "schema_info", "stepscope_tables", "history"}


def test_a_failed_migration_leaves_the_version_before_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "v1.duckdb"
    connect_write(db).close()
    _as_version_1(db)
    real = schema.run_script

    def fail_after(con: duckdb.DuckDBPyConnection, name: str, params: object) -> None:
        real(con, name, {})
        if name.startswith("migrations/"):
            raise RuntimeError("the migration failed half-way")

    monkeypatch.setattr(schema, "run_script", fail_after)
    with pytest.raises(RuntimeError, match="half-way"):
        connect_write(db)
    assert _version(db) == "1"
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM duckdb_tables() "
                           "WHERE table_name = 'stepscope_tables'").fetchall() == [(0,)]
    monkeypatch.undo()
    connect_read_only(db).close()                    # still readable, then migratable
    connect_write(db).close()
    assert _version(db) == str(schema.SCHEMA_VERSION)
