"""Read one Kineto trace file into rank tables (Arrow), independently of every other file.

`read_trace` is the unit of parallel work: it takes a path, opens its own connection to
the process's in-memory DuckDB (its temp tables are its own; `_connection`), parses the
events with DuckDB's JSON reader (no Python loop over events) and returns the rank's
tables. Nothing here knows about the run or the target database, so
the same function can run in a thread, a process or a Ray task.

How a file is read:
1. A gzipped file is decompressed in a stream to a temporary file, at most the per-trace
   limit (ingest/limits.py); the JSON text is memory-mapped, never held whole in memory.
   It is split into the `traceEvents` array and the small rest (schemaVersion,
   distributedInfo, deviceProperties, baseTimeNanoseconds, ...), which Python's json
   parses. Finding the end of the array looks only at the document's tail (linear).
2. The array goes to a temporary file that DuckDB reads with `format='array'` (a row per
   event, several times faster than one giant object); a decompressed copy is turned
   into that file in place, by blanking the bytes around the array.
3. `ts` is read as DOUBLE, exact to the ns for relative timestamps (`baseTimeNanoseconds`)
   and integer µs. Absolute timestamps with a ns fraction (19 significant digits, more
   than a DOUBLE holds) and 2021-era traces (`external id`) take the exact-text path:
   `ts` values are quoted so DuckDB keeps their text, and the lower-case key is renamed.
"""

from __future__ import annotations

import json
import mmap
import os
import re
import stat
import tempfile
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import duckdb

from stepscope.ingest.comm_kernels import CommPattern, any_pattern, comm_patterns, pattern_rows
from stepscope.ingest.db import DUCKDB_MAGIC, SQLITE_MAGIC, connect
from stepscope.ingest.errors import TraceFileError
from stepscope.ingest.limits import format_size, max_trace_bytes
from stepscope.ingest.queries import execute_statements, run_script, sql, statements

if TYPE_CHECKING:
    import pyarrow as pa

HEAD_BYTES = 1 << 20
GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = b"\xef\xbb\xbf"
READ_CHUNK = 1 << 20          # compressed bytes read at a time
# Most decompressed bytes produced per step (bomb-safe). 4 MiB, not more: a chunk this
# size is reused from the heap from one step to the next, while larger ones are mapped
# and faulted in anew each time (16 MiB cost 8k page faults, 15 ms of system time, per
# 35 MB trace).
INFLATE_CHUNK = 4 << 20
TAIL_WINDOW = 64 << 20        # the end of traceEvents is searched in the last 64 MiB
TAIL_PROBE = 64 << 10         # ... first in the last 64 KiB, then in doubling windows
# Largest |baseTimeNanoseconds| accepted: 2^62 ns is the year 2116; with event times
# added it stays inside a BIGINT.
MAX_BASE_NS = 1 << 62

OUTPUT_TABLES = (
    "cpu_ops", "gpu_ops", "gpu_annotations", "steps", "threads", "process_groups", "collectives",
    "memory_events",
)

_LEGACY_CATEGORY = re.compile(rb'"cat"\s*:\s*"(?:Operator|Runtime|Kernel|Memcpy|Memset)"')
_TS_WITH_FRACTION = re.compile(rb'"ts"\s*:\s*(\d+)\.\d')
_TS_NUMBER = re.compile(rb'("ts"\s*:\s*)(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)')


@dataclass(frozen=True)
class RankSummary:
    """What the `ranks` row needs from the op tables (ingest/sql/read/rank_tables.sql)."""

    device: int | None
    pid: int | None
    trace_start_ns: int | None
    trace_end_ns: int | None


@dataclass
class RankTables:
    """What one trace file holds, ready to be inserted under a run and a rank."""

    file: str
    distributed_info: dict[str, Any] | None
    device_properties: list[dict[str, Any]]
    host_name: str | None
    trace_name: str | None
    step_source: str | None
    base_time_ns: int | None
    trace_format: str
    category_counts: dict[str, int]
    tables: dict[str, pa.Table] = field(default_factory=dict)
    # With a stage folder: each table as a Parquet file instead of in memory (the
    # columnar hand-off between a parsing task and the writer; ingest/tasks.py).
    table_files: dict[str, str] = field(default_factory=dict)
    summary: RankSummary = field(default_factory=lambda: RankSummary(None, None, None, None))

    @property
    def n_events(self) -> int:
        return sum(self.category_counts.values())


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def _conversion_problem(exc: BaseException) -> str:
    """A value DuckDB could not convert: an event's time (`ts`, `dur`) that is NaN or
    beyond what nanoseconds in 64 bits hold (±292 years) says so, in words."""
    text = _first_line(exc)
    if "INT64" in text or "BIGINT" in text:
        return ("an event's time (ts or dur) is not a number or out of range: it must be "
                f"finite microseconds within ±2^63 ns ({text})")
    return f"could not be analysed ({text})"


def _gzip_problem(exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, EOFError) or "incomplete or truncated" in text or "ended before" in text:
        return "truncated gzip file (it ends before the end-of-stream marker; re-copy it)"
    return f"corrupt gzip data ({_first_line(exc)})"


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


def _check_regular_file(path: Path, display: str) -> None:
    """Only regular files are read: a FIFO or device would block or never end."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise TraceFileError(display, "no such file") from None
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO, socket or device"
        raise TraceFileError(display, f"not a regular file ({kind})")


def _limit_problem(limit: int) -> str:
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
                raise TraceFileError(display, _limit_problem(limit))
            dst.write(out)
            if cancel is not None:
                cancel.check(display)
    except zlib.error as exc:
        raise TraceFileError(display, _gzip_problem(exc)) from None
    if inflater is not None:
        raise TraceFileError(display, _gzip_problem(EOFError()))


@contextmanager
def _mapped_json(path: Path, display: str, tmp: Path, limit: int,
                 cancel: CancelToken | None) -> Iterator[tuple[mmap.mmap, Path | None]]:
    """The file's JSON text, memory-mapped: the file itself, or its decompressed copy in
    `tmp` (then also its path, and the map is writable)."""
    with open(path, "rb") as fh:
        if fh.read(2) != GZIP_MAGIC:
            size = os.fstat(fh.fileno()).st_size
            if size > limit:
                raise TraceFileError(display, _limit_problem(limit))
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


def _needs_exact_text(head: bytes) -> bool:
    """Absolute µs timestamps with a ns fraction, or the 2021 era (`external id`)."""
    if b'"external id"' in head or _LEGACY_CATEGORY.search(head):
        return True
    return any(len(m.group(1)) >= 15 for m in _TS_WITH_FRACTION.finditer(head, 0, 200_000))


def _trace_format(head: bytes, base_ns: int | None) -> str:
    if base_ns is not None:
        return "relative_ns"
    if _LEGACY_CATEGORY.search(head) or b'"external id"' in head:
        return "legacy_2021"
    if _TS_WITH_FRACTION.search(head):
        return "absolute_ns"
    return "int_us"


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


def _split_trace(text: mmap.mmap | bytes, display: str) -> tuple[dict[str, Any], int, int]:
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
        raise TraceFileError(display, f"invalid JSON outside traceEvents ({_first_line(exc)})") \
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
        raise TraceFileError(display, f"invalid JSON ({_first_line(exc)})") from None
    except RecursionError:
        raise TraceFileError(display, "invalid JSON (nested too deeply to be a trace)") from None
    if isinstance(doc, dict) and "traceEvents" in doc:
        raise TraceFileError(display, "not a Kineto trace: traceEvents is not a list")
    raise TraceFileError(display, "not a Kineto trace: no traceEvents list at the top level")


def _explain_read_error(exc: Exception) -> str:
    """Turn a DuckDB read error on the events array into a one-line problem, without the
    path of the temporary copy DuckDB read (the user's file is named by the caller)."""
    text = _first_line(exc)
    if isinstance(exc, duckdb.InterruptException):
        return "cancelled"
    if "Malformed JSON" in str(exc) or "JSON" in text:
        detail = re.sub(r'^.*?Malformed JSON in file "[^"]*"', "", text).strip(" ,:")
        detail = re.sub(r'^.*?JSON transform error in file "[^"]*",?', "", detail).strip(" ,:")
        detail = re.sub(r"\brecord/value (\d+)", r"event \1", detail)
        return f"invalid JSON in traceEvents ({detail or text})"
    return f"could not be read ({_without_paths(text)})"


def _without_paths(text: str) -> str:
    """DuckDB's message with the quoted file names it carries (temporary copies) left out."""
    return re.sub(r'\s*(?:in )?file "[^"]*",?', "", text)


# a value's JSON type as words, for the field-type message
_JSON_TYPE_WORDS = {"VARCHAR": "text", "OBJECT": "an object", "ARRAY": "a list",
                    "BOOLEAN": "true/false", "BIGINT": "a number", "UBIGINT": "a number",
                    "DOUBLE": "a number"}
_FIELD_WANTS = {"ts": "a number (microseconds)", "dur": "a number (microseconds)",
                "args": "an object"}


def _bad_field(con: duckdb.DuckDBPyConnection, events_file: Path, exact: bool) -> str | None:
    """After the events could not be read or converted: which event's `ts`, `dur` or
    `args` has the wrong type, in one line ("event 12 of traceEvents ('aten::mm'): ts is
    text ("abc"), not a number (microseconds)"); None when none has (another problem)."""
    stmts = statements("read/bad_field.sql")
    try:
        execute_statements(con, stmts[:-1], {"path": str(events_file)})
        row = con.execute(stmts[-1], {"exact": exact}).fetchone()
    except duckdb.Error:
        return None
    if row is None:
        return None
    n, name, field_name, json_type, text = row
    what = f" ({_short_event_name(name)!r})" if name else ""
    shown = _JSON_TYPE_WORDS.get(str(json_type), str(json_type).lower())
    return (f"event {n} of traceEvents{what}: {field_name} is {shown} ({text}), not "
            f"{_FIELD_WANTS[field_name]}")


def _short_event_name(name: str, width: int = 60) -> str:
    """An event's name cut to `width` characters for a one-line message."""
    return name if len(name) <= width else name[:width - 1] + "…"


def _write_events_file(mm: mmap.mmap, copy: Path | None, start: int, end: int, tmp: Path,
                       exact: bool) -> Path:
    """The file DuckDB reads: just the traceEvents array (text rewritten on the exact
    path). A decompressed copy becomes it in place, by blanking what surrounds the array."""
    if exact:
        events = _TS_NUMBER.sub(rb'\1"\2"',
                                mm[start:end].replace(b'"external id"', b'"External id"'))
        target = tmp / "events.json"
        target.write_bytes(events)
        return target
    if copy is not None:
        mm[:start] = b" " * start
        mm[end:] = b" " * (len(mm) - end)
        mm.flush()
        return copy
    target = tmp / "events.json"
    with open(target, "wb") as out, memoryview(mm) as view:
        for lo in range(start, end, INFLATE_CHUNK):
            out.write(view[lo:min(end, lo + INFLATE_CHUNK)])
    return target


def read_trace(path: Path, display: str | None = None, threads: int = 1,
               step_marker: str | None = None, max_bytes: int | None = None,
               cancel: CancelToken | None = None, stage_dir: Path | None = None,
               keep: KeepFn | None = None,
               comm_kernels: tuple[CommPattern, ...] | None = None) -> RankTables:
    """Parse one Kineto trace file (``.json`` or ``.json.gz``) into rank tables.

    `step_marker` names an annotation whose calls are the steps (before ProfilerStep#N;
    docs/attribution.md, "Steps"). With `stage_dir`, the tables are written there as
    Parquet (`table_files`) instead of returned in memory. `keep(distributed_info)` is
    asked before the events are parsed; False skips the file (raises SkippedTrace).
    `comm_kernels` are the communication-kernel patterns (ingest/comm_kernels.py; default:
    the bundled table).

    Raises TraceFileError with a one-line problem for anything that is not a readable
    Kineto trace; `max_bytes` caps the JSON text (default: ingest.limits).
    """
    display = display or str(path)
    _check_regular_file(path, display)
    if path.stat().st_size == 0:
        raise TraceFileError(display, "empty file")
    limit = max_trace_bytes(max_bytes)
    # beside the stage folder when there is one: a worker killed mid-read (the ingest
    # was stopped) leaves its decompressed copy where the ingest's cleanup removes it
    scratch = str(stage_dir.parent) if stage_dir is not None else None
    with tempfile.TemporaryDirectory(prefix="stepscope-", dir=scratch) as tmp:
        with _mapped_json(path, display, Path(tmp), limit, cancel) as (mm, copy):
            meta, start, end = _split_trace(mm, display)
            head = mm[start:start + HEAD_BYTES]
            exact = _needs_exact_text(head)
            events_file = _write_events_file(mm, copy, start, end, Path(tmp), exact)
        base_ns = _parse_base(meta.get("baseTimeNanoseconds"), display)
        distributed = meta.get("distributedInfo")
        distributed = distributed if isinstance(distributed, dict) else None
        if keep is not None and not keep(distributed):
            raise SkippedTrace(display)
        if cancel is not None:
            cancel.check(display)
        con = _connection(max(1, int(threads)))
        try:
            with _watching(cancel, con):
                loaded = _load_events(con, events_file, exact,
                                      (base_ns, distributed, step_marker), display, stage_dir,
                                      comm_kernels or comm_patterns())
        finally:
            con.close()
    props = meta.get("deviceProperties")
    host = meta.get("host_name")
    trace_name = meta.get("traceName")
    return RankTables(
        file=display,
        distributed_info=distributed,
        device_properties=[p for p in props if isinstance(p, dict)]
        if isinstance(props, list) else [],
        host_name=str(host) if host is not None else None,
        trace_name=str(trace_name) if trace_name is not None else None,
        step_source=loaded.step_source,
        base_time_ns=base_ns,
        trace_format=_trace_format(head, base_ns),
        category_counts=loaded.counts,
        tables=loaded.tables,
        table_files=loaded.files,
        summary=loaded.summary,
    )


# Reads served by one in-memory database before a fresh one replaces it: a database
# that served hundreds of reads gets slower with each (1,024 small traces on 2 workers:
# 8.1 s per 128 files at first, 12.0 s at the end, the same file sizes throughout).
READS_PER_DATABASE = 32
_DATABASES: dict[int, tuple[duckdb.DuckDBPyConnection, int]] = {}
_DATABASES_LOCK = threading.Lock()


def _connection(threads: int) -> duckdb.DuckDBPyConnection:
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


@contextmanager
def _watching(cancel: CancelToken | None, con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    if cancel is None:
        yield
        return
    with cancel.watching(con):
        yield


@dataclass
class _Loaded:
    tables: dict[str, pa.Table]
    files: dict[str, str]
    counts: dict[str, int]
    step_source: str | None
    summary: RankSummary


def _load_events(con: duckdb.DuckDBPyConnection, events_file: Path, exact: bool,
                 meta: tuple[int | None, dict[str, Any] | None, str | None],
                 display: str, stage_dir: Path | None,
                 comm_kernels: tuple[CommPattern, ...]) -> _Loaded:
    """Read the events file into the rank tables; meta = (base ns, distributedInfo,
    step marker). The tables come back in memory, or as Parquet files in `stage_dir`."""
    base_ns, distributed, step_marker = meta
    con.execute(sql("read/macros.sql"))
    con.execute(sql("read/comm_patterns.sql"), {"patterns": pattern_rows(comm_kernels)})
    try:
        con.execute(sql("read/read_events.sql"), {"path": str(events_file),
                                              "ts_type": "VARCHAR" if exact else "DOUBLE"})
    except duckdb.Error as exc:
        problem = None if isinstance(exc, duckdb.InterruptException) else _bad_field(
            con, events_file, exact)
        raise TraceFileError(display, problem or _explain_read_error(exc)) from None
    try:
        info = json.dumps(distributed, allow_nan=False) if distributed else None
    except ValueError:
        info = None  # NaN/Infinity in distributedInfo: not valid JSON, not stored
    con.execute(sql("read/rank_meta.sql"), {"base_ns": base_ns, "distributed_info": info,
                                        "step_marker": step_marker or None})
    step_source, summary, counts = _rank_tables(con, display, any_pattern(comm_kernels),
                                                events_file, exact)
    # the out_<name> temp tables through DuckDB's relational API (no SQL text)
    if stage_dir is None:
        tables = {name: con.table(f"out_{name}").to_arrow_table() for name in OUTPUT_TABLES}
        return _Loaded(tables, {}, counts, step_source, summary)
    files = {}
    for name in OUTPUT_TABLES:
        files[name] = str(stage_dir / f"{name}.parquet")
        con.table(f"out_{name}").write_parquet(files[name], compression="zstd")
    return _Loaded({}, files, counts, step_source, summary)


def _range_device(con: duckdb.DuckDBPyConnection) -> int | None:
    """The GPU of a trace without GPU ops whose kernels the CUPTI range profiler measured
    (read/range_device.sql); None for any other trace, at the cost of one probe of
    out_gpu_ops (a trace with GPU ops never scans its events again)."""
    if con.table("out_gpu_ops").limit(1).fetchall():
        return None
    found = con.execute(sql("read/range_device.sql")).fetchone()
    return None if found is None or found[0] is None else int(found[0])


def _rank_tables(con: duckdb.DuckDBPyConnection, display: str,
                 comm_any: str, events_file: Path, exact: bool
                 ) -> tuple[str | None, RankSummary, dict[str, int]]:
    """Build the out_* tables from raw_events; returns the step source, the summary row
    and the event counts per category (`cat:ph` for other phases than X). `comm_any`
    matches every communication-kernel name (comm_kernels.any_pattern)."""
    try:
        run_script(con, "read/rank_tables.sql", {"comm_any": comm_any})
        range_device = _range_device(con)
        con.execute(sql("read/memory_events.sql"))
        con.execute(sql("read/collectives.sql"))
        (step_source, device, pid, start, end, timed, categories, n_memory), = con.execute(
            sql("read/rank_result.sql")).fetchall()
        if n_memory:  # the allocator's args need a second, narrow read of the file
            run_script(con, "read/memory_bytes.sql", {"path": str(events_file)})
        device = range_device if device is None else device
    except duckdb.ConversionException as exc:
        # the exact path reads `ts` as text: a `ts` that is no number fails only here
        problem = _bad_field(con, events_file, exact) or _conversion_problem(exc)
        raise TraceFileError(display, problem) from None
    except duckdb.Error as exc:
        raise TraceFileError(display, f"could not be analysed ({_without_paths(_first_line(exc))})"
                             ) from None
    counts = {
        f"{c['category']}:{c['ph']}" if c["ph"] != "X" else c["category"]: int(c["n"])
        for c in categories or ()
    }
    if not any(k in counts for k in KNOWN_EVENT_CATEGORIES):
        raise TraceFileError(
            display, "not a Kineto trace: no CPU op, kernel or annotation events in traceEvents"
        )
    if not timed:
        raise TraceFileError(
            display, f"no timed events: none of its {sum(counts.values())} events has a "
            "numeric `ts` (nothing to attribute)")
    return step_source, RankSummary(device, pid, start, end), counts


class SkippedTrace(Exception):
    """The file is not one of the ranks asked for (`--ranks`); not an error."""

    def __init__(self, file: str) -> None:
        super().__init__(file)
        self.file = file


KeepFn = Callable[[dict[str, Any] | None], bool]


# Categories (duration events) that stepscope stores somewhere.
KNOWN_EVENT_CATEGORIES = frozenset({
    "cpu_op", "Operator", "user_annotation", "python_function", "cuda_runtime", "Runtime",
    "cuda_driver", "kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset",
    "gpu_user_annotation",
})
# Categories known to exist in Kineto traces that stepscope does not store (yet).
KNOWN_IGNORED_CATEGORIES = frozenset({
    "Trace", "overhead", "cuda_sync", "cuda_event", "cuda_profiler_range", "",
    "cpu_instant_event",
})


def _parse_base(raw: Any, display: str) -> int | None:
    if raw is None:
        return None
    text = str(raw).strip('"')
    if isinstance(raw, bool) or not re.fullmatch(r"-?[0-9]{1,400}", text):
        raise TraceFileError(display, f"baseTimeNanoseconds is not an integer ({text[:40]!r})")
    value = int(text)
    if not 0 <= value < MAX_BASE_NS:
        raise TraceFileError(
            display, f"baseTimeNanoseconds {text[:40]} is out of range (0 to 2^62 ns)")
    return value


