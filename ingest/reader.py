"""Read one Kineto trace file into rank tables (Arrow), independently of every other file.

`read_trace` is the unit of parallel work: it takes a path, opens its own in-memory
DuckDB, parses the events with DuckDB's JSON reader (no Python loop over events) and
returns the rank's tables. Nothing here knows about the run or the target database, so
the same function can run in a thread, a process or a Ray task.

How a file is read:
1. The file is decompressed into memory once and split into the `traceEvents` array and
   the small rest (schemaVersion, distributedInfo, deviceProperties, baseTimeNanoseconds,
   ...), which Python's json parses.
2. The array goes to a temporary file that DuckDB reads with `format='array'` (a row per
   event, several times faster than one giant object).
3. `ts` is read as DOUBLE, exact to the ns for relative timestamps (`baseTimeNanoseconds`)
   and integer µs. Absolute timestamps with a ns fraction (19 significant digits, more
   than a DOUBLE holds) and 2021-era traces (`external id`) take the exact-text path:
   `ts` values are quoted so DuckDB keeps their text, and the lower-case key is renamed.
"""

from __future__ import annotations

import json
import re
import tempfile
import zlib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from ingest.errors import TraceFileError

SQL_DIR = Path(__file__).parent / "sql"
HEAD_BYTES = 1 << 20
GZIP_MAGIC = b"\x1f\x8b"

# Keys of `args` that the loader uses. Scalars are read as text and cast with TRY_CAST
# in SQL, because their JSON type differs between eras (e.g. ROCm's "stream": "0x0").
_ARG_TEXT = (
    "External id", "correlation", "device", "stream", "Sequence number", "Fwd thread id",
    "Record function id", "Collective name", "In msg nelems", "Out msg nelems",
    "In msg size", "Out msg size", "Group size", "dtype", "Process Group Name",
    "Process Group Description", "Process Group Ranks", "Process Group ID", "Seq",
    "Rank", "Src Rank", "Dst Rank", "bytes", "name",
)
_ARG_JSON = ("Input Dims", "Input type", "Concrete Inputs")


def _struct(fields: list[tuple[str, str]]) -> str:
    return "STRUCT(" + ", ".join(f'"{n}" {t}' for n, t in fields) + ")"


def _event_columns(ts_type: str) -> str:
    """The `columns` argument of read_json: the event fields stepscope uses."""
    args = _struct([(k, "VARCHAR") for k in _ARG_TEXT] + [(k, "JSON") for k in _ARG_JSON])
    cols = {"ph": "VARCHAR", "cat": "VARCHAR", "name": "VARCHAR", "pid": "VARCHAR",
            "tid": "VARCHAR", "ts": ts_type, "dur": "DOUBLE", "args": args}
    return "{" + ", ".join(f"'{k}': '{v}'" for k, v in cols.items()) + "}"


_READ_EVENTS = (
    "CREATE OR REPLACE TEMP TABLE raw_events AS SELECT * FROM read_json($path, "
    "columns={columns}, format='array', maximum_object_size=268435456)"
)
READ_FAST = _READ_EVENTS.format(columns=_event_columns("DOUBLE"))
READ_EXACT = _READ_EVENTS.format(columns=_event_columns("VARCHAR"))
CREATE_META = (
    "CREATE OR REPLACE TEMP TABLE meta AS "
    "SELECT CAST($base_ns AS BIGINT) AS base_ns, "
    "CAST($distributed_info AS JSON) AS distributed_info, "
    "CAST($step_marker AS VARCHAR) AS step_marker"
)

OUTPUT_TABLES = (
    "cpu_ops", "gpu_ops", "gpu_annotations", "steps", "threads", "process_groups", "collectives",
)

_LEGACY_CATEGORY = re.compile(rb'"cat"\s*:\s*"(?:Operator|Runtime|Kernel|Memcpy|Memset)"')
_TS_WITH_FRACTION = re.compile(rb'"ts"\s*:\s*(\d+)\.\d')
_TS_NUMBER = re.compile(rb'("ts"\s*:\s*)(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)')
_TRACE_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')


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

    @property
    def n_events(self) -> int:
        return sum(self.category_counts.values())


@cache
def _sql(name: str) -> str:
    return (SQL_DIR / name).read_text()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def _gzip_problem(exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, EOFError) or "incomplete or truncated" in text or "ended before" in text:
        return "truncated gzip file (it ends before the end-of-stream marker; re-copy it)"
    return f"corrupt gzip data ({_first_line(exc)})"


def _load_bytes(path: Path, display: str) -> bytes:
    """The file's JSON text, decompressed when it is gzipped (by content, not name)."""
    data = path.read_bytes()
    if not data.startswith(GZIP_MAGIC):
        return data
    try:
        out = zlib.decompressobj(wbits=47)  # gzip, concatenated members handled below
        text = out.decompress(data)
        while out.unused_data:  # another gzip member follows
            rest = out.unused_data
            out = zlib.decompressobj(wbits=47)
            text += out.decompress(rest)
        if not out.eof:
            raise EOFError("compressed file ended before the end-of-stream marker")
        return text
    except (zlib.error, EOFError) as exc:
        raise TraceFileError(display, _gzip_problem(exc)) from None


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


def _split_trace(text: bytes, display: str) -> tuple[dict[str, Any], int, int]:
    """Split a trace into its top-level keys (parsed, without events) and the byte span
    [start, end) of the traceEvents array.

    The array's closing bracket is the last `]` preceded by `}` or `[` after which the
    rest of the document parses as the remaining keys; brackets inside the events can
    never satisfy that (the document would close too early).
    """
    lead = text[:64].lstrip()
    if not lead:
        raise TraceFileError(display, "empty file (no JSON in it)")
    if not lead.startswith(b"{"):
        raise TraceFileError(display, "not a Kineto trace: the JSON is not an object")
    match = _TRACE_EVENTS_KEY.search(text)
    if match is None:
        _raise_not_a_trace(text, display)
    assert match is not None
    start = match.end() - 1
    head = text[: match.start()]
    pos = len(text)
    while True:
        pos = text.rfind(b"]", start, pos)
        if pos < 0:
            raise TraceFileError(display, "invalid JSON (the traceEvents list is not closed)")
        before = text[start:pos].rstrip()[-1:]
        if before in (b"}", b"["):
            try:
                meta = json.loads(head + b'"traceEvents": 0' + text[pos + 1:])
            except ValueError:
                meta = None
            if isinstance(meta, dict):
                meta.pop("traceEvents", None)
                return meta, start, pos + 1
        if len(text) - pos > 64 << 20:
            raise TraceFileError(display, "invalid JSON (cannot find the end of traceEvents)")


def _raise_not_a_trace(text: bytes, display: str) -> None:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise TraceFileError(display, f"invalid JSON ({_first_line(exc)})") from None
    if isinstance(doc, dict) and "traceEvents" in doc:
        raise TraceFileError(display, "not a Kineto trace: traceEvents is not a list")
    raise TraceFileError(display, "not a Kineto trace: no traceEvents list at the top level")


def _explain_read_error(exc: Exception) -> str:
    """Turn a DuckDB read error on the events array into a one-line problem."""
    text = _first_line(exc)
    if "Malformed JSON" in str(exc) or "JSON" in text:
        detail = re.sub(r'^.*?Malformed JSON in file "[^"]*"', "", text).strip(" ,:")
        return f"invalid JSON in traceEvents ({detail or text})"
    return f"could not be read ({text})"


def read_trace(path: Path, display: str | None = None, threads: int = 1,
               step_marker: str | None = None) -> RankTables:
    """Parse one Kineto trace file (``.json`` or ``.json.gz``) into rank tables.

    `step_marker` names an annotation whose calls are the steps (before ProfilerStep#N;
    docs/attribution.md, "Steps").

    Raises TraceFileError with a one-line problem for anything that is not a readable
    Kineto trace.
    """
    display = display or str(path)
    if not path.is_file():
        raise TraceFileError(display, "no such file")
    if path.stat().st_size == 0:
        raise TraceFileError(display, "empty file")
    text = _load_bytes(path, display)
    meta, start, end = _split_trace(text, display)
    head = text[start:start + HEAD_BYTES]
    exact = _needs_exact_text(head)
    events: bytes | memoryview = memoryview(text)[start:end]  # no copy on the fast path
    if exact:
        events = _TS_NUMBER.sub(rb'\1"\2"',
                                bytes(events).replace(b'"external id"', b'"External id"'))
    base_ns = _parse_base(meta.get("baseTimeNanoseconds"), display)
    distributed = meta.get("distributedInfo")
    distributed = distributed if isinstance(distributed, dict) else None

    con = duckdb.connect(":memory:", config={"threads": max(1, int(threads))})
    try:
        con.execute(_sql("macros.sql"))
        with tempfile.TemporaryDirectory(prefix="stepscope-") as tmp:
            events_file = Path(tmp) / "events.json"
            events_file.write_bytes(events)
            del events, text
            try:
                con.execute(READ_EXACT if exact else READ_FAST, {"path": str(events_file)})
            except duckdb.Error as exc:
                raise TraceFileError(display, _explain_read_error(exc)) from None
        con.execute(CREATE_META, {
            "base_ns": base_ns,
            "distributed_info": json.dumps(distributed) if distributed else None,
            "step_marker": step_marker or None,
        })
        tables, counts = _rank_tables(con, display)
        (step_source,), = con.execute("SELECT step_source FROM out_step_source").fetchall()
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
        step_source=step_source,
        base_time_ns=base_ns,
        trace_format=_trace_format(head, base_ns),
        category_counts=counts,
        tables=tables,
    )


def _rank_tables(con: duckdb.DuckDBPyConnection,
                 display: str) -> tuple[dict[str, pa.Table], dict[str, int]]:
    try:
        con.execute(_sql("rank_tables.sql"))
        con.execute(_sql("collectives.sql"))
        con.execute("DROP TABLE raw_events")
    except duckdb.Error as exc:
        raise TraceFileError(display, f"could not be analysed ({_first_line(exc)})") from None
    counts = {
        f"{cat}:{ph}" if ph != "X" else cat: int(n)
        for cat, ph, n in con.execute("SELECT * FROM category_counts ORDER BY 1, 2").fetchall()
    }
    if not any(k in counts for k in KNOWN_EVENT_CATEGORIES):
        raise TraceFileError(
            display, "not a Kineto trace: no CPU op, kernel or annotation events in traceEvents"
        )
    tables = {name: con.sql(f"SELECT * FROM out_{name}").to_arrow_table()
              for name in OUTPUT_TABLES}
    return tables, counts


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
    try:
        return int(str(raw).strip('"'))
    except ValueError:
        raise TraceFileError(display, f"baseTimeNanoseconds is not an integer ({raw!r})") from None


