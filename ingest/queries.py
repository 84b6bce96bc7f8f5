"""The ingest's SQL files (ingest/sql/*.sql) by name, for ingest/ and the analyzers that
share its queries (e.g. which tables hold runs)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from pathlib import Path

import duckdb

SQL_DIR = Path(__file__).parent / "sql"


@cache
def sql(name: str) -> str:
    """Text of ingest/sql/<name>."""
    return (SQL_DIR / name).read_text()


def split_statements(text: str) -> tuple[str, ...]:
    """The statements of a SQL script, in order (DuckDB's own parser splits them)."""
    return tuple(s.query for s in duckdb.extract_statements(text))


def execute_statements(con: duckdb.DuckDBPyConnection, stmts: tuple[str, ...],
                       params: Mapping[str, object]) -> None:
    """Execute statements in order, binding to each only the `$name` parameters it uses
    (DuckDB rejects unused ones)."""
    for stmt in stmts:
        used = {k: v for k, v in params.items() if f"${k}" in stmt}
        con.execute(stmt, used) if used else con.execute(stmt)


@cache
def statements(name: str) -> tuple[str, ...]:
    """The statements of ingest/sql/<name>, in order."""
    return split_statements(sql(name))


def run_script(con: duckdb.DuckDBPyConnection, name: str, params: Mapping[str, object]) -> None:
    """Execute every statement of ingest/sql/<name>, binding the named parameters it uses."""
    execute_statements(con, statements(name), params)
