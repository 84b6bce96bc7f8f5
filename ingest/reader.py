"""Read one Kineto trace file into rank tables (Arrow), independently of every other file.

`read_trace` is the unit of parallel work: it takes a path, opens its own connection to
the process's in-memory DuckDB (its temp tables are its own; `connection`), parses the
events with DuckDB's JSON reader (no Python loop over events) and returns the rank's
tables. Nothing here knows about the run or the target database, so
the same function can run in a thread, a process or a Ray task.

How a file is read:
1. A gzipped file is decompressed in a stream to a temporary file, at most the per-trace
   limit (ingest/limits.py); the JSON text is memory-mapped, never held whole in memory
   (kineto_text.py). It is split into the `traceEvents` array and the small rest
   (schemaVersion, distributedInfo, deviceProperties, baseTimeNanoseconds, ...), which
   Python's json parses; finding the end of the array looks only at the document's tail
   (json_split.py). What went wrong is said in one line (read_errors.py).
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
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from stepscope.ingest.cancel import CancelToken, watching
from stepscope.ingest.comm_kernels import CommPattern, any_pattern, comm_patterns, pattern_rows
from stepscope.ingest.errors import MachineFileError, TraceFileError, machine_problem
from stepscope.ingest.json_read import read_parameters
from stepscope.ingest.json_split import split_trace
from stepscope.ingest.kineto_text import HEAD_BYTES, INFLATE_CHUNK, check_regular_file, mapped_json
from stepscope.ingest.limits import max_trace_bytes
from stepscope.ingest.nesting import build_cpu_depth
from stepscope.ingest.read_errors import (
    bad_field,
    conversion_problem,
    explain_read_error,
    first_line,
    without_paths,
)
from stepscope.ingest.read_pool import connection
from stepscope.ingest.sql_files import run_script, sql

if TYPE_CHECKING:
    import pyarrow as pa

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
    """What the `ranks` row needs from the op tables (ingest/sql/read/rank_outputs.sql)."""

    device: int | None
    pid: int | None
    trace_start_ns: int | None
    trace_end_ns: int | None


# torch.profiler's settings that Kineto writes at a trace's top level (1 = on); the report
# gives the true reason for a missing kind of evidence from them (docs/schema.md, `ranks`)
PROFILER_SETTINGS = ("record_shapes", "profile_memory", "with_stack", "with_flops",
                     "with_modules")


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
    # the profiler's settings the trace's top level records (PROFILER_SETTINGS), as written
    profiler_config: dict[str, int] | None = None

    @property
    def n_events(self) -> int:
        return sum(self.category_counts.values())


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
    check_regular_file(path, display)
    if path.stat().st_size == 0:
        raise TraceFileError(display, "empty file")
    limit = max_trace_bytes(max_bytes)
    # beside the stage folder when there is one: a worker killed mid-read (the ingest
    # was stopped) leaves its decompressed copy where the ingest's cleanup removes it
    scratch = str(stage_dir.parent) if stage_dir is not None else None
    with tempfile.TemporaryDirectory(prefix="stepscope-", dir=scratch) as tmp:
        with mapped_json(path, display, Path(tmp), limit, cancel) as (mm, copy):
            meta, start, end = split_trace(mm, display)
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
        con = connection(max(1, int(threads)))
        try:
            with watching(cancel, con):
                loaded = _load_events(con, events_file, exact,
                                      (base_ns, distributed, step_marker), display, stage_dir,
                                      comm_kernels or comm_patterns())
        finally:
            con.close()
    props = meta.get("deviceProperties")
    host = meta.get("host_name")
    trace_name = meta.get("traceName")
    settings = {k: meta[k] for k in PROFILER_SETTINGS
                if isinstance(meta.get(k), (int, bool)) and not isinstance(meta.get(k), float)}
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
        profiler_config={k: int(v) for k, v in settings.items()} or None,
    )


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
        con.execute(sql("read/read_events.sql"), {**read_parameters(events_file),
                                              "ts_type": "VARCHAR" if exact else "DOUBLE"})
    except duckdb.Error as exc:
        if (machine := machine_problem(exc)) is not None:  # out of memory: not the file's
            raise MachineFileError(display, machine) from None
        problem = None if isinstance(exc, duckdb.InterruptException) else bad_field(
            con, events_file, exact)
        raise TraceFileError(display, problem or explain_read_error(exc)) from None
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


def _build_gpu_full(con: duckdb.DuckDBPyConnection) -> None:
    """Temp table gpu_full: the ASOF join that puts unlinked GPU ops into the steps whose
    graph replays lost their launches only where there are such steps (a cheap count
    first: DuckDB plans and runs the join even against an empty table)."""
    (fallback,), = con.execute(sql("read/graph_fallback.sql")).fetchall()
    if fallback:
        con.execute(sql("read/gpu_full.sql"))
    else:
        con.execute(sql("read/gpu_full_linked.sql"))


def _rank_tables(con: duckdb.DuckDBPyConnection, display: str,
                 comm_any: str, events_file: Path, exact: bool
                 ) -> tuple[str | None, RankSummary, dict[str, int]]:
    """Build the out_* tables from raw_events; returns the step source, the summary row
    and the event counts per category (`cat:ph` for other phases than X). `comm_any`
    matches every communication-kernel name (comm_kernels.any_pattern)."""
    try:
        run_script(con, "read/cpu_raw.sql", {})
        build_cpu_depth(con)
        run_script(con, "read/rank_tables.sql", {"comm_any": comm_any})
        _build_gpu_full(con)
        run_script(con, "read/rank_outputs.sql", {})
        range_device = _range_device(con)
        con.execute(sql("read/memory_events.sql"))
        con.execute(sql("read/collectives.sql"))
        (step_source, device, pid, start, end, timed, categories, n_memory), = con.execute(
            sql("read/rank_result.sql")).fetchall()
        if n_memory:  # the allocator's args need a second, narrow read of the file
            run_script(con, "read/memory_bytes.sql", read_parameters(events_file))
        device = range_device if device is None else device
    except (duckdb.ConversionException, duckdb.OutOfRangeException) as exc:
        # the exact path reads `ts` as text: a `ts` that is no number fails only here; a
        # `ts` or `dur` within 64 bits of ns whose sum with the base time is not (9e15 µs,
        # year 2255) overflows in the sums ("Overflow in addition of INT64")
        problem = bad_field(con, events_file, exact) or conversion_problem(exc)
        raise TraceFileError(display, problem) from None
    except duckdb.Error as exc:
        raise TraceFileError(display, f"could not be analysed ({without_paths(first_line(exc))})"
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


