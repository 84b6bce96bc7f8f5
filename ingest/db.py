"""Opening the stepscope DuckDB file: one writer, or any number of read-only readers.

DuckDB locks the file per process: one process may write it, or any number may read it,
never both at once. So a reader also locks out a writer while it is open, and a writer
locks out readers; both sides get DatabaseBusyError (exit 2), never a wait or partial
data. Readers therefore close as soon as they are done (docs/schema.md, "Concurrency").
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import duckdb

from stepscope.ingest.errors import DatabaseBusyError, UsageError
from stepscope.ingest.queries import sql

SCHEMA_VERSION = "1"
SCHEMA_SQL = Path(__file__).parent / "sql" / "schema/core.sql"
NCCL_SCHEMA_SQL = Path(__file__).parent / "sql" / "schema/nccl.sql"
DEFAULT_DB = "stepscope.duckdb"


def _lock_hint(db: Path, exc: duckdb.Error) -> UsageError:
    text = str(exc)
    # another process holds the write lock, or this process has the file open with the
    # other mode (read-only vs read-write): both clear once that connection closes
    if "lock" in text.lower() or "different configuration" in text.lower():
        return DatabaseBusyError(
            f"{db}: the database is locked by another stepscope process "
            "(an ingest in progress?); wait for it to finish or use another --db")
    return UsageError(f"{db}: cannot open the database ({text.splitlines()[0]})")


def connect_write(db: str | Path) -> duckdb.DuckDBPyConnection:
    """Open (creating if needed) the database for writing."""
    path = Path(db)
    if path.parent and not path.parent.exists():
        raise UsageError(f"{path}: the folder {path.parent} does not exist")
    try:
        return duckdb.connect(str(path), config=_memory_config())
    except duckdb.Error as exc:
        raise _lock_hint(path, exc) from None


MEMORY_ENV = "STEPSCOPE_MEMORY_LIMIT"
DEFAULT_MEMORY_LIMIT = "1GB"


def _memory_config() -> dict[str, str | bool | int | float | list[str]]:
    """DuckDB's memory limit for the writer ($STEPSCOPE_MEMORY_LIMIT, default 1GB): past
    it, DuckDB evicts cached blocks and spills to a temp folder beside the database, so
    the ingest's memory does not grow with the number of ranks (docs/scale.md)."""
    return {"memory_limit": os.environ.get(MEMORY_ENV) or DEFAULT_MEMORY_LIMIT}


def connect_read_only(db: str | Path) -> duckdb.DuckDBPyConnection:
    """Open an existing database read-only. Any number of readers share the file, but
    while this connection is open no process can write it (close it promptly)."""
    path = Path(db)
    if not path.is_file():
        raise UsageError(f"{path}: no stepscope database here; run `stepscope ingest` first")
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        raise _lock_hint(path, exc) from None
    if "runs" not in table_names(con):
        con.close()
        raise UsageError(f"{path}: not a stepscope database (it has no runs table)")
    return con


def ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create missing tables; record the schema version."""
    con.execute(SCHEMA_SQL.read_text())
    con.execute(NCCL_SCHEMA_SQL.read_text())
    con.execute(sql("schema/version_set.sql"), {"v": SCHEMA_VERSION})


def table_names(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The database's own tables (ingest/sql/schema/table_names.sql): what a database written
    by an older stepscope, or by the ingest alone, has."""
    return {r[0] for r in con.execute(sql("schema/table_names.sql")).fetchall()}


def run_tables(con: duckdb.DuckDBPyConnection, database: str | None = None) -> list[str]:
    """Tables with a `run` column in the attached `database` (None: the main one), read
    from the catalog (ingest/sql/schema/run_tables.sql): the ingest's own tables and the
    ones the analyzers derive, which the ingest does not know by name."""
    return [r[0] for r in con.execute(sql("schema/run_tables.sql"), {"db": database}).fetchall()]


def delete_run_rows(con: duckdb.DuckDBPyConnection, run: str) -> None:
    """Delete `run` from every table with a `run` column (the nightly `history` keeps its
    rows), in the caller's transaction.

    The one statement stepscope builds as text: DuckDB takes no table name as a query
    parameter and has no relational delete, and the tables are known only from the
    catalog. The names come from the catalog and are quoted; the run is a parameter."""
    for table in run_tables(con):
        con.execute(f"DELETE FROM {quote_identifier(table)} WHERE run = $run", {"run": run})


def insert_by_name(con: duckdb.DuckDBPyConnection, table: str, rows: duckdb.DuckDBPyRelation,
                   constants: Mapping[str, object] | None = None) -> None:
    """Append `rows` to `table`, matching columns by name (case-insensitively, as DuckDB
    matches identifiers) like INSERT ... BY NAME: each of the table's columns takes the
    value in `constants`, else the column of `rows` of that name, else NULL (a column
    default is not applied). Built with DuckDB's relational API, so no SQL text names the
    table. A column of `rows` the table lacks raises duckdb.BinderException, as the SQL
    statement does."""
    given = {name.lower(): value for name, value in (constants or {}).items()}
    staged = {name.lower(): name for name in rows.columns}
    target = con.table(table)
    extra = set(staged) - {name.lower() for name in target.columns} - set(given)
    if extra:
        raise duckdb.BinderException(f"table {table} has no column(s) {sorted(extra)}")
    rows.select(*(
        duckdb.ConstantExpression(given[name.lower()]).cast(kind).alias(name)
        if name.lower() in given
        else duckdb.ColumnExpression(staged[name.lower()]).alias(name)
        if name.lower() in staged
        else duckdb.ConstantExpression(None).cast(kind).alias(name)
        for name, kind in zip(target.columns, target.types, strict=True)
    )).insert_into(table)


def quote_identifier(name: str) -> str:
    """A table or column name as a quoted SQL identifier (embedded quotes doubled), for
    names read from a database: they are never spliced into SQL text as they are."""
    return '"' + name.replace('"', '""') + '"'
