"""One file's parse as an independent task: the unit the executors fan out.

`run_task` runs a `RankTask` (one Kineto trace: `run_rank_task` reads it, works out its
rank, and writes its tables as Parquet files into the task's own folder; the writer only
appends them, ingest/sql/load/append_ranks.sql) or an `NcclTask` (one Flight Recorder dump,
NCCL_DEBUG log, Inspector or profiler-plugin file, ingest/nccl/task.py, the same way).
Tasks and outcomes are plain picklable dataclasses, and nothing here touches the target
database, so the same function runs in this process, in a worker process or in a Ray
task on another machine (ingest/executors.py). A task never raises for a bad file: it
returns `RankFailed`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stepscope.ingest.cancel import CancelToken
from stepscope.ingest.comm_kernels import CommPattern
from stepscope.ingest.errors import MachineFileError, TraceFileError, as_file_error
from stepscope.ingest.ranksets import MAX_RANK, RankSet
from stepscope.ingest.reader import RankTables, SkippedTrace, read_trace
from stepscope.ingest.sources import rank_from_name


@dataclass(frozen=True)
class RankTask:
    """Parse `path` into Parquet files under `stage_dir` (a folder of its own)."""

    index: int
    path: str
    display: str
    stage_dir: str
    n_files: int
    threads: int = 1
    step_marker: str | None = None
    max_bytes: int | None = None
    ranks: RankSet | None = None
    comm_kernels: tuple[CommPattern, ...] | None = None  # None: the bundled table


@dataclass(frozen=True)
class NcclTask:
    """Parse the NCCL evidence file `path` (a ingest.nccl.sniff kind) into Parquet
    files under `stage_dir` (a folder of its own)."""

    index: int
    path: str
    display: str
    kind: str
    stage_dir: str
    threads: int = 1
    max_bytes: int | None = None
    ranks: RankSet | None = None


@dataclass(frozen=True)
class RankParsed:
    index: int
    rank: int
    rank_source: str
    tables: RankTables  # table_files set, tables empty


@dataclass(frozen=True)
class RankFailed:
    index: int
    file: str
    problem: str
    machine: bool = False  # the machine failed (disk full, out of memory), not the file


@dataclass(frozen=True)
class RankSkipped:
    """Not one of the ranks asked for (`--ranks`)."""

    index: int
    file: str


@dataclass(frozen=True)
class NcclParsed:
    """An NCCL file's rows: its `nccl_sources` row (without `run`), and one Parquet file
    per table it fills (columns by name, without `run`)."""

    index: int
    kind: str
    file: str
    source: dict[str, str | int | None]
    tables: tuple[tuple[str, str], ...]
    ranks: tuple[int, ...]      # the global ranks it speaks for (may be empty: unknown)


Task = RankTask | NcclTask
Outcome = RankParsed | NcclParsed | RankFailed | RankSkipped


def run_task(task: Task, cancel: CancelToken | None = None) -> Outcome:
    """Run one task of either kind; any problem with the file becomes its `RankFailed`."""
    if isinstance(task, NcclTask):
        from stepscope.ingest.nccl.task import run_nccl_task

        return run_nccl_task(task, cancel)
    return run_rank_task(task, cancel)


def run_rank_task(task: RankTask, cancel: CancelToken | None = None) -> Outcome:
    """Run one task; any problem with the file becomes its `RankFailed`."""
    try:
        stage = Path(task.stage_dir)
        stage.mkdir(parents=True, exist_ok=True)
        tables = read_trace(Path(task.path), task.display, threads=task.threads,
                            step_marker=task.step_marker, max_bytes=task.max_bytes,
                            cancel=cancel, stage_dir=stage, keep=_keeper(task),
                            comm_kernels=task.comm_kernels)
        rank, source = resolve_rank(tables.distributed_info, task.display, task.n_files)
        return RankParsed(task.index, rank, source, tables)
    except SkippedTrace:
        return RankSkipped(task.index, task.display)
    except Exception as exc:  # noqa: BLE001 - any reader problem fails this file only
        error = as_file_error(task.display, exc)
        return RankFailed(task.index, error.file, error.problem,
                          machine=isinstance(error, MachineFileError))


def _keeper(task: RankTask) -> Any:
    """With --ranks: skip a file before its events are parsed when its rank is known
    (from distributedInfo or its name) and not asked for."""
    if task.ranks is None:
        return None
    wanted = task.ranks

    def keep(info: dict[str, Any] | None) -> bool:
        try:
            rank, _ = resolve_rank(info, task.display, task.n_files)
        except TraceFileError:
            return True  # parse it, so that the problem is reported
        return rank in wanted

    return keep


def checked_rank(value: Any, what: str, file: str) -> int | None:
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


def resolve_rank(info: dict[str, Any] | None, file: str, n_files: int) -> tuple[int, str]:
    """The file's rank and where it came from: distributedInfo, its name, or rank 0 when
    it is the only file."""
    rank = checked_rank((info or {}).get("rank"), "rank", file)
    world = checked_rank((info or {}).get("world_size"), "world_size", file)
    if world == 0:
        raise TraceFileError(file, "distributedInfo.world_size is 0 (a job has one rank "
                             "at least)")
    if rank is not None:
        if world is not None and rank >= world:  # as an NCCL log's rank is below nRanks
            raise TraceFileError(file, f"distributedInfo.rank {rank} is not below its "
                                 f"world_size {world}")
        return rank, "distributedInfo"
    from_name = rank_from_name(file)
    if from_name is not None:
        return from_name, "file_name"
    if n_files == 1:
        return 0, "single_file"
    raise TraceFileError(
        file,
        "cannot tell which rank this trace is: it has no distributedInfo.rank and no rank "
        "number in its name; rename it like rank3.json.gz",
    )
