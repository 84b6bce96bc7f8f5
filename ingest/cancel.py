"""Stopping reads in flight (Ctrl-C): a token that interrupts every DuckDB query a read
registered and the decompression loop at its next chunk.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import duckdb

from stepscope.ingest.errors import TraceFileError


class CancelToken:
    """Stops reads in flight: `cancel()` interrupts every DuckDB query a read registered
    and makes the decompression loop stop at its next chunk (used on Ctrl-C)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connections: set[duckdb.DuckDBPyConnection] = set()
        self.cancelled = False

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            for con in self._connections:
                con.interrupt()

    def check(self, display: str) -> None:
        if self.cancelled:
            raise TraceFileError(display, "cancelled")

    @contextmanager
    def watching(self, con: duckdb.DuckDBPyConnection) -> Iterator[None]:
        with self._lock:
            self._connections.add(con)
        try:
            yield
        finally:
            with self._lock:
                self._connections.discard(con)


@contextmanager
def watching(cancel: CancelToken | None, con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    if cancel is None:
        yield
        return
    with cancel.watching(con):
        yield
