"""One NCCL evidence file as an independent task (ingest/tasks.py `NcclTask`): parse it,
write its rows as Parquet files into the task's own folder, and return its
`nccl_sources` row. Like the Kineto task, it never touches the target database, so it
runs inline, in a worker process or on Ray (ingest/executors.py) with the same result;
the writer appends the files (ingest/nccl/load.py).

With `--ranks`, a file whose ranks are all outside the subset is skipped: a Flight
Recorder dump named `<prefix><rank>` before it is read, an NCCL_DEBUG log once its
processes' global ranks are known. Inspector and profiler-plugin files name only
communicator-local ranks, so they are always kept.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from stepscope.ingest.cancel import CancelToken
from stepscope.ingest.errors import MachineFileError, as_file_error
from stepscope.ingest.nccl.debug_log import read_nccl_log
from stepscope.ingest.nccl.flight_recorder import rank_from_dump_name, read_flight_recorder
from stepscope.ingest.nccl.inspector import read_inspector
from stepscope.ingest.nccl.profiler_plugin import read_profiler_ops
from stepscope.ingest.nccl.sniff import FLIGHT_RECORDER, NCCL_INSPECTOR, NCCL_LOG, NCCL_PROFILER
from stepscope.ingest.tasks import NcclParsed, NcclTask, Outcome, RankFailed, RankSkipped

CANONICAL_OPS = {"allreduce": "all_reduce", "allgather": "all_gather",
                 "reducescatter": "reduce_scatter", "alltoall": "all_to_all",
                 "broadcast": "broadcast", "reduce": "reduce", "send": "send", "recv": "recv",
                 "gather": "gather", "scatter": "scatter"}


def run_nccl_task(task: NcclTask, cancel: CancelToken | None = None) -> Outcome:
    """Run one task; any problem with the file becomes its `RankFailed`."""
    try:
        stage = Path(task.stage_dir)
        stage.mkdir(parents=True, exist_ok=True)
        if task.kind == FLIGHT_RECORDER and task.ranks is not None:
            named = rank_from_dump_name(task.display)
            if named is not None and named not in task.ranks:
                return RankSkipped(task.index, task.display)
        parsed = READERS[task.kind](task, stage, cancel)
        if task.ranks is not None and parsed.ranks \
                and not any(r in task.ranks for r in parsed.ranks):
            return RankSkipped(task.index, task.display)
        return parsed
    except Exception as exc:  # noqa: BLE001 - any reader problem fails this file only
        error = as_file_error(task.display, exc)
        return RankFailed(task.index, error.file, error.problem,
                          machine=isinstance(error, MachineFileError))


def _source(task: NcclTask, fmt: str, **fields: str | int | None) -> dict[str, str | int | None]:
    row: dict[str, str | int | None] = {
        "source_file": task.display, "kind": task.kind, "format": fmt, "rank": None,
        "rank_source": None, "version": None, "nccl_version": None, "host": None,
        "n_records": None, "note": None}
    row.update(fields)
    return row


def _write(stage: Path, table: str, rows: pa.Table) -> tuple[str, str]:
    path = stage / f"{table}.parquet"
    pq.write_table(rows, path)
    return table, str(path)


def _flight_recorder(task: NcclTask, stage: Path, cancel: CancelToken | None) -> NcclParsed:
    dump = read_flight_recorder(Path(task.path), task.display, task.max_bytes)
    rank = pa.array([dump.rank] * dump.groups.num_rows, pa.int32())
    groups = dump.groups.append_column("rank", rank)
    entries = dump.entries.append_column(
        "rank", pa.array([dump.rank] * dump.entries.num_rows, pa.int32()))
    source = _source(task, dump.format, rank=dump.rank, rank_source=dump.rank_source,
                     version=dump.version, nccl_version=dump.comm_lib_version,
                     n_records=dump.n_entries, note=dump.rank_conflict)
    return NcclParsed(task.index, task.kind, task.display, source,
                      (_write(stage, "fr_groups", groups), _write(stage, "fr_entries", entries)),
                      (dump.rank,))


def _log(task: NcclTask, stage: Path, cancel: CancelToken | None) -> NcclParsed:
    log = read_nccl_log(Path(task.path), task.display, stage, task.max_bytes, cancel)
    rank = log.ranks[0] if len(log.ranks) == 1 and log.n_gpus == 1 else None
    note = "; ".join(log.notes) or None
    source = _source(task, "text", rank=rank,
                     rank_source="world_comm" if rank is not None else None,
                     nccl_version=", ".join(log.nccl_versions) or None,
                     host=log.hosts[0] if len(log.hosts) == 1 else None,
                     n_records=log.n_records, note=note)
    tables = tuple((table, str(path)) for table, path in sorted(log.tables.items()))
    return NcclParsed(task.index, task.kind, task.display, source, tables, tuple(log.ranks))


def _ops(task: NcclTask, stage: Path, ops: pl.DataFrame, fmt: str,
         **fields: str | int | None) -> NcclParsed:
    ops = ops.with_columns(
        pl.col("nccl_op").str.to_lowercase().replace(CANONICAL_OPS).alias("collective"),
        pl.lit(None, pl.Int32).alias("rank"), pl.lit(task.kind).alias("source"),
        pl.lit(task.display).alias("source_file"))
    source = _source(task, fmt, n_records=ops.height, **fields)
    return NcclParsed(task.index, task.kind, task.display, source,
                      (_write(stage, "nccl_ops", ops.to_arrow()),), ())


def _inspector(task: NcclTask, stage: Path, cancel: CancelToken | None) -> NcclParsed:
    ops = pl.from_arrow(read_inspector(Path(task.path), task.display, task.max_bytes))
    assert isinstance(ops, pl.DataFrame)
    hosts = ops["host"].unique().drop_nulls().sort().to_list()
    versions = ops["format_version"].unique().drop_nulls().sort().to_list()
    return _ops(task, stage, ops, "jsonl", version=", ".join(versions) or None,
                host=hosts[0] if len(hosts) == 1 else None)


def _profiler(task: NcclTask, stage: Path, cancel: CancelToken | None) -> NcclParsed:
    ops = pl.from_arrow(read_profiler_ops(Path(task.path), task.display, task.max_bytes))
    assert isinstance(ops, pl.DataFrame)
    return _ops(task, stage, ops.with_columns(pl.lit("plugin_cpu").alias("timing_source")),
                "json")


Reader = Callable[[NcclTask, Path, CancelToken | None], NcclParsed]
READERS: dict[str, Reader] = {FLIGHT_RECORDER: _flight_recorder, NCCL_LOG: _log,
                              NCCL_INSPECTOR: _inspector, NCCL_PROFILER: _profiler}
