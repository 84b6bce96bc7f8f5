"""Loading and running the analyzers' SQL files."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import TypeVar, cast

import duckdb
import polars as pl

from stepscope.ingest.queries import execute_statements, split_statements

SQL_DIR = Path(__file__).parent / "sql"

Params = Mapping[str, object]
"""Named query parameters: `$name` in the SQL text -> its value."""

Row = TypeVar("Row")


@cache
def sql(name: str) -> str:
    """Text of analyzers/sql/<name>."""
    return (SQL_DIR / name).read_text()


@cache
def statements(name: str) -> tuple[str, ...]:
    """The statements of a SQL file, in order."""
    return split_statements(sql(name))


def install_macros(con: duckdb.DuckDBPyConnection) -> None:
    """Create the analyzers' temporary macros (model_flops, analyzers/sql/flops.sql) in
    this connection; allowed on read-only connections, cheap to repeat."""
    con.execute(sql("flops.sql"))


def run_script(con: duckdb.DuckDBPyConnection, name: str, params: Params) -> None:
    """Execute every statement of a SQL file, binding the named parameters it uses."""
    execute_statements(con, statements(name), params)


def fetch_rows(con: duckdb.DuckDBPyConnection, name: str, params: Params,
               row: type[Row]) -> list[Row]:
    """The result of analyzers/sql/<name>, one dict per row. `row` is a TypedDict naming the
    query's columns and their types: it documents the query's shape for mypy and stays
    private to the module that fetches it (what crosses a module boundary is a model)."""
    del row  # only there for the type checker
    cur = con.execute(sql(name), dict(params))
    cols = [d[0] for d in cur.description or []]
    return [cast(Row, dict(zip(cols, values, strict=True))) for values in cur.fetchall()]


def as_frame(relation: duckdb.DuckDBPyRelation) -> pl.DataFrame:
    """A query result as a polars DataFrame (duckdb's stubs type `.pl()` loosely)."""
    frame = relation.pl()
    assert isinstance(frame, pl.DataFrame)
    return frame
