"""DuckDB's memory while the report runs (docs/scale.md, "Memory").

A connection's default DuckDB limit is most of the machine, and DuckDB keeps table
blocks cached and query intermediates in memory up to it, so on a large job the
report's process grows with the ranks. Within `bounded` the connection's limit is
lowered (the report: REPORT_MEMORY_LIMIT; the critical-path graph build:
GRAPH_MEMORY_LIMIT): DuckDB evicts cached blocks and spills joins, sorts and temporary
tables to its temp folder instead. A query that cannot fit even so (DuckDB's
OutOfMemoryException) makes the whole bounded part run again at the limit before, so a
bound costs time on a job too big for it, never the result.
`$STEPSCOPE_MEMORY_LIMIT` (ingest.db) replaces the bounds: the connection's limit holds.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import duckdb

from stepscope.analyzers._sql import sql
from stepscope.ingest.db import MEMORY_ENV

T = TypeVar("T")

REPORT_MEMORY_LIMIT = 256 << 20  # bytes: the report's queries and DuckDB's block cache
GRAPH_MEMORY_LIMIT = 128 << 20   # bytes: critical_path/graph.sql (its temporary tables)


@contextmanager
def memory_limit(con: duckdb.DuckDBPyConnection, limit: int) -> Iterator[None]:
    """Within the block, the connection's DuckDB memory limit is `limit` bytes (unless
    $STEPSCOPE_MEMORY_LIMIT is set); the limit before is restored afterwards."""
    if os.environ.get(MEMORY_ENV):
        yield
        return
    (before,), = con.execute(sql("report/memory_limit_get.sql")).fetchall()
    con.execute(sql("report/memory_limit.sql"), {"limit": f"{limit}B"})
    try:
        yield
    finally:
        con.execute(sql("report/memory_limit.sql"), {"limit": before})


def bounded(con: duckdb.DuckDBPyConnection, limit: int, work: Callable[[], T]) -> T:
    """work() with DuckDB's memory limit at `limit` bytes; when a query of it does not fit
    there, work() again at the limit before (see the module docstring)."""
    try:
        with memory_limit(con, limit):
            return work()
    except duckdb.OutOfMemoryException:
        return work()
