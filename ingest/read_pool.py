"""The in-memory DuckDB databases reads run in: one per thread count and process, reused
for READS_PER_DATABASE reads (a worker reading many files does not fault its memory in
again for each), each read on its own connection with its own temp tables.
"""

from __future__ import annotations

import threading

import duckdb

from stepscope.ingest.db import connect

# Reads served by one in-memory database before a fresh one replaces it: a database
# that served hundreds of reads gets slower with each (1,024 small traces on 2 workers:
# 8.1 s per 128 files at first, 12.0 s at the end, the same file sizes throughout).
READS_PER_DATABASE = 32


_DATABASES: dict[int, tuple[duckdb.DuckDBPyConnection, int]] = {}


_DATABASES_LOCK = threading.Lock()


def connection(threads: int) -> duckdb.DuckDBPyConnection:
    """A new connection to this process's in-memory DuckDB for reads with `threads`
    threads. Its temp tables and macros are its own and go when it closes; the database
    (buffer pool, allocator) stays from one file to the next, so a worker reading many
    files does not fault in its memory again for each (~10% of a file's CPU), for
    READS_PER_DATABASE reads (the one it replaces closes with its last connection)."""
    with _DATABASES_LOCK:
        database, reads = _DATABASES.get(threads, (None, 0))
        if database is None or reads >= READS_PER_DATABASE:
            database, reads = connect(config={"threads": threads}), 0
        _DATABASES[threads] = (database, reads + 1)
        return database.cursor()
