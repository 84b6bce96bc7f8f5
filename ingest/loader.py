"""Ingest the trace files of one run into the stepscope DuckDB file.

Per-file parsing (`ingest.reader.read_trace`) runs in a thread pool, a bounded number of
files ahead of the writer, so no process holds all ranks' events. The writer replaces the
run in one transaction: other runs are never touched, and an interrupted or strict-failed
ingest leaves the database as it was.
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

from ingest.db import connect_write, ensure_schema
from ingest.errors import NothingIngestedError, TraceFileError
from ingest.nccl.load import READERS as NCCL_READERS
from ingest.nccl.load import ingest_nccl_files
from ingest.reader import (
    KNOWN_EVENT_CATEGORIES,
    KNOWN_IGNORED_CATEGORIES,
    OUTPUT_TABLES,
    RankTables,
    read_trace,
)
from ingest.sources import TraceFile, collect_traces, default_run_name, rank_from_name

HOSTS_SQL = Path(__file__).parent / "sql" / "hosts.sql"
ProgressFn = Callable[[int, int, str], None]
AfterLoadFn = Callable[[duckdb.DuckDBPyConnection, str], None]
RUN_TABLES_SQL = (
    "SELECT DISTINCT c.table_name FROM duckdb_columns() c "
    "JOIN duckdb_tables() t ON t.table_name = c.table_name AND t.schema_name = c.schema_name "
    "AND t.database_name = c.database_name "
    "WHERE c.column_name = 'run' AND NOT c.internal AND c.schema_name = 'main' "
    "AND c.database_name = current_database() "
    # the nightly history outlives re-ingests and pruned runs (analyzers/history.py)
    "AND c.table_name <> 'history'"
)


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
    files: Sequence[TraceFile], jobs: int, step_marker: str | None = None
) -> Iterator[tuple[TraceFile, RankTables | TraceFileError]]:
    """Parse files in parallel, yield in input order, at most jobs + 1 files in flight."""
    threads_each = max(1, (os.cpu_count() or 1) // max(1, min(jobs, len(files))))

    def task(tf: TraceFile) -> RankTables | TraceFileError:
        try:
            return read_trace(tf.path, tf.display, threads=threads_each,
                              step_marker=step_marker)
        except TraceFileError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        pending: list[tuple[TraceFile, Future[RankTables | TraceFileError]]] = []
        queue = list(files)
        while queue or pending:
            while queue and len(pending) < jobs + 1:
                tf = queue.pop(0)
                pending.append((tf, pool.submit(task, tf)))
            tf, fut = pending.pop(0)
            yield tf, fut.result()


def _resolve_rank(tables: RankTables, n_files: int) -> tuple[int, str]:
    info = tables.distributed_info or {}
    rank = info.get("rank")
    if isinstance(rank, int) or (isinstance(rank, str) and rank.strip().isdigit()):
        return int(rank), "distributedInfo"
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


def _rank_row(run: str, rank: int, source: str, t: RankTables) -> dict[str, Any]:
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
    world = info.get("world_size")
    return {
        "run": run,
        "rank": rank,
        "rank_source": source,
        "world_size": int(world) if isinstance(world, int) else None,
        "host": t.host_name,
        "host_source": "host_name" if t.host_name else None,
        "node_gpus": len(t.device_properties) or None,
        "trace_name": t.trace_name,
        "step_source": t.step_source,
        "pid": _mode(cpu, "pid"),
        "device": device,
        "device_name": props.get("name") if props else None,
        "device_properties": json.dumps(props) if props else None,
        "backend": info.get("backend"),
        "nccl_version": info.get("nccl_version"),
        "distributed_info": json.dumps(info) if info else None,
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
) -> IngestResult:
    """Ingest the traces of every rank of one run; replaces a run of the same name.

    `after_load(con, run)` runs inside the same transaction once the raw tables are in
    (the analyzers materialize their derived tables there), so a run is never visible
    half-analysed.

    Raises UsageError for bad arguments, NothingIngestedError when no file could be
    read (or, with strict, when any file failed); the database is then unchanged.
    """
    run_name = run or default_run_name(paths)
    result = IngestResult(run=run_name, db=str(db))
    with collect_traces(paths) as traces:
        result.failures.extend(traces.failures)
        result.skipped = traces.skipped
        nccl = [f for f in traces.nccl if f.kind in NCCL_READERS]
        result.skipped += [f.display for f in traces.nccl if f.kind not in NCCL_READERS]
        result.n_files = len(traces.files) + len(traces.failures) + len(nccl)
        con = connect_write(db)
        try:
            ensure_schema(con)
            con.execute("BEGIN TRANSACTION")
            try:
                _ingest_files(con, run_name, traces.files, result, strict, jobs, progress,
                              step_marker)
                result.nccl_files = ingest_nccl_files(con, run_name, nccl, result.failures)
                _finish_run(con, run_name, [str(p) for p in paths], result, strict)
                if after_load is not None:
                    after_load(con, run_name)
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")
        finally:
            con.close()
    return result


def _ingest_files(con: duckdb.DuckDBPyConnection, run: str, files: Sequence[TraceFile],
                  result: IngestResult, strict: bool, jobs: int | None,
                  progress: ProgressFn | None, step_marker: str | None = None) -> None:
    # every table with a `run` column, derived tables included
    for (table,) in con.execute(RUN_TABLES_SQL).fetchall():
        con.execute(f'DELETE FROM "{table}" WHERE run = $run', {"run": run})
    claimed: dict[int, str] = {}
    jobs = max(1, jobs or (os.cpu_count() or 1))
    for done, (tf, parsed) in enumerate(_ordered_parallel(files, jobs, step_marker), start=1):
        if progress:
            progress(done, len(files), tf.display)
        try:
            if isinstance(parsed, TraceFileError):
                raise parsed
            rank, source = _resolve_rank(parsed, len(files))
            if rank in claimed:
                raise TraceFileError(
                    tf.display, f"rank {rank} is also claimed by {claimed[rank]}; "
                    "put the traces of each run in its own --run")
            claimed[rank] = tf.display
            _insert_rank(con, run, rank, parsed, _rank_row(run, rank, source, parsed))
            result.ranks.append(rank)
        except TraceFileError as exc:
            if strict:
                raise NothingIngestedError(f"{exc} (--strict: nothing was ingested)") from None
            result.failures.append((exc.file, exc.problem))


def _finish_run(con: duckdb.DuckDBPyConnection, run: str, sources: list[str],
                result: IngestResult, strict: bool) -> None:
    if strict and result.failures:
        file, problem = result.failures[0]
        raise NothingIngestedError(f"{file}: {problem} (--strict: nothing was ingested)")
    if not result.ranks and not result.nccl_files:
        raise NothingIngestedError(
            f"nothing ingested into run '{run}': none of the {result.n_files} trace file(s) "
            "could be read (see the errors above)")
    con.execute(INSERT_ARG_GROUPS, {"run": run})
    con.execute(HOSTS_SQL.read_text(), {"run": run})
    (world,), = con.execute(
        "SELECT max(world_size) FROM ranks WHERE run = $run", {"run": run}).fetchall()
    world_size = world or _nccl_world_size(con, run) or len(result.ranks)
    con.execute(INSERT_RUN_ROW, {
        "run": run,
        "ingested_at": datetime.now(UTC).replace(tzinfo=None),
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
