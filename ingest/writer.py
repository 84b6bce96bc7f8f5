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

import copy
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from stepscope.ingest.comm_kernels import CommPattern
from stepscope.ingest.db import (
    connect_write,
    delete_run_rows,
    fit_memory_limit,
    is_out_of_memory,
    larger_rooms,
    limit_that_failed,
    room_scales,
    threads_limit,
)
from stepscope.ingest.db_file import FileState, NewFile
from stepscope.ingest.errors import (
    Interrupted,
    MachineFailure,
    NothingIngestedError,
    StepscopeError,
    TraceFileError,
    UsageError,
    machine_failure,
    machine_problem,
    one_line,
    quote_name,
)
from stepscope.ingest.executors import (
    Executor,
    default_jobs,
    make_executor,
    parse_executor,
)
from stepscope.ingest.exit_codes import EXIT_OK, EXIT_PARTIAL
from stepscope.ingest.interrupts import InterruptGuard
from stepscope.ingest.jobs import TraceIdentity, check_one_job
from stepscope.ingest.kept_parses import (
    KeptParses,
    RecordingExecutor,
    ReplayExecutor,
    keep_budget,
    rank_folder,
    unfinished,
)
from stepscope.ingest.limits import max_trace_bytes
from stepscope.ingest.nccl.load import accept_nccl, finish_nccl
from stepscope.ingest.nccl.sniff import KINDS as NCCL_KINDS
from stepscope.ingest.rank_lists import stored_text
from stepscope.ingest.ranksets import RankSet
from stepscope.ingest.reader import (
    KNOWN_EVENT_CATEGORIES,
    KNOWN_IGNORED_CATEGORIES,
    OUTPUT_TABLES,
    RankTables,
)
from stepscope.ingest.sources import (
    NcclFile,
    TraceFile,
    checked_run_name,
    collect_traces,
    default_run_name,
    rank_from_name,
)
from stepscope.ingest.sql_files import run_script, sql
from stepscope.ingest.tasks import (
    NcclParsed,
    NcclTask,
    Outcome,
    RankFailed,
    RankParsed,
    RankSkipped,
    RankTask,
    Task,
    checked_rank,
)

# Ranks appended per batch (ingest/sql/load/append_ranks.sql): fewer statements per rank, and
# the stage folder stays small; a batch also ends at BATCH_BYTES of Parquet, so that the
# appends of real-sized traces (about 0.8 MB of Parquet per 35 MB trace) run while the
# workers parse the next files instead of after the last one.
BATCH_RANKS = 64
BATCH_BYTES = 4 << 20
ProgressFn = Callable[[int, int, str], None]
AfterLoadFn = Callable[[duckdb.DuckDBPyConnection, str], None]


@dataclass
class IngestResult:
    """What an ingest did; `exit_code` follows the CLI's contract."""

    run: str
    db: str
    ranks: list[int] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    skipped_ranks: list[str] = field(default_factory=list)  # files outside --ranks
    skipped_nccl: int = 0  # how many of them are NCCL files (dumps, logs)
    rank_subset: str | None = None  # --ranks, canonical
    n_files: int = 0
    nccl_files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # one line each, printed on stderr
    replaced: bool = False  # a run of that name was in the database and is replaced
    replaced_ingested_at: datetime | None = None  # when that run had been ingested

    @property
    def status(self) -> str:
        return "partial" if self.failures else "complete"

    @property
    def exit_code(self) -> int:
        return EXIT_PARTIAL if self.failures else EXIT_OK


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("stepscope")
    except Exception:  # noqa: BLE001 - not installed (running from a checkout)
        return "unknown"


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


def _device_props(device: int | None,
                  listed: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The deviceProperties entry of the rank's GPU: the one whose id is the GPU events'
    device, else, when every GPU the node lists has the same name, the first of them (a
    trace without GPU ops takes the only entry when there is one).
    On ROCm the GPU events' device is the HSA agent, numbered after the CPU agents (GPU 0
    of a two-socket host is device 2), so it need not be an id of the list; the name and
    properties are right whichever of identical GPUs it is."""
    props = next((p for p in listed if p.get("id") == device), None)
    if props is None and device is None and len(listed) == 1:
        return listed[0]
    if props is None and device is not None and listed \
            and len({str(p.get("name")) for p in listed}) == 1:
        props = listed[0]
    return props


def _rank_row(run: str, rank: int, source: str, t: RankTables) -> dict[str, Any]:
    """The `ranks` row of a file, every value of its column's type (checked here, since
    a failed INSERT would abort the whole run)."""
    info = t.distributed_info or {}
    device = t.summary.device
    props = _device_props(device, t.device_properties)
    unknown = sorted(
        {k for k in t.category_counts if ":" not in k}
        - KNOWN_EVENT_CATEGORIES - KNOWN_IGNORED_CATEGORIES
    )
    world = checked_rank(info.get("world_size"), "world_size", t.file)
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
        "pid": t.summary.pid,
        "device": device,
        "device_name": _text(props.get("name")) if props else None,
        "device_properties": _json(props) if props else None,
        "backend": _text(info.get("backend")),
        "nccl_version": _text(info.get("nccl_version")),
        "distributed_info": stored_text(info) if info else None,
        "source_file": t.file,
        "trace_format": t.trace_format,
        "base_time_ns": t.base_time_ns,
        "trace_start_ns": t.summary.trace_start_ns,
        "trace_end_ns": t.summary.trace_end_ns,
        "n_events": t.n_events,
        "category_counts": json.dumps(t.category_counts),
        "unknown_categories": json.dumps(unknown),
        "profiler_config": _json(t.profiler_config) if t.profiler_config else None,
    }




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
    executor: str = "auto",
    ranks: RankSet | None = None,
    stage_dir: str | Path | None = None,
    comm_kernels: tuple[CommPattern, ...] | None = None,
) -> IngestResult:
    """Ingest the traces of every rank of one run; replaces a run of the same name.

    `after_load(con, run)` runs inside the same transaction once the raw tables are in
    (the analyzers materialize their derived tables there), so a run is never visible
    half-analysed. `max_bytes` caps each trace's JSON text (ingest.limits).

    Each file is parsed by an independent task on `executor` ('auto', 'inline',
    'process', 'ray' or 'ray://ADDRESS'; ingest/executors.py) with `jobs` in parallel,
    handing its tables over as Parquet files in a private folder under `stage_dir`
    (default: the temp folder; with Ray on several machines, storage they all see).
    `ranks` keeps only those ranks (the run records the subset). `comm_kernels` are the
    communication-kernel patterns to read kernels with (default: the bundled table).

    Raises UsageError for bad arguments, NothingIngestedError when no file could be
    read (or, with strict, when any file failed); the database is then unchanged.
    Raises Interrupted on Ctrl-C, saying whether the run was committed.
    """
    run_name = checked_run_name(run) if run is not None else default_run_name(paths)
    parse_executor(executor)  # a bad --executor or $STEPSCOPE_JOBS is a usage error
    default_jobs()            # before any work
    limit = max_trace_bytes(max_bytes)
    result = IngestResult(run=run_name, db=str(db),
                          rank_subset=str(ranks) if ranks is not None else None)
    with InterruptGuard() as guard, collect_traces(paths, limit) as traces:
        result.failures.extend(traces.failures)
        result.skipped = traces.skipped
        nccl = [f for f in traces.nccl if f.kind in NCCL_KINDS]
        result.skipped += [f.display for f in traces.nccl if f.kind not in NCCL_KINDS]
        result.n_files = len(traces.files) + len(traces.failures) + len(nccl)
        if guard.hit:
            raise Interrupted(_interrupt_message(run_name, db, False), committed=False)
        opts = _Options(strict, jobs, progress, after_load, limit, step_marker, executor,
                        ranks, comm_kernels, stage_dir)
        sources = [one_line(os.fspath(p)) for p in paths]
        result = _ingest_in_rooms(db, (traces.files, nccl), sources, result, opts, guard)
    return result


@dataclass(frozen=True)
class _Options:
    strict: bool
    jobs: int | None
    progress: ProgressFn | None
    after_load: AfterLoadFn | None
    limit: int
    step_marker: str | None = None
    executor: str = "auto"
    ranks: RankSet | None = None
    comm_kernels: tuple[CommPattern, ...] | None = None
    stage_dir: str | Path | None = None


def _ingest_in_rooms(db: str | Path, files: tuple[Sequence[TraceFile], Sequence[NcclFile]],
                     sources: list[str], start: IngestResult, opts: _Options,
                     guard: InterruptGuard) -> IngestResult:
    """Parse and store the run in the writer's smallest room (ingest.db), and where a step
    runs out of it, again from the start in a larger one (`room_scales`): a step that
    needs more than the floor gets it instead of failing the ingest with memory free
    (1,024- and 2,048-rank jobs failed at the commit or the first append at the 32 MiB
    floor). Each failed try is rolled back and the file cut back to its size
    (`FileState`), so a retry starts from the database as it was; the last try's error is
    raised as it came, the first error of that try. A retry appends the files the tries
    before parsed, without parsing them again, where it could keep them, and parses only
    those whose outcomes never arrived (ingest/kept_parses.py)."""
    scales = room_scales()
    with _stage_folder(opts.stage_dir) as stage:
        kept: KeptParses | None = None
        for attempt, scale in enumerate(scales):
            result = copy.deepcopy(start)
            replay = kept is not None and kept.resumable()
            if not replay:
                shutil.rmtree(stage / "try", ignore_errors=True)  # an earlier try's files
                kept = KeptParses(keep_budget(stage))
            assert kept is not None
            plan = _TryPlan(stage / "try", kept, replay)
            try:
                with larger_rooms(scale):
                    _ingest_once(db, files, sources, result, opts, guard, plan)
            except Exception as exc:
                if not is_out_of_memory(exc) or attempt + 1 == len(scales):
                    raise
                room = limit_that_failed(exc) or "its room"
                start.warnings.append(
                    f"the database ran out of memory at {room} {plan.step}; the ingest was "
                    f"rolled back and {_retry_words(kept, scales[attempt + 1] // scale)}")
                continue
            return result
    raise AssertionError("room_scales() is never empty")


def _retry_words(kept: KeptParses, times: int) -> str:
    """How the next try goes, for the warning: from the kept parses, in `times` the
    room."""
    if kept.replayable():
        return f"appended the parsed files again with {times}x the room"
    if kept.resumable():
        return (f"ran again with {times}x the room, appending the {len(kept.outcomes)} "
                "files it had parsed without parsing them again")
    return f"ran again with {times}x the room"


@dataclass
class _TryPlan:
    """Where one try stages its files, whether it parses (recording what it parsed in
    `kept`) or replays what earlier tries kept (parsing, and recording, only the rest),
    and the step it is at (for the warning when a step runs out of room)."""

    stage: Path
    kept: KeptParses
    replay: bool
    step: str = "while appending the ranks"


def _ingest_once(db: str | Path, files: tuple[Sequence[TraceFile], Sequence[NcclFile]],
                 sources: list[str], result: IngestResult, opts: _Options,
                 guard: InterruptGuard, plan: _TryPlan) -> None:
    """One try: parse every file on the executor (or replay an earlier try's parses) and
    store the run in one transaction; when it fails, the database file is left as it was
    (`FileState.restore_size`), or removed when this try created it (`NewFile`)."""
    work = _Work.prepare(files, plan, opts)
    guard.add_stopper(work.executor.cancel)
    work.executor.start(len(work.tasks))  # the workers import as the database opens
    try:
        new = NewFile.before_connecting(db)
        try:
            con = connect_write(db)  # may wait for another writer's lock
        except KeyboardInterrupt as exc:  # Ctrl-C in the wait: the run's own line
            if new is not None:
                new.remove_if_unwritten()
            if isinstance(exc, Interrupted):
                raise
            raise Interrupted(_interrupt_message(result.run, result.db, False),
                              committed=False) from None
        except Exception:
            if new is not None:
                new.remove_if_unwritten()  # a full disk: DuckDB made it, wrote nothing
            raise
        before = FileState.of(db)
        guard.add_stopper(con.interrupt)
        try:
            with fit_memory_limit(con, 0):  # the floor: the run spills
                _transaction(con, result.run, sources, work, result, opts, guard)
        except BaseException:
            if new is not None:
                new.remove_unused(con)  # under the write lock (db_file.NewFile)
            _close_quietly(con)
            if before is not None:
                before.restore_size()
            raise
        con.close()
    finally:
        work.executor.close()


def _close_quietly(con: duckdb.DuckDBPyConnection) -> None:
    """Close a connection that failed: an invalidated database raises on close too, and
    that follow-on error must not replace the first."""
    try:
        con.close()
    except duckdb.Error:
        pass


@dataclass(frozen=True)
class _Work:
    """One task per file (Kineto traces, then NCCL files; indices are task order), the
    executor they run on (recording its outcomes, or replaying a kept try's), and the
    try's plan."""

    tasks: list[Task]
    executor: Executor
    plan: _TryPlan

    @classmethod
    def prepare(cls, files: tuple[Sequence[TraceFile], Sequence[NcclFile]], plan: _TryPlan,
                opts: _Options) -> _Work:
        tasks = _tasks(*files, plan.stage, opts)
        if plan.replay:
            rest = unfinished(tasks, plan.kept.outcomes)
            return cls(tasks, ReplayExecutor(
                plan.kept, make_executor(opts.executor, opts.jobs, len(rest)) if rest
                else None), plan)
        executor = make_executor(opts.executor, opts.jobs, len(tasks))
        return cls(tasks, RecordingExecutor(executor, plan.kept), plan)


def _transaction(con: duckdb.DuckDBPyConnection, run: str, sources: list[str], work: _Work,
                 result: IngestResult, opts: _Options, guard: InterruptGuard) -> None:
    """Replace the run in one transaction; on Ctrl-C, roll back and raise Interrupted
    with what the database actually holds."""
    stamp = datetime.now(UTC).replace(tzinfo=None)
    try:
        con.execute("BEGIN TRANSACTION")
        result.replaced, result.replaced_ingested_at = _ingested_at(con, run)
        _ingest_files(con, run, work, result, opts, guard)
        guard.check()
        work.plan.step = "while writing the run"
        _finish_run(con, run, sources, result, opts.strict, stamp)
        if opts.after_load is not None:
            work.plan.step = "in the attribution"
            opts.after_load(con, run)  # may raise the limit, for the commit too
        guard.check()
        work.plan.step = "at the commit"
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


def _ingested_at(con: duckdb.DuckDBPyConnection, run: str) -> tuple[bool, datetime | None]:
    """Whether the database holds the run this ingest replaces, and when it was
    ingested."""
    rows = con.execute(sql("runs/ingested_at.sql"), {"run": run}).fetchall()
    return (True, rows[0][0]) if rows else (False, None)


def _rollback(con: duckdb.DuckDBPyConnection) -> None:
    try:
        con.execute("ROLLBACK")
    except duckdb.Error:
        pass  # no transaction open (it failed to begin, or the COMMIT went through)


def _committed(con: duckdb.DuckDBPyConnection, run: str, stamp: datetime) -> bool | None:
    """Does the database hold this ingest's run (None: could not tell)?"""
    try:
        rows = con.execute(sql("load/committed.sql"), {"run": run, "t": stamp}).fetchall()
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


def _ingest_files(con: duckdb.DuckDBPyConnection, run: str, work: _Work,
                  result: IngestResult, opts: _Options, guard: InterruptGuard) -> None:
    """Parse every file (Kineto traces, then NCCL files) as an independent task
    (ingest/tasks.py) on the chosen executor; append the accepted ranks in batches from
    their Parquet files and the NCCL files' rows in task order."""
    delete_run_rows(con, run)
    tasks, executor = work.tasks, work.executor
    in_flight = opts.jobs or default_jobs()  # the files still parsing at the end
    claimed: dict[int, str] = {}
    claimed_nccl: dict[tuple[str, int], str] = {}
    kinds: set[str] = set()
    identities: list[TraceIdentity] = []
    batch = _Batch(con, run, work.plan.kept, result.db)
    con.execute(sql("load/stage_groups.sql"))
    for done, outcome in enumerate(executor.run(tasks), start=1):
        guard.check()
        if opts.progress:
            opts.progress(done, len(tasks), tasks[outcome.index].display)
        if isinstance(outcome, RankSkipped):
            result.skipped_ranks.append(outcome.file)
            result.skipped_nccl += isinstance(tasks[outcome.index], NcclTask)
            continue
        if isinstance(outcome, RankFailed) and outcome.machine:  # disk full, no memory:
            raise machine_failure(outcome.file, outcome.problem, result.db)  # stop it all
        try:
            if isinstance(outcome, NcclParsed):
                accept_nccl(con, run, outcome, claimed_nccl)
                result.nccl_files.append(outcome.file)
                kinds.add(outcome.kind)
            else:
                result.ranks.append(_accept(outcome, claimed, run, batch))
                identities.append(_identity(outcome))
        except TraceFileError as exc:
            if isinstance(exc, _ClaimedTwice):  # of another job, maybe: see below
                identities.append(_identity(outcome))
            if opts.strict:
                raise NothingIngestedError(
                    f"{exc} (--strict: nothing was ingested)") from None
            result.failures.append((exc.file, exc.problem))
        if batch.full() or len(tasks) - done < in_flight:
            batch.flush()  # near the end, each rank alone: the last append is short
    result.warnings += check_one_job(run, identities)
    batch.flush()
    work.plan.step = "while linking the NCCL files"
    finish_nccl(con, run, kinds)


def _tasks(traces: Sequence[TraceFile], nccl: Sequence[NcclFile], stage: Path,
           opts: _Options) -> list[Task]:
    """One task per file, each with its own stage folder; indices are task order: the
    Kineto traces in rank order (`in_rank_order`), then the NCCL files."""
    tasks: list[Task] = [
        RankTask(i, str(tf.path), tf.display, str(stage / "work" / str(i)), len(traces),
                 step_marker=opts.step_marker, max_bytes=opts.limit, ranks=opts.ranks,
                 comm_kernels=opts.comm_kernels)
        for i, tf in enumerate(in_rank_order(traces))]
    tasks += [NcclTask(len(traces) + i, str(nf.path), nf.display, nf.kind,
                       str(stage / "work" / str(len(traces) + i)), max_bytes=opts.limit,
                       ranks=opts.ranks)
              for i, nf in enumerate(nccl)]
    return tasks


def in_rank_order(traces: Sequence[TraceFile]) -> list[TraceFile]:
    """The traces in the order of the rank their names say, the digits compared as
    numbers (`rank2` before `rank10`, where the folder's sorted listing has `rank0`,
    `rank1`, `rank10`, `rank100`, ...), files whose names say no rank after them, ties in
    the listing's order.

    The writer appends the ranks in the order their tasks finish, which is task order,
    and each appended batch becomes the stored row groups of the rank tables: in rank
    order a batch of the attribution (consecutive ranks, `rank BETWEEN lo AND hi`) reads
    the few row groups that hold its ranks, where in the listing's order every row group
    mixes ranks from across the job and each batch reads blocks of most of the run (at
    2,048 ranks, enough to fill the attribution's whole memory room). The order decides
    nothing else but which of two files claiming one rank comes first, and the order of
    the failed files."""
    def key(item: tuple[int, TraceFile]) -> tuple[bool, int, int]:
        position, trace = item
        rank = rank_from_name(trace.display)
        return rank is None, rank or 0, position

    return [trace for _, trace in sorted(enumerate(traces), key=key)]


class _ClaimedTwice(TraceFileError):
    """A readable trace of a rank that another file already holds."""


def _identity(outcome: Outcome) -> TraceIdentity:
    assert isinstance(outcome, RankParsed)
    t = outcome.tables
    info = t.distributed_info or {}
    return TraceIdentity(t.file, info.get("world_size"), info.get("backend"),
                         info.get("nccl_version"), t.summary.trace_start_ns,
                         t.summary.trace_end_ns)


def _accept(outcome: Outcome, claimed: dict[int, str], run: str, batch: _Batch) -> int:
    """Check a task's outcome and queue its rank for the next batch; returns the rank.
    A failed file or a rank claimed twice raises TraceFileError."""
    if isinstance(outcome, RankFailed):
        raise TraceFileError(outcome.file, outcome.problem)
    assert isinstance(outcome, RankParsed)
    t = outcome.tables
    if outcome.rank in claimed:
        raise _ClaimedTwice(
            t.file, f"rank {outcome.rank} is also claimed by {claimed[outcome.rank]}; "
            "put the traces of each run in its own --run")
    row = _rank_row(run, outcome.rank, outcome.rank_source, t)
    claimed[outcome.rank] = t.file
    batch.add(outcome, row)
    return outcome.rank


@contextmanager
def _stage_folder(root: str | Path | None) -> Iterator[Path]:
    """A private folder for the tasks' Parquet files, removed afterwards: under `root`
    (shared storage for Ray workers on other machines) or the system's temp folder."""
    if root is not None and not Path(root).is_dir():
        what = "not a folder" if Path(root).exists() else "no such folder"
        raise UsageError(f"--stage-dir {root}: {what}")
    with tempfile.TemporaryDirectory(prefix="stepscope-stage-",
                                     dir=str(root) if root else None) as tmp:
        yield Path(tmp)


class _Batch:
    """Accepted ranks whose Parquet files wait to be appended together: one INSERT per
    table for many ranks (ingest/sql/load/append_ranks.sql), then the files are kept for a
    retry while `kept` allows (an earlier try's kept files count once), else deleted, so
    that without keeping the stage folder holds at most BATCH_RANKS ranks plus those in
    flight."""

    def __init__(self, con: duckdb.DuckDBPyConnection, run: str, kept: KeptParses,
                 db: str | os.PathLike[str]) -> None:
        self.con, self.run, self.kept, self.db = con, run, kept, db
        self.files: list[tuple[str, int]] = []
        self.folders: dict[Path, int] = {}  # Parquet bytes by rank folder
        self.rows: list[dict[str, Any]] = []
        self.bytes = 0

    def add(self, outcome: RankParsed, row: dict[str, Any]) -> None:
        target = rank_folder(outcome)
        start = self.bytes
        for table in OUTPUT_TABLES:
            path = target / f"{table}.parquet"
            self.files.append((str(path), outcome.rank))
            self.bytes += path.stat().st_size
        self.folders[target] = self.bytes - start
        self.rows.append(row)

    def full(self) -> bool:
        return len(self.rows) >= BATCH_RANKS or self.bytes >= BATCH_BYTES

    def flush(self) -> None:
        if not self.rows:
            return
        params: dict[str, object] = {
            "run": self.run, "rank_rows": self.rows,
            "staged_files": [f for f, _ in self.files],
            "staged_ranks": [r for _, r in self.files]}
        for table in OUTPUT_TABLES:
            params[f"{table}_files"] = [f for f, _ in self.files
                                        if Path(f).name == f"{table}.parquet"]
        try:
            with threads_limit(self.con, 1):
                run_script(self.con, "load/append_ranks.sql", params)
        except duckdb.InterruptException:
            raise
        except duckdb.Error as exc:
            if is_out_of_memory(exc):
                raise  # the room's problem, not the file's: a larger room is tried

            if (what := machine_problem(exc)) is not None:  # e.g. no file handle left
                raise MachineFailure(
                    f"{what} (the machine's failure, not the files'): run '{self.run}' was "
                    f"not ingested, {quote_name(self.db)} is unchanged", what=what) from None
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            names = ", ".join(str(r["source_file"]) for r in self.rows[:3])
            raise StepscopeError(
                f"{names}: could not be stored ({text}); run '{self.run}' was not ingested, "
                "the database is unchanged (please report this file)") from None
        if not self.kept.keep(self.folders):
            for folder in self.folders:
                shutil.rmtree(folder, ignore_errors=True)
        self.files, self.folders, self.rows, self.bytes = [], {}, [], 0


def _finish_run(con: duckdb.DuckDBPyConnection, run: str, sources: list[str],
                result: IngestResult, strict: bool, stamp: datetime) -> None:
    if strict and result.failures:
        file, problem = result.failures[0]
        raise NothingIngestedError(f"{file}: {problem} (--strict: nothing was ingested)")
    if not result.ranks and not result.nccl_files and result.skipped_ranks \
            and not result.failures:
        raise NothingIngestedError(
            f"nothing ingested into run '{run}': none of the {len(result.skipped_ranks)} "
            f"trace file(s) holds one of the ranks {result.rank_subset} (--ranks)")
    if not result.ranks and not result.nccl_files:
        raise NothingIngestedError(
            f"nothing ingested into run '{run}': none of the {result.n_files} trace file(s) "
            "could be read (see the errors above)", result.failures)
    run_script(con, "load/process_groups.sql", {"run": run})
    con.execute(sql("load/arg_groups.sql"), {"run": run})
    con.execute(sql("load/hosts.sql"), {"run": run})
    (world,), = con.execute(sql("load/world_size.sql"), {"run": run}).fetchall()
    world_size = world or len(result.ranks)
    con.execute(sql("load/run_insert.sql"), {
        "run": run,
        "ingested_at": stamp,
        "status": result.status,
        "world_size": world_size,
        "n_ranks": len(result.ranks),
        "n_files": result.n_files,
        "sources": json.dumps(sources),
        "failed": json.dumps([{"file": f, "error": e} for f, e in result.failures]),
        "version": _version(),
        "rank_subset": result.rank_subset,
    })


__all__ = ["IngestResult", "ingest"]
