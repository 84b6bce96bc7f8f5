"""Loading the analyzers' SQL files."""

from __future__ import annotations

from functools import cache
from pathlib import Path

SQL_DIR = Path(__file__).parent / "sql"


@cache
def sql(name: str) -> str:
    """Text of analyzers/sql/<name>."""
    return (SQL_DIR / name).read_text()
