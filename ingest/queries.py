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


@cache
def statements(name: str) -> tuple[str, ...]:
    """The statements of ingest/sql/<name>, in order."""
    return tuple(s.query for s in duckdb.extract_statements(sql(name)))


def run_script(con: duckdb.DuckDBPyConnection, name: str, params: Mapping[str, object]) -> None:
    """Execute every statement of ingest/sql/<name>, binding the named parameters it uses."""
    for stmt in statements(name):
        used = {k: v for k, v in params.items() if f"${k}" in stmt}
        con.execute(stmt, used) if used else con.execute(stmt)
