"""DuckDB's memory while the report runs (docs/scale.md, "Memory").

A connection's default DuckDB limit is most of the machine, and DuckDB keeps table
blocks cached and query intermediates in memory up to it, so on a large job the
report's process grows with the ranks. Within a `Bound` the connection's limit is
lowered (the report: REPORT_MEMORY_LIMIT; the critical-path graph build:
GRAPH_MEMORY_LIMIT): DuckDB evicts cached blocks and spills joins, sorts and temporary
tables to its temp folder instead. `Bound.fit(work)` runs work() within the bound; a
query of it that cannot fit even so (DuckDB's OutOfMemoryException) makes work() run
again at the limit the connection had before, so a bound costs time on a job too big
for it, never the result. `$STEPSCOPE_MEMORY_LIMIT` (ingest.db) replaces the bounds: the
connection's limit holds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeVar

import duckdb

from stepscope.analyzers._sql import sql
from stepscope.ingest.limits import memory_limit_setting

T = TypeVar("T")

REPORT_MEMORY_LIMIT = 256 << 20  # bytes: the report's queries and DuckDB's block cache
GRAPH_MEMORY_LIMIT = 64 << 20    # bytes: critical_path/graph.sql (its temporary tables)


class Bound:
    """`with Bound(con, limit) as bound:` the connection's DuckDB memory limit is `limit`
    bytes within the block (the one before is restored after it); `bound.fit(work)`."""

    def __init__(self, con: duckdb.DuckDBPyConnection, limit: int) -> None:
        self.con, self.limit = con, f"{limit}B"
        self.before: str | None = None  # None: the limit is left as it is

    def __enter__(self) -> Bound:
        if not memory_limit_setting():
            before = self._current()
            if self._lower(self.limit):
                self.before = before
        return self

    def __exit__(self, *exc: object) -> None:
        if self.before is not None:
            self._restore(self.before)

    def _restore(self, before: str) -> None:
        """Back to the limit `before` as DuckDB printed it: the default by RESET when that
        is it, else the size that prints so (to_bytes: DuckDB prints one decimal, cut, so
        setting '18.8 GiB' back as such would read '18.7 GiB', a little less on every
        report of a long-lived connection)."""
        self.con.execute(sql("report/memory_limit_reset.sql"))
        if self._current() != before:
            self._set(to_bytes(before))

    def _current(self) -> str:
        (value,), = self.con.execute(sql("report/memory_limit_get.sql")).fetchall()
        return str(value)

    def _set(self, limit: str) -> None:
        self.con.execute(sql("report/memory_limit.sql"), {"limit": limit})

    def _lower(self, limit: str) -> bool:
        """Lower the limit; False (left as it was) when DuckDB holds more than that in
        blocks it cannot evict (a limit it cannot meet is refused)."""
        try:
            self._set(limit)
        except duckdb.OutOfMemoryException:
            return False
        return True

    def fit(self, work: Callable[[], T]) -> T:
        """work() within the bound; when a query of it does not fit, work() again at the
        limit before the bound (see the module docstring)."""
        try:
            return work()
        except duckdb.OutOfMemoryException:
            if self.before is None:
                raise
        self._restore(self.before)
        try:
            return work()
        finally:
            self._lower(self.limit)  # refused: the rest runs at the higher limit


UNITS = {"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
         "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}


def to_bytes(printed: str) -> str:
    """A size as DuckDB prints it ('18.8 GiB': cut to one decimal) as the whole bytes in
    the middle of what prints so ('20240033383B', 18.85 GiB), which DuckDB prints the
    same way again; anything else as it is."""
    number, _, unit = printed.strip().partition(" ")
    decimals = len(number.partition(".")[2])
    try:
        return f"{math.ceil((float(number) + 0.5 * 10.0**-decimals) * UNITS[unit])}B"
    except (KeyError, ValueError):
        return printed


def release(con: duckdb.DuckDBPyConnection) -> None:
    """Hand the memory DuckDB's allocator keeps cached back to the operating system, the
    limit unchanged: setting the memory limit makes DuckDB flush those caches, so it is
    set again to what it is (as to_bytes reads the printed value: the same limit to
    within DuckDB's printing). A loop over batches of ranks calls it after each batch:
    what one batch's statements freed is otherwise kept and adds up over the batches
    (docs/scale.md, "Memory"). With
    `$STEPSCOPE_MEMORY_LIMIT` the user's limit is left as set."""
    if memory_limit_setting():
        return
    (value,), = con.execute(sql("report/memory_limit_get.sql")).fetchall()
    con.execute(sql("report/memory_limit.sql"), {"limit": to_bytes(str(value))})


def bounded(con: duckdb.DuckDBPyConnection, limit: int, work: Callable[[], T]) -> T:
    """work() with DuckDB's memory limit at `limit` bytes, again at the limit before when
    it does not fit (Bound.fit)."""
    with Bound(con, limit) as bound:
        return bound.fit(work)
