"""What is wrong with a JSON-lines file DuckDB could not parse, in words: the first
line that is not one JSON object, numbered as an editor counts it, without DuckDB's own
file path.

DuckDB (2.0) numbers the line of a newline-delimited JSON error as the count of
non-blank lines before it plus two for a parse error (a bad first line reads "line 2"),
plus one for a line that is no object; after blank lines both fall behind. So the line
is found again here by reading the text once, only on this error path, within the
per-file limit of text that was checked before DuckDB read the file. The line found is
named only when DuckDB's count of the non-blank lines before it is the same: a line this
parser takes and DuckDB's does not is never passed over for a later one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from stepscope.ingest.nccl.log_stream import text_chunks
from stepscope.ingest.read_errors import JSON_TYPE_WORDS, first_line, without_paths

# DuckDB: 'Malformed JSON in file "x", at byte 12 in line 4: unexpected character.'
_MALFORMED = re.compile(r"Malformed JSON in file \"[^\"]*\", at byte (\d+) in line (\d+): (.*)$")
# DuckDB: 'JSON transform error in file "x", in line 1: Expected OBJECT, but got ARRAY: [1]'
_NOT_OBJECT = re.compile(
    r"JSON transform error in file \"[^\"]*\", in line (\d+): Expected OBJECT, but got "
    r"(\w+): (.*)$")
# What DuckDB adds to the count of non-blank lines before the bad one (module docstring).
_MALFORMED_AFTER, _NOT_OBJECT_AFTER = 2, 1
# DuckDB: '"maximum_object_size" of 16777216 bytes exceeded while reading (>33554428 bytes).'
_TOO_LONG = re.compile(r'"maximum_object_size" of (\d+) bytes exceeded[^(]*(?:\(>(\d+) bytes\))?')


def jsonl_problem(exc: BaseException, path: Path, display: str, limit: int) -> str:
    """DuckDB's error on `path` as one phrase, the line counted from 1 in the file itself:
    "malformed JSON at byte 12 of line 3: unexpected character", "line 1 is a list
    ([1,2,3]), not a JSON object", or a line past the reader's object size in words; any
    other DuckDB error keeps its first line, its quoted file names left out."""
    text = first_line(exc)
    too_long = _TOO_LONG.search(text)
    if too_long is not None:
        longest = int(too_long.group(2) or too_long.group(1))  # the buffer DuckDB filled
        return f"a line of over {round(longest / 2**20)} MiB, more than one JSON line may hold"
    malformed, not_object = _MALFORMED.search(text), _NOT_OBJECT.search(text)
    if not_object is not None:
        line = _agreeing_line(text_chunks(path, display, limit),
                              int(not_object.group(1)) - _NOT_OBJECT_AFTER)
        shown = JSON_TYPE_WORDS.get(not_object.group(2), not_object.group(2).lower())
        where = f"line {line}" if line else "a line"
        return f"{where} is {shown} ({not_object.group(3)[:40]}), not a JSON object"
    if malformed is None:
        return without_paths(text)
    line = _agreeing_line(text_chunks(path, display, limit),
                          int(malformed.group(2)) - _MALFORMED_AFTER)
    reason = _reason(malformed.group(3))
    if line is None:
        return f"malformed JSON: {reason}"
    return f"malformed JSON at byte {malformed.group(1)} of line {line}: {reason}"


def _reason(text: str) -> str:
    """DuckDB's reason without its closing advice ("Try auto-detecting the JSON format",
    which is about its own options, not the file)."""
    return text.split(". Try ")[0].rstrip(". ")


def _agreeing_line(chunks: Iterator[bytes], filled_before: int) -> int | None:
    """The first line that is not one JSON object, named only when DuckDB counted as
    many non-blank lines before its bad line (`filled_before`): a line DuckDB refused and
    this parser took is never named as the next bad line."""
    found = first_malformed_line(chunks)
    return found.number if found is not None and found.filled == filled_before else None


class BadLine(NamedTuple):
    """The first line that is not one JSON object: its 1-based `number` in the file and
    how many non-blank lines came before it (`filled`, what DuckDB's count rests on)."""

    number: int
    filled: int


def first_malformed_line(chunks: Iterator[bytes]) -> BadLine | None:
    """The first line that is neither blank nor one JSON object (NaN and Infinity are
    not JSON); None when every line is one."""
    filled = 0
    for number, line in enumerate(_lines(chunks), start=1):
        if not line.strip():
            continue
        if not _is_object(line):
            return BadLine(number, filled)
        filled += 1
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


def _is_object(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line, parse_constant=_not_json), dict)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return False


def _not_json(name: str) -> None:
    raise ValueError(name)
