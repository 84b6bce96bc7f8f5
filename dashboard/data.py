"""What the pages read, cached per database file and run, on short read-only connections.

Cache keys are (database file, run, the run's `ingested_at`): re-ingesting or deleting a
run changes its token, so its pages recompute while every other run stays cached. A
connection is opened per cache miss and closed at once, so the dashboard never holds the
file while an ingest (another tab, a nightly CLI job) wants to write it. When a writer
holds the file, `run_tokens` answers with the last tokens it saw — the pages keep showing
the last committed state from the cache — and a cache miss raises DatabaseBusyError,
which the app shows as "database busy, retrying".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import duckdb
import polars as pl
import streamlit as st

from analyzers import run_summary
from analyzers.report import build_report
from ingest import DatabaseBusyError, connect_read_only

T = TypeVar("T")
TOKENS_SQL = "SELECT run, CAST(ingested_at AS VARCHAR) FROM runs ORDER BY ingested_at DESC, run"
_LAST_TOKENS: dict[str, dict[str, str]] = {}


@contextmanager
def read_only(db: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection that is closed as soon as the block ends."""
    con = connect_read_only(db)
    try:
        yield con
    finally:
        con.close()


def with_connection(db: Path, work: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
    with read_only(db) as con:
        return work(con)


def run_tokens(db: Path) -> dict[str, str]:
    """run -> its ingested_at, newest first; {} when there is no database yet. While a
    writer holds the file: the tokens last seen (DatabaseBusyError if none)."""
    key = str(db)
    if not db.is_file():
        _LAST_TOKENS.pop(key, None)
        return {}
    try:
        tokens = dict(with_connection(db, lambda con: con.execute(TOKENS_SQL).fetchall()))
    except DatabaseBusyError:
        if key in _LAST_TOKENS:
            return _LAST_TOKENS[key]
        raise
    _LAST_TOKENS[key] = tokens
    return tokens


def forget_tokens(db: Path) -> None:
    """Drop the remembered tokens (after this process wrote the database)."""
    _LAST_TOKENS.pop(str(db), None)


@st.cache_resource(max_entries=256, show_spinner=False)
def _report(db: str, run: str, token: str, dtype: str | None) -> Any:
    return with_connection(Path(db), lambda con: build_report(con, run, dtype=dtype))


@st.cache_resource(max_entries=16, show_spinner=False)
def _summary(db: str, tokens: tuple[tuple[str, str], ...]) -> pl.DataFrame:
    return with_connection(Path(db), run_summary)


def report(db: Path, run: str, dtype: str | None = None) -> Any:
    """The report model of one run (cached on db, run, its token and the peak dtype)."""
    token = run_tokens(db).get(run)
    if token is None:
        raise KeyError(run)
    return _report(str(db), run, token, dtype)


def summary(db: Path) -> pl.DataFrame:
    """One row per run (analyzers.run_summary), cached until any run changes."""
    tokens = tuple(sorted(run_tokens(db).items()))
    return _summary(str(db), tokens)
