"""Read one Kineto trace file into rank tables (Arrow), independently of every other file.

`read_trace` is the unit of parallel work: it takes a path, opens its own in-memory
DuckDB, parses the JSON with DuckDB's reader (no Python loop over events) and returns
the rank's tables. Nothing here knows about the run or the target database, so the
same function can run in a thread, a process or a Ray task.

Two read paths:
* fast: DuckDB reads the (gzipped) file directly, ``ts`` as DOUBLE. Exact to the ns for
  relative timestamps (``baseTimeNanoseconds``) and for integer-µs timestamps.
* exact-text: for absolute timestamps with a ns fraction (19 significant digits, more
  than a DOUBLE holds) and for 2021-era traces whose args say ``external id``; the file
  is decompressed once, ``ts`` values are quoted so DuckDB keeps their text, and the
  lower-case key is renamed.
"""

from __future__ import annotations

import gzip
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


def _columns(ts_type: str) -> str:
    """The `columns` argument of read_json: the top-level keys and event fields we use."""
    args = _struct([(k, "VARCHAR") for k in _ARG_TEXT] + [(k, "JSON") for k in _ARG_JSON])
    event = _struct([
        ("ph", "VARCHAR"), ("cat", "VARCHAR"), ("name", "VARCHAR"), ("pid", "VARCHAR"),
        ("tid", "VARCHAR"), ("ts", ts_type), ("dur", "DOUBLE"), ("args", args),
    ])
    top = {
        "schemaVersion": "VARCHAR",
        "deviceProperties": "JSON",
        "distributedInfo": "JSON",
        "baseTimeNanoseconds": "VARCHAR",
        "host_name": "VARCHAR",
        "traceEvents": event + "[]",
    }
    return "{" + ", ".join(f"'{k}': '{v}'" for k, v in top.items()) + "}"


READ_FAST = (
    "CREATE OR REPLACE TEMP TABLE doc AS SELECT * FROM read_json($path, "
    f"columns={_columns('DOUBLE')}, format='unstructured', "
    "maximum_object_size=4294967295, compression=$compression)"
)
READ_EXACT = (
    "CREATE OR REPLACE TEMP TABLE doc AS SELECT * FROM read_json($path, "
    f"columns={_columns('VARCHAR')}, format='unstructured', "
    "maximum_object_size=4294967295, compression='none')"
)

OUTPUT_TABLES = (
    "cpu_ops", "gpu_ops", "gpu_annotations", "steps", "threads", "process_groups", "collectives",
)

_LEGACY_CATEGORY = re.compile(rb'"cat"\s*:\s*"(?:Operator|Runtime|Kernel|Memcpy|Memset)"')
_TS_WITH_FRACTION = re.compile(rb'"ts"\s*:\s*(\d+)\.\d')
_TS_NUMBER = re.compile(rb'("ts"\s*:\s*)(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)')


@dataclass
class RankTables:
    """What one trace file holds, ready to be inserted under a run and a rank."""

    file: str
    distributed_info: dict[str, Any] | None
    device_properties: list[dict[str, Any]]
    host_name: str | None
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


def _read_head(path: Path, gzipped: bool, display: str) -> bytes:
    try:
        if gzipped:
            with gzip.open(path, "rb") as fh:
                return fh.read(HEAD_BYTES)
        with open(path, "rb") as fh:
            return fh.read(HEAD_BYTES)
    except (OSError, EOFError, zlib.error) as exc:
        raise TraceFileError(display, _gzip_problem(exc)) from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


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


def _exact_text_copy(path: Path, gzipped: bool, display: str, tmpdir: Path) -> Path:
    """Decompress, quote every ts value and rename `external id`; returns the new file."""
    try:
        raw = gzip.open(path, "rb").read() if gzipped else path.read_bytes()
    except (OSError, EOFError, zlib.error) as exc:
        raise TraceFileError(display, _gzip_problem(exc)) from None
    raw = raw.replace(b'"external id"', b'"External id"')
    raw = _TS_NUMBER.sub(rb'\1"\2"', raw)
    out = tmpdir / "exact.json"
    out.write_bytes(raw)
    return out


def _gzip_problem(exc: BaseException) -> str:
    if isinstance(exc, EOFError):
        return "truncated gzip file (it ends before the end-of-stream marker; re-copy it)"
    return f"corrupt gzip data ({_first_line(exc)})"


def _explain_duckdb_error(path: Path, gzipped: bool, display: str, exc: Exception) -> str:
    """Turn a DuckDB read error into a one-line problem statement."""
    if gzipped:
        try:
            with gzip.open(path, "rb") as fh:
                while fh.read(1 << 24):
                    pass
        except (OSError, EOFError, zlib.error) as gz_exc:
            return _gzip_problem(gz_exc)
    text = str(exc)
    if "Malformed JSON" in text or "JSON" in text and "parse" in text.lower():
        detail = text.split("\n")[0]
        detail = re.sub(r"^.*?Malformed JSON", "malformed JSON", detail)
        detail = detail.replace(f'in file "{path}"', "").replace("  ", " ")
        return f"invalid JSON ({detail.strip()})"
    if "Expected ARRAY" in text or "Could not convert" in text or "Conversion Error" in text:
        return "not a Kineto trace: traceEvents is not a list of event objects"
    return f"could not be read ({_first_line(exc)})"


def read_trace(path: Path, display: str | None = None, threads: int = 1) -> RankTables:
    """Parse one Kineto trace file (``.json`` or ``.json.gz``) into rank tables.

    Raises TraceFileError with a one-line problem for anything that is not a readable
    Kineto trace.
    """
    display = display or str(path)
    if not path.is_file():
        raise TraceFileError(display, "no such file")
    if path.stat().st_size == 0:
        raise TraceFileError(display, "empty file")
    with open(path, "rb") as fh:
        gzipped = fh.read(2) == GZIP_MAGIC
    head = _read_head(path, gzipped, display)
    stripped = head.lstrip()
    if not stripped:
        raise TraceFileError(display, "empty file (no JSON in it)")
    if not stripped.startswith(b"{"):
        raise TraceFileError(display, "not a Kineto trace: the JSON is not an object")

    con = duckdb.connect(":memory:")
    try:
        con.execute(f"SET threads = {int(threads)}")
        con.execute("SET preserve_insertion_order = false")
        con.execute(_sql("macros.sql"))
        with tempfile.TemporaryDirectory(prefix="stepscope-") as tmp:
            try:
                if _needs_exact_text(head):
                    exact = _exact_text_copy(path, gzipped, display, Path(tmp))
                    con.execute(READ_EXACT, {"path": str(exact)})
                else:
                    con.execute(
                        READ_FAST,
                        {"path": str(path), "compression": "gzip" if gzipped else "none"},
                    )
            except duckdb.Error as exc:
                raise TraceFileError(
                    display, _explain_duckdb_error(path, gzipped, display, exc)
                ) from None
        return _rank_tables(con, display, head)
    finally:
        con.close()


def _rank_tables(con: duckdb.DuckDBPyConnection, display: str, head: bytes) -> RankTables:
    rows = con.execute(
        "SELECT count(*), count(traceEvents), any_value(baseTimeNanoseconds), "
        "any_value(CAST(distributedInfo AS VARCHAR)), "
        "any_value(CAST(deviceProperties AS VARCHAR)), any_value(host_name) FROM doc"
    ).fetchone()
    assert rows is not None
    n_docs, n_with_events, base_raw, dist_raw, props_raw, host_name = rows
    if n_docs != 1 or n_with_events != 1:
        raise TraceFileError(display, "not a Kineto trace: no traceEvents list at the top level")
    base_ns = _parse_base(base_raw, display)
    distributed = _json_object(dist_raw)
    props = _json_list(props_raw)
    try:
        con.execute(_sql("rank_tables.sql"))
        con.execute(_sql("collectives.sql"))
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
    return RankTables(
        file=display,
        distributed_info=distributed,
        device_properties=props,
        host_name=host_name,
        base_time_ns=base_ns,
        trace_format=_trace_format(head, base_ns),
        category_counts=counts,
        tables=tables,
    )


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


def _parse_base(raw: str | None, display: str) -> int | None:
    if raw is None:
        return None
    try:
        return int(str(raw).strip('"'))
    except ValueError:
        raise TraceFileError(display, f"baseTimeNanoseconds is not an integer ({raw!r})") from None


def _json_object(raw: str | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    value = json.loads(raw)
    return value if isinstance(value, dict) else None


def _json_list(raw: str | None) -> list[dict[str, Any]]:
    if raw is None:
        return []
    value = json.loads(raw)
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []
