"""The JSON text of one trace file: regular files only (a FIFO or device would block), gzip
decompressed in a stream to a temporary copy and never past the per-trace limit whatever
the compression ratio (the bomb guard), then memory-mapped, never held whole in memory.
"""

from __future__ import annotations

import mmap
import os
import stat
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from stepscope.ingest.cancel import CancelToken
from stepscope.ingest.errors import TraceFileError
from stepscope.ingest.limits import format_size
from stepscope.ingest.read_errors import first_line

HEAD_BYTES = 1 << 20


GZIP_MAGIC = b"\x1f\x8b"


READ_CHUNK = 1 << 20          # compressed bytes read at a time


# Most decompressed bytes produced per step (bomb-safe). 4 MiB, not more: a chunk this
# size is reused from the heap from one step to the next, while larger ones are mapped
# and faulted in anew each time (16 MiB cost 8k page faults, 15 ms of system time, per
# 35 MB trace).
INFLATE_CHUNK = 4 << 20


def _gzip_problem(exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, EOFError) or "incomplete or truncated" in text or "ended before" in text:
        return "truncated gzip file (it ends before the end-of-stream marker; re-copy it)"
    return f"corrupt gzip data ({first_line(exc)})"


def check_regular_file(path: Path, display: str) -> None:
    """Only regular files are read: a FIFO or device would block or never end."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise TraceFileError(display, "no such file") from None
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO, socket or device"
        raise TraceFileError(display, f"not a regular file ({kind})")


def limit_problem(limit: int) -> str:
    return (f"more than {format_size(limit)} of JSON, the per-trace limit (parsing takes "
            "~6x the text in memory; raise it with --max-trace-size or "
            "STEPSCOPE_MAX_TRACE_SIZE if this trace is real and the memory is there)")


def _gunzip(src: IO[bytes], dst: IO[bytes], limit: int, display: str,
            cancel: CancelToken | None) -> None:
    """Stream-decompress gzip (concatenated members too) from src to dst, at most
    `limit` bytes out, whatever the compression ratio."""
    inflater: Any = None
    pending = b""
    written = 0
    try:
        while True:
            if not pending:
                pending = src.read(READ_CHUNK)
                if not pending:
                    break
            if inflater is None:
                inflater = zlib.decompressobj(wbits=47)
            out = inflater.decompress(pending, INFLATE_CHUNK)
            pending = inflater.unconsumed_tail
            if inflater.eof:  # another gzip member may follow
                pending = inflater.unused_data + pending
                inflater = None
            written += len(out)
            if written > limit:
                raise TraceFileError(display, limit_problem(limit))
            dst.write(out)
            if cancel is not None:
                cancel.check(display)
    except zlib.error as exc:
        raise TraceFileError(display, _gzip_problem(exc)) from None
    if inflater is not None:
        raise TraceFileError(display, _gzip_problem(EOFError()))


@contextmanager
def mapped_json(path: Path, display: str, tmp: Path, limit: int,
                 cancel: CancelToken | None) -> Iterator[tuple[mmap.mmap, Path | None]]:
    """The file's JSON text, memory-mapped: the file itself, or its decompressed copy in
    `tmp` (then also its path, and the map is writable)."""
    with open(path, "rb") as fh:
        if fh.read(2) != GZIP_MAGIC:
            size = os.fstat(fh.fileno()).st_size
            if size > limit:
                raise TraceFileError(display, limit_problem(limit))
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                yield mm, None
            return
        fh.seek(0)
        copy = tmp / "trace.json"
        with open(copy, "wb") as out:
            _gunzip(fh, out, limit, display, cancel)
    if copy.stat().st_size == 0:
        raise TraceFileError(display, "empty file (no JSON in it)")
    with open(copy, "r+b") as rw, mmap.mmap(rw.fileno(), 0) as mm:
        yield mm, copy
