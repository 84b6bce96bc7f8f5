"""A trace's JSON document split into its small top-level keys (parsed) and the byte span of
its `traceEvents` array, in time linear in the document and without parsing the events;
what a file that is no trace is, in words.
"""

from __future__ import annotations

import json
import mmap
import re
from typing import Any

from stepscope.ingest.db import DUCKDB_MAGIC, SQLITE_MAGIC
from stepscope.ingest.errors import TraceFileError
from stepscope.ingest.read_errors import first_line
from stepscope.ingest.text_encoding import wide_text_encoding, wide_text_problem

UTF8_BOM = b"\xef\xbb\xbf"


TAIL_WINDOW = 64 << 20        # the end of traceEvents is searched in the last 64 MiB


TAIL_PROBE = 64 << 10         # ... first in the last 64 KiB, then in doubling windows


_WS = re.compile(r"[ \t\n\r]*")


def _skip_ws(s: str, i: int) -> int:
    match = _WS.match(s, i)
    return match.end() if match else i


_WS_BYTES = b" \t\n\r"


_DECODER = json.JSONDecoder()


_JSON_SCALAR_START = re.compile(rb'["\-0-9]|true\b|false\b|null\b')


def _not_an_object(head: bytes, lead: bytes) -> str:
    """What a file whose text does not start with '{' is, in words: a database, binary
    data, text that is no JSON, a JSON list or scalar (`head`: its first bytes, `lead`:
    its start after a BOM and whitespace)."""
    if head.startswith(SQLITE_MAGIC):
        return ("an SQLite database (an Nsight Systems export?), not a Kineto trace: "
                "stepscope reads the JSON traces torch.profiler writes "
                "(tensorboard_trace_handler or export_chrome_trace)")
    if head[8:12] == DUCKDB_MAGIC:
        return "a DuckDB database, not a trace (a stepscope database is passed as --db)"
    start = lead[:40]
    if b"\x00" in start or not _is_text(start):
        return "binary data, not a Kineto trace (not JSON at all)"
    if start.startswith(b"["):
        return "not a Kineto trace: the JSON is a list, not an object holding traceEvents"
    if _JSON_SCALAR_START.match(start):
        return "not a Kineto trace: the JSON is not an object"
    shown = start.decode("utf-8", "replace").splitlines()[0][:30]
    return f"not a Kineto trace: not JSON at all (it starts with {shown!r})"


def _is_text(data: bytes) -> bool:
    """Whether `data` (the start of a file, maybe cut inside a character) is UTF-8 text."""
    for cut in range(4):
        try:
            (data[:len(data) - cut] if cut else data).decode("utf-8")
            return True
        except UnicodeDecodeError:
            continue
    return False


_WS_CHUNK = 1 << 20


def _first_non_ws(text: mmap.mmap | bytes, start: int) -> int:
    """The offset of the first byte at or after `start` that is not JSON whitespace (the
    length when there is none): read a MiB at a time, so a document behind any amount of
    leading whitespace is still found, in bounded memory."""
    at = start
    while at < len(text):
        chunk = bytes(text[at:at + _WS_CHUNK])
        rest = chunk.lstrip(_WS_BYTES)
        if rest:
            return at + len(chunk) - len(rest)
        at += len(chunk)
    return len(text)


def _document_bounds(text: mmap.mmap | bytes, display: str) -> tuple[int, int]:
    """[first, last] byte of the JSON document: after a UTF-8 BOM and whitespace, up to
    the last non-whitespace byte. A document that does not end with '}' is truncated."""
    if (encoding := wide_text_encoding(bytes(text[:4]))) is not None:
        raise TraceFileError(display, wide_text_problem(encoding))
    first = _first_non_ws(text, len(UTF8_BOM) if text[:3] == UTF8_BOM else 0)
    lead = bytes(text[first:first + 4096])
    if not lead:
        raise TraceFileError(display, "empty file (no JSON in it)")
    if not lead.startswith(b"{"):
        raise TraceFileError(display, _not_an_object(bytes(text[:16]), lead))
    first = text.find(b"{", first)
    last = len(text)
    while last > first:
        chunk = bytes(text[max(first, last - 4096):last]).rstrip(_WS_BYTES)
        if chunk:
            last = max(first, last - 4096) + len(chunk) - 1
            break
        last = max(first, last - 4096)
    if text[last:last + 1] != b"}":
        raise TraceFileError(
            display, f"truncated JSON at byte {len(text)} (the document never closes; "
            "re-copy the file)")
    return first, last


def _closes_document(s: str, i: int) -> bool:
    """Does s[i:] read as the rest of the top-level object: (',' "key": value)* '}' and
    only whitespace after? Each value is parsed where it stands (no copies), so a wrong
    candidate fails within a few tokens and the search stays linear."""
    j = _skip_ws(s, i)
    while j < len(s):
        if s[j] == "}":
            return _skip_ws(s, j + 1) == len(s)
        if s[j] != ",":
            return False
        j = _skip_ws(s, j + 1)
        if not s.startswith('"', j):
            return False
        try:
            _, j = _DECODER.raw_decode(s, j)
            j = _skip_ws(s, j)
            if not s.startswith(":", j):
                return False
            _, j = _DECODER.raw_decode(s, _skip_ws(s, j + 1))
        except ValueError:
            return False
        j = _skip_ws(s, j)
    return False


def _events_end(text: mmap.mmap | bytes, start: int, last: int, display: str) -> int:
    """Byte offset just past the `]` that closes traceEvents (its `[` is at `start`).

    The search reads the document's tail in a window that starts at TAIL_PROBE bytes and
    doubles up to TAIL_WINDOW: the array usually closes a few bytes before the end, and
    copying and decoding the whole window cost more than the rest of the split."""
    floor = max(start, last + 1 - TAIL_WINDOW)
    size = TAIL_PROBE
    try:
        while True:
            lo = max(floor, last + 1 - size)
            # latin-1 maps byte i to character i, so offsets carry over; JSON syntax is ASCII.
            tail = bytes(text[lo:last + 1]).decode("latin-1")
            whole = lo == floor
            # events are objects, so their list ends `}]` (or is `[]`); other lists second
            for only_after_object in (True, False) if whole else (True,):
                end = _closing_bracket(tail, only_after_object, whole)
                if end is not None:
                    return lo + end
            if whole:
                break
            size *= 2
    except RecursionError:
        raise TraceFileError(display, "invalid JSON (nested too deeply to be a trace)") from None
    raise TraceFileError(display, "invalid JSON: the traceEvents list never closes "
                         f"(truncated at byte {last + 1}?)")


def _closing_bracket(tail: str, only_after_object: bool, whole: bool) -> int | None:
    """Offset in `tail` just past its last `]` after which the rest reads as the
    document's remaining keys (and, with `only_after_object`, that follows `}` or `[`).
    In a window that is not the `whole` tail, a candidate with fewer than 4096
    characters before it is not judged (what precedes it is cut short): None, and the
    caller widens the window; the candidates after it are judged as the whole tail would."""
    pos = len(tail)
    while (pos := tail.rfind("]", 0, pos)) >= 0:
        if not whole and pos < 4096:
            return None
        before = tail[max(0, pos - 4096):pos].rstrip(" \t\n\r")[-1:]
        if only_after_object and before not in ("}", "["):
            continue
        if _closes_document(tail, pos + 1):
            return pos + 1
    return None


def split_trace(text: mmap.mmap | bytes, display: str) -> tuple[dict[str, Any], int, int]:
    """Split a trace into its top-level keys (parsed, without events) and the byte span
    [start, end) of the traceEvents array.

    The `traceEvents` key is found by walking the top-level keys (a nested object of the
    same name, earlier in the file, is not it). The array's closing bracket is the last
    `]` (after `}` first: events are objects) after which the rest of the document reads
    as the remaining keys; brackets inside the events can never satisfy that (the
    document would close too early).
    """
    first, last = _document_bounds(text, display)
    found = _top_level_events(text, first, last, display)
    if found is None:
        _raise_not_a_trace(bytes(text[first:last + 1]), display)
    assert found is not None
    key, start = found
    end = _events_end(text, start, last, display)
    rest = bytes(text[first:key]) + b'"traceEvents": 0' + bytes(text[end:last + 1])
    try:
        meta = json.loads(rest)
    except ValueError as exc:
        raise TraceFileError(display, f"invalid JSON outside traceEvents ({first_line(exc)})") \
            from None
    except RecursionError:
        raise TraceFileError(display, "invalid JSON (nested too deeply to be a trace)") from None
    if not isinstance(meta, dict):
        raise TraceFileError(display, "not a Kineto trace: the JSON is not an object")
    meta.pop("traceEvents", None)
    return meta, start, end


KEY_WINDOW = 1 << 20  # the keys before traceEvents are read this much at a time (doubling)


def _top_level_events(text: mmap.mmap | bytes, first: int, last: int,
                      display: str) -> tuple[int, int] | None:
    """(offset of the top-level "traceEvents" key, offset of its `[`), or None when the
    walk over the top-level keys finds no such list (the caller explains why). The keys
    before it are parsed from a window that doubles until it holds them."""
    window = KEY_WINDOW
    while True:
        whole = first + window > last
        chunk = bytes(text[first:min(last + 1, first + window)]).decode("latin-1")
        try:
            found = _walk_top_keys(chunk)
        except (ValueError, IndexError):
            if whole:
                return None
            window *= 2
            continue
        except RecursionError:
            raise TraceFileError(display, "invalid JSON (nested too deeply to be a trace)") \
                from None
        if found is None and not whole:
            window *= 2
            continue
        return None if found is None else (first + found[0], first + found[1])


def _walk_top_keys(s: str) -> tuple[int, int] | None:
    """Walk `{"key": value, ...` in s (s[0] is '{'): the offsets of the traceEvents key
    and of the `[` after it; None at the document's end without one. Raises ValueError
    or IndexError where s is not (yet) valid JSON."""
    j = _skip_ws(s, 1)
    while s[j] != "}":
        key_at = j
        key, j = _DECODER.raw_decode(s, j)
        j = _skip_ws(s, j)
        if not isinstance(key, str) or s[j] != ":":
            raise ValueError("not an object key")
        j = _skip_ws(s, j + 1)
        if key == "traceEvents" and s[j] == "[":
            return key_at, j
        _, j = _DECODER.raw_decode(s, j)
        j = _skip_ws(s, j)
        if s[j] == ",":
            j = _skip_ws(s, j + 1)
        elif s[j] != "}":
            raise ValueError("expected ',' or '}'")
    return None


def _raise_not_a_trace(text: bytes, display: str) -> None:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise TraceFileError(display, f"invalid JSON ({first_line(exc)})") from None
    except RecursionError:
        raise TraceFileError(display, "invalid JSON (nested too deeply to be a trace)") from None
    if isinstance(doc, dict) and "traceEvents" in doc:
        raise TraceFileError(display, "not a Kineto trace: traceEvents is not a list")
    raise TraceFileError(display, "not a Kineto trace: no traceEvents list at the top level")
