"""What is wrong with a JSON-lines file DuckDB could not parse, in words: the first
malformed line's number as an editor counts it, without DuckDB's own file path.

DuckDB 1.x numbers the lines of a newline-delimited JSON error one too high (a bad first
line reads "line 2") except after a blank line, so the line is found again here by
reading the text once, only on this error path, within the per-file limit of text that
was checked before DuckDB read the file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

from stepscope.ingest.nccl.log_stream import text_chunks
from stepscope.ingest.read_errors import first_line, without_paths

# DuckDB: 'Malformed JSON in file "x", at byte 12 in line 4: unexpected character.'
_MALFORMED = re.compile(r"Malformed JSON in file \"[^\"]*\", at byte (\d+) in line \d+: (.*)$")
# DuckDB: '"maximum_object_size" of 16777216 bytes exceeded while reading (>33554428 bytes).'
_TOO_LONG = re.compile(r'"maximum_object_size" of (\d+) bytes exceeded[^(]*(?:\(>(\d+) bytes\))?')


def jsonl_problem(exc: BaseException, path: Path, display: str, limit: int) -> str:
    """DuckDB's parse error on `path` as one phrase: "malformed JSON at byte 12 of
    line 3: unexpected character" with the line counted from 1 in the file itself, or a
    line past the reader's object size in words; any other DuckDB error keeps its first
    line, its quoted file names left out."""
    text = first_line(exc)
    too_long = _TOO_LONG.search(text)
    if too_long is not None:
        longest = int(too_long.group(2) or too_long.group(1))  # the buffer DuckDB filled
        return f"a line of over {round(longest / 2**20)} MiB, more than one JSON line may hold"
    match = _MALFORMED.search(text)
    if match is None:
        return without_paths(text)
    reason = match.group(2).rstrip(". ")
    line = first_malformed_line(text_chunks(path, display, limit))
    if line is None:
        return f"malformed JSON: {reason}"
    return f"malformed JSON at byte {match.group(1)} of line {line}: {reason}"


def first_malformed_line(chunks: Iterator[bytes]) -> int | None:
    """The 1-based number of the first line that is neither blank nor one JSON value
    (NaN and Infinity are not JSON); None when every line parses."""
    number = 0
    for line in _lines(chunks):
        number += 1
        if line.strip() and not _parses(line):
            return number
    return None


def _lines(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """The text's lines without their newlines; a line spread over many chunks is joined
    once (linear in its length)."""
    pieces: list[bytes] = []
    for chunk in chunks:
        *whole, rest = chunk.split(b"\n")
        if whole:
            yield b"".join([*pieces, whole[0]])
            yield from whole[1:]
            pieces = []
        pieces.append(rest)
    if any(pieces):
        yield b"".join(pieces)


def _parses(line: bytes) -> bool:
    try:
        json.loads(line, parse_constant=_not_json)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return False
    return True


def _not_json(name: str) -> None:
    raise ValueError(name)
