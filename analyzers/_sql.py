"""Loading and running the analyzers' SQL files."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import duckdb

SQL_DIR = Path(__file__).parent / "sql"


@cache
def sql(name: str) -> str:
    """Text of analyzers/sql/<name>."""
    return (SQL_DIR / name).read_text()


@cache
def statements(name: str) -> tuple[str, ...]:
    """The statements of a SQL file, in order."""
    return tuple(s.query for s in duckdb.extract_statements(sql(name)))


def install_macros(con: duckdb.DuckDBPyConnection) -> None:
    """Create the analyzers' temporary macros (model_flops, analyzers/sql/flops.sql) in
    this connection; allowed on read-only connections, cheap to repeat."""
    con.execute(sql("flops.sql"))


def run_script(con: duckdb.DuckDBPyConnection, name: str, params: dict[str, Any]) -> None:
    """Execute every statement of a SQL file, binding the named parameters it uses."""
    for stmt in statements(name):
        used = {k: v for k, v in params.items() if f"${k}" in stmt}
        con.execute(stmt, used) if used else con.execute(stmt)
