"""The one loader of stepscope's SQL files, for the ingest (ingest/sql/) and the analyzers
(analyzers/sql/, through `SqlFiles`).

Queries live in files grouped by domain, and are named by their path under the layer's
`sql/` folder: `sql("load/hosts.sql")`, `SQL.text("nccl/rings.sql")`. Each file opens with
a comment saying what it reads, what it writes and its `$parameters`; values always go in
as parameters (tests/project/test_sql_files.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar, cast

import duckdb

if TYPE_CHECKING:
    import polars as pl

SQL_DIR = Path(__file__).parent / "sql"

Params = Mapping[str, object]
"""Named query parameters: `$name` in the SQL text -> its value."""

Row = TypeVar("Row")


@cache
def _read(path: Path) -> str:
    return path.read_text()


@cache
def _parser() -> duckdb.DuckDBPyConnection:
    """An in-memory connection that only parses: no worker or I/O threads. The module's
    `duckdb.extract_statements` would open DuckDB's default connection, whose 10 threads
    each take address space (under `ulimit -v` one could abort the process in glibc)."""
    from stepscope.ingest.db import connect  # db reads its SQL through this module

    return connect(config={"threads": 1, "async_threads": 0})


@cache
def split_statements(text: str) -> tuple[str, ...]:
    """The statements of a SQL script, in order (DuckDB's own parser splits them)."""
    return tuple(s.query for s in _parser().extract_statements(text))


_COMMENT = re.compile(r"--[^\n]*")
_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


@cache
def parameter_names(stmt: str) -> frozenset[str]:
    """The `$name` parameters a statement uses (a script's header comment, which DuckDB
    keeps with its first statement, does not count)."""
    return frozenset(_PARAM.findall(_COMMENT.sub("", stmt)))


def execute_statements(con: duckdb.DuckDBPyConnection, stmts: tuple[str, ...],
                       params: Params) -> None:
    """Execute statements in order, binding to each only the `$name` parameters it uses
    (DuckDB rejects unused ones)."""
    for stmt in stmts:
        names = parameter_names(stmt)
        used = {k: v for k, v in params.items() if k in names}
        con.execute(stmt, used) if used else con.execute(stmt)


class SqlFiles:
    """The SQL files under one layer's `sql/` folder, by domain-qualified name
    ('nccl/rings.sql'), each read once per process."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, name: str) -> Path:
        return self.root / name

    def text(self, name: str) -> str:
        """Text of <root>/<name>."""
        return _read(self.path(name))

    def statements(self, name: str) -> tuple[str, ...]:
        """The statements of <root>/<name>, in order."""
        return split_statements(self.text(name))

    def run_script(self, con: duckdb.DuckDBPyConnection, name: str, params: Params) -> None:
        """Execute every statement of <root>/<name>, binding the named parameters it uses."""
        execute_statements(con, self.statements(name), params)

    def fetch_rows(self, con: duckdb.DuckDBPyConnection, name: str, params: Params,
                   row: type[Row]) -> list[Row]:
        """The result of <root>/<name>, one dict per row. `row` is a TypedDict naming the
        query's columns and their types: it documents the query's shape for mypy and
        stays private to the module that fetches it (what crosses a module boundary is a
        model)."""
        del row  # only there for the type checker
        cur = con.execute(self.text(name), dict(params))
        cols = [d[0] for d in cur.description or []]
        return [cast(Row, dict(zip(cols, values, strict=True))) for values in cur.fetchall()]


INGEST_SQL = SqlFiles(SQL_DIR)
"""The ingest's own SQL files (ingest/sql/)."""


def sql(name: str) -> str:
    """Text of ingest/sql/<name>."""
    return INGEST_SQL.text(name)


def statements(name: str) -> tuple[str, ...]:
    """The statements of ingest/sql/<name>, in order."""
    return INGEST_SQL.statements(name)


def run_script(con: duckdb.DuckDBPyConnection, name: str, params: Params) -> None:
    """Execute every statement of ingest/sql/<name>, binding the named parameters it uses."""
    INGEST_SQL.run_script(con, name, params)


def as_frame(relation: duckdb.DuckDBPyRelation) -> pl.DataFrame:
    """A query result as a polars DataFrame (duckdb's stubs type `.pl()` loosely).
    polars loads here, not with this module: the ingest's workers never need it."""
    import polars as pl

    frame = relation.pl()
    assert isinstance(frame, pl.DataFrame)
    return frame


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """BEGIN ... COMMIT around the block; ROLLBACK when it raises (Ctrl-C included)."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
