"""Read a text log (plain or gzip) as blocks of whole lines, in memory that does not
depend on the log's size.

A log can be GBs (NCCL_DEBUG=INFO with NCCL_DEBUG_SUBSYS=COLL writes a line per
collective), a small gzip can inflate to far more (a "zip bomb"), and one line can be
hundreds of MB. So the file is decompressed in bounded steps, at most the per-file limit
of text in all (ingest/limits.py), and cut into blocks of about BLOCK_BYTES of whole
lines; a line longer than MAX_LINE_BYTES is dropped (and counted) without ever being held
whole. Peak memory is about one block plus one read step, whatever the input.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from stepscope.ingest.errors import TraceFileError
from stepscope.ingest.limits import format_size

READ_BYTES = 1 << 20         # bytes read from the file per step
INFLATE_BYTES = 1 << 20      # most decompressed bytes one step produces
BLOCK_BYTES = 4 << 20        # text handed to the parser at a time
# NCCL formats a line into a 1 KiB buffer plus its arguments: ring orders of thousands of
# ranks are the longest real lines (~5 bytes a rank). Longer lines are not NCCL's.
MAX_LINE_BYTES = 1 << 16
GZIP_MAGIC = b"\x1f\x8b"


def limit_problem(limit: int) -> str:
    return (f"more than {format_size(limit)} of text, the per-file limit (raise it with "
            "--max-trace-size or STEPSCOPE_MAX_TRACE_SIZE if this log is real)")


def _raw_chunks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as fh:
        while chunk := fh.read(READ_BYTES):
            yield chunk


def _inflate(raw: Iterator[bytes], display: str) -> Iterator[bytes]:
    """Decompress gzip (concatenated members too) in steps of at most INFLATE_BYTES."""
    inflater: Any = None
    pending = b""
    while True:
        if not pending:
            pending = next(raw, b"")
            if not pending:
                break
        if inflater is None:
            inflater = zlib.decompressobj(wbits=47)
        try:
            out = inflater.decompress(pending, INFLATE_BYTES)
        except zlib.error as exc:
            raise TraceFileError(display, f"corrupt gzip data ({exc})") from None
        pending = inflater.unconsumed_tail
        if inflater.eof:  # another gzip member may follow
            pending = inflater.unused_data + pending
            inflater = None
        if out:
            yield out
    if inflater is not None:
        raise TraceFileError(display, "truncated gzip file (it ends in the middle of the "
                             "compressed data)")


def text_chunks(path: Path, display: str, limit: int) -> Iterator[bytes]:
    """The file's text (decompressed when it is gzip) in chunks; TraceFileError once
    more than `limit` bytes of text came out, or when the file cannot be read."""
    try:
        with open(path, "rb") as fh:
            gz = fh.read(2) == GZIP_MAGIC
        raw = _raw_chunks(path)
        chunks = _inflate(raw, display) if gz else raw
        total = 0
        for chunk in chunks:
            total += len(chunk)
            if total > limit:
                raise TraceFileError(display, limit_problem(limit))
            yield chunk
    except OSError as exc:
        raise TraceFileError(display, f"cannot read the log ({exc.strerror or exc})") from None


class LineBlocks:
    """Cuts chunks of text into blocks of whole lines; drops (and counts) lines longer
    than `max_line` while holding at most `max_line` bytes of any of them."""

    def __init__(self, max_line: int = MAX_LINE_BYTES) -> None:
        self.max_line = max_line
        self.long_lines = 0
        self._carry = b""
        self._skipping = False

    def feed(self, chunk: bytes) -> bytes:
        """The whole lines completed by this chunk (b'' when none)."""
        if self._skipping:
            nl = chunk.find(b"\n")
            if nl < 0:
                return b""
            chunk, self._skipping = chunk[nl + 1:], False
        data = self._carry + chunk if self._carry else chunk
        nl = data.rfind(b"\n")
        block, rest = (data[:nl + 1], data[nl + 1:]) if nl >= 0 else (b"", data)
        if len(rest) > self.max_line:
            self.long_lines += 1
            self._carry, self._skipping = b"", True
        else:
            self._carry = rest
        return block

    def finish(self) -> bytes:
        """The last line when the text does not end with a newline."""
        rest, self._carry = self._carry, b""
        return b"" if self._skipping else rest


def line_blocks(chunks: Iterator[bytes], cutter: LineBlocks,
                block_bytes: int = BLOCK_BYTES) -> Iterator[bytes]:
    """Blocks of whole lines of about `block_bytes` (a block may hold one step more)."""
    parts: list[bytes] = []
    size = 0
    for chunk in chunks:
        block = cutter.feed(chunk)
        if block:
            parts.append(block)
            size += len(block)
        if size >= block_bytes:
            yield b"".join(parts)
            parts, size = [], 0
    last = cutter.finish()
    if last:
        parts.append(last + b"\n")
    if parts:
        yield b"".join(parts)
