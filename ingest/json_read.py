"""The parameters of DuckDB's `read_json` over a trace's events file (read/*.sql).

DuckDB's JSON reader allocates a buffer of twice `maximum_object_size` before it reads
a byte. At a fixed 256 MiB that was 512 MiB of DuckDB memory for every trace, however
small: under `ulimit -v 2GB` a 4-rank ingest of 115 KB files failed "out of memory".
No object of the file can be larger than the file itself, so the limit is the file's
size (at least 1 MiB, at most 256 MiB, the largest single event stepscope reads).
"""

from __future__ import annotations

from pathlib import Path

MAX_OBJECT_BYTES = 256 << 20
MIN_OBJECT_BYTES = 1 << 20


def max_object_bytes(events_file: Path) -> int:
    """The `maximum_object_size` for reading `events_file`: its size, within bounds."""
    try:
        size = events_file.stat().st_size
    except OSError:  # read_json itself says what is wrong with the file
        size = MAX_OBJECT_BYTES
    return min(MAX_OBJECT_BYTES, max(MIN_OBJECT_BYTES, size + 1))


def read_parameters(events_file: Path) -> dict[str, str | int]:
    """$path and $max_object of the read/*.sql statements that read `events_file`."""
    return {"path": str(events_file), "max_object": max_object_bytes(events_file)}
