"""Ingest the trace files of one run into the stepscope DuckDB file.

Per-file parsing (`ingest.reader.read_trace`) runs in a thread pool, a bounded number of
files ahead of the writer, so no process holds all ranks' events. The writer replaces the
run in one transaction: other runs are never touched, and an interrupted or strict-failed
ingest leaves the database as it was.

A problem with one file (any exception its reader raises, or a value in it that cannot
be stored) fails that file only: it is listed in `runs.failed_files` and the run is
`partial`. Every value of a file is checked before it is inserted, because a failed
INSERT would abort the whole transaction. Ctrl-C is handled by `InterruptGuard`: the
ingest stops at the next safe point and raises `Interrupted`, saying whether the run
was committed (read back from the database, not guessed).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from ingest.db import connect_write, ensure_schema, quote_identifier
from ingest.errors import (
    Interrupted,
    NothingIngestedError,
    StepscopeError,
    TraceFileError,
    as_file_error,
)
from ingest.interrupts import InterruptGuard
from ingest.limits import max_trace_bytes
from ingest.nccl.load import READERS as NCCL_READERS
from ingest.nccl.load import ingest_nccl_files
from ingest.reader import (
    KNOWN_EVENT_CATEGORIES,
    KNOWN_IGNORED_CATEGORIES,
    OUTPUT_TABLES,
    CancelToken,
    RankTables,
    read_trace,
)
from ingest.sources import NcclFile, TraceFile, collect_traces, default_run_name, rank_from_name

HOSTS_SQL = Path(__file__).parent / "sql" / "hosts.sql"
ProgressFn = Callable[[int, int, str], None]
AfterLoadFn = Callable[[duckdb.DuckDBPyConnection, str], None]
# Base tables (not views) of the main schema with a `run` column; the nightly history
# outlives re-ingests and pruned runs (analyzers/history.py).
RUN_TABLES_SQL = """
SELECT DISTINCT c.table_name FROM duckdb_columns() c
JOIN duckdb_tables() t ON t.table_oid = c.table_oid
WHERE c.column_name = 'run' AND NOT t.internal AND NOT t.temporary
  AND t.schema_name = 'main' AND t.database_name = current_database()
  AND c.table_name <> 'history'
"""
MAX_RANK = 2**31 - 1  # ranks and world sizes are INTEGER columns


@dataclass
class IngestResult:
    """What an ingest did; `exit_code` follows the CLI's contract."""

    run: str
    db: str
    ranks: list[int] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    n_files: int = 0
    nccl_files: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        return "partial" if self.failures else "complete"

    @property
    def exit_code(self) -> int:
        return 3 if self.failures else 0


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("stepscope")
    except Exception:  # noqa: BLE001 - not installed (running from a checkout)
        return "unknown"


def _ordered_parallel(
    files: Sequence[TraceFile], jobs: int, limit: int, cancel: CancelToken,
    step_marker: str | None = None
) -> Iterator[tuple[TraceFile, RankTables | TraceFileError]]:
    """Parse files in parallel, yield in input order, at most jobs + 1 files in flight.
    Any exception of a reader becomes that file's failure. When the consumer stops
    early (an error, Ctrl-C), reads in flight are cancelled and pending ones dropped, so
    leaving never waits for whole files to be parsed."""
    threads_each = max(1, (os.cpu_count() or 1) // max(1, min(jobs, len(files))))

    def task(tf: TraceFile) -> RankTables | TraceFileError:
        try:
            return read_trace(tf.path, tf.display, threads=threads_each,
                              step_marker=step_marker, max_bytes=limit, cancel=cancel)
        except Exception as exc:  # noqa: BLE001 - any reader problem fails this file only
            return as_file_error(tf.display, exc)

    pool = ThreadPoolExecutor(max_workers=jobs)
    pending: list[tuple[TraceFile, Future[RankTables | TraceFileError]]] = []
    try:
        queue = list(files)
        while queue or pending:
            while queue and len(pending) < jobs + 1:
                tf = queue.pop(0)
                pending.append((tf, pool.submit(task, tf)))
            tf, fut = pending.pop(0)
            yield tf, fut.result()
    finally:
        cancel.cancel()
        pool.shutdown(wait=True, cancel_futures=True)


def _checked_rank(value: Any, what: str, file: str) -> int | None:
    """A rank or world size from distributedInfo: a plain non-negative integer in
    INTEGER range (ASCII digits only), None when absent; a file failure otherwise."""
    if value is None:
        return None
    text = str(value).strip()
    if isinstance(value, bool) or not isinstance(value, int | str) \
            or not text.isascii() or not text.isdigit():
        raise TraceFileError(
            file, f"distributedInfo.{what} is not a non-negative integer ({value!r:.40})")
    number = int(text)
    if number > MAX_RANK:
        raise TraceFileError(
            file, f"distributedInfo.{what} {text:.40} is out of range (0 to {MAX_RANK})")
    return number


def _resolve_rank(tables: RankTables, n_files: int) -> tuple[int, str]:
    info = tables.distributed_info or {}
    rank = _checked_rank(info.get("rank"), "rank", tables.file)
    if rank is not None:
        return rank, "distributedInfo"
    from_name = rank_from_name(tables.file)
    if from_name is not None:
        return from_name, "file_name"
    if n_files == 1:
        return 0, "single_file"
    raise TraceFileError(
        tables.file,
        "cannot tell which rank this trace is: it has no distributedInfo.rank and no rank "
        "number in its name; rename it like rank3.json.gz",
    )


def _mode(table: pa.Table, column: str) -> Any:
    """Most frequent non-null value of a column (Arrow compute, no Python loop)."""
    counts = pc.value_counts(table.column(column).drop_null())
    if len(counts) == 0:
        return None
    best = pc.index(counts.field("counts"), pc.max(counts.field("counts")))
    return counts.field("values")[best.as_py()].as_py()


def _text(value: Any) -> str | None:
    """A trace value for a VARCHAR column: text as is, anything else as its JSON."""
    if value is None or isinstance(value, str):
        return value
    return _json(value) or str(value)


def _json(value: Any) -> str | None:
    """Valid JSON text for a JSON column, or None (NaN/Infinity, cycles, deep nesting)."""
    try:
        return json.dumps(value, allow_nan=False)
    except (ValueError, TypeError, RecursionError):
        return None


def _rank_row(run: str, rank: int, source: str, t: RankTables) -> dict[str, Any]:
    """The `ranks` row of a file, every value of its column's type (checked here, since
    a failed INSERT would abort the whole run)."""
    info = t.distributed_info or {}
    device = _mode(t.tables["gpu_ops"], "device")
    props = next((p for p in t.device_properties if p.get("id") == device), None)
    if props is None and device is None and len(t.device_properties) == 1:
        props = t.device_properties[0]
    cpu = t.tables["cpu_ops"]
    unknown = sorted(
        {k for k in t.category_counts if ":" not in k}
        - KNOWN_EVENT_CATEGORIES - KNOWN_IGNORED_CATEGORIES
    )
    world = _checked_rank(info.get("world_size"), "world_size", t.file)
    return {
        "run": run,
        "rank": rank,
        "rank_source": source,
        "world_size": world,
        "host": t.host_name,
        "host_source": "host_name" if t.host_name else None,
        "node_gpus": len(t.device_properties) or None,
        "trace_name": t.trace_name,
        "step_source": t.step_source,
        "pid": _mode(cpu, "pid"),
        "device": device,
        "device_name": _text(props.get("name")) if props else None,
        "device_properties": _json(props) if props else None,
        "backend": _text(info.get("backend")),
        "nccl_version": _text(info.get("nccl_version")),
        "distributed_info": _json(info) if info else None,
        "source_file": t.file,
        "trace_format": t.trace_format,
        "base_time_ns": t.base_time_ns,
        "trace_start_ns": pc.min(cpu.column("start_ns")).as_py(),
        "trace_end_ns": pc.max(cpu.column("end_ns")).as_py(),
        "n_events": t.n_events,
        "category_counts": json.dumps(t.category_counts),
        "unknown_categories": json.dumps(unknown),
    }


INSERT_RANK_TABLE = "INSERT INTO {table} BY NAME SELECT $run AS run, $rank AS rank, * FROM staged"
INSERT_PROCESS_GROUPS = """
INSERT INTO process_groups BY NAME
SELECT $run AS run, * FROM staged
WHERE pg_name NOT IN (SELECT pg_name FROM process_groups WHERE run = $run)
"""
# Groups only named in collective args (traces without pg_config).
INSERT_ARG_GROUPS = """
INSERT INTO process_groups BY NAME
SELECT run, pg_name, any_value(pg_desc) AS pg_desc,
       CAST(regexp_extract_all(any_value(pg_ranks), '-?\\d+') AS INTEGER[]) AS ranks,
       max(group_size) AS size, NULL AS backend,
       bool_or(pg_ranks LIKE '%...%') AS ranks_truncated, 'collective_args' AS source
FROM collectives
WHERE run = $run AND pg_name IS NOT NULL
  AND pg_name NOT IN (SELECT pg_name FROM process_groups WHERE run = $run)
GROUP BY run, pg_name
"""
INSERT_RANK_ROW = "INSERT INTO ranks BY NAME SELECT * FROM staged_rank"
INSERT_RUN_ROW = """
INSERT INTO runs VALUES ($run, $ingested_at, $status, $world_size, $n_ranks, $n_files,
                         $sources, $failed, $version)
"""


def _insert_rank(con: duckdb.DuckDBPyConnection, run: str, rank: int, t: RankTables,
                 row: dict[str, Any]) -> None:
    for table in OUTPUT_TABLES:
        con.register("staged", t.tables[table])
        try:
            if table == "process_groups":
                con.execute(INSERT_PROCESS_GROUPS, {"run": run})
            else:
                con.execute(INSERT_RANK_TABLE.format(table=table), {"run": run, "rank": rank})
        finally:
            con.unregister("staged")
    con.register("staged_rank", pa.Table.from_pylist([row]))
    try:
        con.execute(INSERT_RANK_ROW)
    finally:
        con.unregister("staged_rank")


def ingest(
    paths: Sequence[str | Path],
    db: str | Path = "stepscope.duckdb",
    run: str | None = None,
    strict: bool = False,
    jobs: int | None = None,
    progress: ProgressFn | None = None,
    after_load: AfterLoadFn | None = None,
    step_marker: str | None = None,
    max_bytes: int | None = None,
) -> IngestResult:
    """Ingest the traces of every rank of one run; replaces a run of the same name.

    `after_load(con, run)` runs inside the same transaction once the raw tables are in
    (the analyzers materialize their derived tables there), so a run is never visible
    half-analysed. `max_bytes` caps each trace's JSON text (ingest.limits).

    Raises UsageError for bad arguments, NothingIngestedError when no file could be
    read (or, with strict, when any file failed); the database is then unchanged.
    Raises Interrupted on Ctrl-C, saying whether the run was committed.
    """
    run_name = run or default_run_name(paths)
    limit = max_trace_bytes(max_bytes)
    result = IngestResult(run=run_name, db=str(db))
    with InterruptGuard() as guard, collect_traces(paths, limit) as traces:
        result.failures.extend(traces.failures)
        result.skipped = traces.skipped
        nccl = [f for f in traces.nccl if f.kind in NCCL_READERS]
        result.skipped += [f.display for f in traces.nccl if f.kind not in NCCL_READERS]
        result.n_files = len(traces.files) + len(traces.failures) + len(nccl)
        if guard.hit:
            raise Interrupted(_interrupt_message(run_name, db, False), committed=False)
        con = connect_write(db)
        guard.add_stopper(con.interrupt)
        try:
            _transaction(con, run_name, [str(p) for p in paths], (traces.files, nccl), result,
                         _Options(strict, jobs, progress, after_load, limit, step_marker),
                         guard)
        finally:
            con.close()
    return result


@dataclass(frozen=True)
class _Options:
    strict: bool
    jobs: int | None
    progress: ProgressFn | None
    after_load: AfterLoadFn | None
    limit: int
    step_marker: str | None = None


def _transaction(con: duckdb.DuckDBPyConnection, run: str, sources: list[str],
                 files: tuple[Sequence[TraceFile], Sequence[NcclFile]], result: IngestResult,
                 opts: _Options, guard: InterruptGuard) -> None:
    """Replace the run in one transaction; on Ctrl-C, roll back and raise Interrupted
    with what the database actually holds."""
    stamp = datetime.now(UTC).replace(tzinfo=None)
    try:
        ensure_schema(con)
        con.execute("BEGIN TRANSACTION")
        _ingest_files(con, run, files[0], result, opts, guard)
        result.nccl_files = ingest_nccl_files(con, run, files[1], result.failures)
        guard.check()
        _finish_run(con, run, sources, result, opts.strict, stamp)
        if opts.after_load is not None:
            opts.after_load(con, run)
        guard.check()
        con.execute("COMMIT")
    except BaseException as exc:
        _rollback(con)
        if guard.hit or isinstance(exc, KeyboardInterrupt | duckdb.InterruptException):
            committed = _committed(con, run, stamp)
            raise Interrupted(_interrupt_message(run, result.db, committed),
                              committed=bool(committed)) from None
        raise
    if guard.hit:  # Ctrl-C arrived during the COMMIT, which completed
        raise Interrupted(_interrupt_message(run, result.db, True), committed=True)


def _rollback(con: duckdb.DuckDBPyConnection) -> None:
    try:
        con.execute("ROLLBACK")
    except duckdb.Error:
        pass  # no transaction open (it failed to begin, or the COMMIT went through)


def _committed(con: duckdb.DuckDBPyConnection, run: str, stamp: datetime) -> bool | None:
    """Does the database hold this ingest's run (None: could not tell)?"""
    try:
        rows = con.execute("SELECT count(*) FROM runs WHERE run = $run AND ingested_at = $t",
                           {"run": run, "t": stamp}).fetchall()
    except duckdb.Error:
        return None
    return bool(rows[0][0])


def _interrupt_message(run: str, db: str | Path, committed: bool | None) -> str:
    if committed is None:
        return (f"interrupted: could not tell whether run '{run}' was committed to {db}; "
                "check with `stepscope summary`")
    if committed:
        return f"interrupted: run '{run}' was committed to {db} (it is complete)"
    return f"interrupted: run '{run}' was not ingested; {db} is unchanged"


def _delete_run(con: duckdb.DuckDBPyConnection, run: str) -> None:
    """Delete the run from every table with a `run` column, derived tables included;
    names read from the database are quoted, never spliced."""
    for (table,) in con.execute(RUN_TABLES_SQL).fetchall():
        con.execute(f"DELETE FROM {quote_identifier(table)} WHERE run = $run", {"run": run})


def _ingest_files(con: duckdb.DuckDBPyConnection, run: str, files: Sequence[TraceFile],
                  result: IngestResult, opts: _Options, guard: InterruptGuard) -> None:
    _delete_run(con, run)
    claimed: dict[int, str] = {}
    jobs = max(1, opts.jobs or (os.cpu_count() or 1))
    cancel = CancelToken()
    guard.add_stopper(cancel.cancel)
    parsed_files = _ordered_parallel(files, jobs, opts.limit, cancel, opts.step_marker)
    for done, (tf, parsed) in enumerate(parsed_files, start=1):
        guard.check()
        if opts.progress:
            opts.progress(done, len(files), tf.display)
        try:
            if isinstance(parsed, TraceFileError):
                raise parsed
            rank, source = _resolve_rank(parsed, len(files))
            if rank in claimed:
                raise TraceFileError(
                    tf.display, f"rank {rank} is also claimed by {claimed[rank]}; "
                    "put the traces of each run in its own --run")
            row = _rank_row(run, rank, source, parsed)
            _store_rank(con, run, rank, parsed, row)
            claimed[rank] = tf.display
            result.ranks.append(rank)
        except TraceFileError as exc:
            if opts.strict:
                raise NothingIngestedError(f"{exc} (--strict: nothing was ingested)") from None
            result.failures.append((exc.file, exc.problem))


def _store_rank(con: duckdb.DuckDBPyConnection, run: str, rank: int, t: RankTables,
                row: dict[str, Any]) -> None:
    """Insert one rank; a database error here has aborted the transaction, so it ends
    the ingest (naming the file) instead of surfacing as 'transaction is aborted'."""
    try:
        _insert_rank(con, run, rank, t, row)
    except duckdb.InterruptException:
        raise
    except (duckdb.Error, pa.ArrowException) as exc:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StepscopeError(
            f"{t.file}: could not be stored ({text}); run '{run}' was not ingested, "
            "the database is unchanged (please report this file)") from None


def _finish_run(con: duckdb.DuckDBPyConnection, run: str, sources: list[str],
                result: IngestResult, strict: bool, stamp: datetime) -> None:
    if strict and result.failures:
        file, problem = result.failures[0]
        raise NothingIngestedError(f"{file}: {problem} (--strict: nothing was ingested)")
    if not result.ranks and not result.nccl_files:
        raise NothingIngestedError(
            f"nothing ingested into run '{run}': none of the {result.n_files} trace file(s) "
            "could be read (see the errors above)", result.failures)
    con.execute(INSERT_ARG_GROUPS, {"run": run})
    con.execute(HOSTS_SQL.read_text(), {"run": run})
    (world,), = con.execute(
        "SELECT max(world_size) FROM ranks WHERE run = $run", {"run": run}).fetchall()
    world_size = world or _nccl_world_size(con, run) or len(result.ranks)
    con.execute(INSERT_RUN_ROW, {
        "run": run,
        "ingested_at": stamp,
        "status": result.status,
        "world_size": world_size,
        "n_ranks": len(result.ranks),
        "n_files": result.n_files,
        "sources": json.dumps(sources),
        "failed": json.dumps([{"file": f, "error": e} for f, e in result.failures]),
        "version": _version(),
    })


def _nccl_world_size(con: duckdb.DuckDBPyConnection, run: str) -> int | None:
    """Without Kineto ranks: the largest process group the Flight Recorder dumps name."""
    (size,), = con.execute(
        "SELECT max(len(ranks)) FROM fr_groups WHERE run = $run", {"run": run}).fetchall()
    return int(size) if size else None


__all__ = ["IngestResult", "ingest"]
