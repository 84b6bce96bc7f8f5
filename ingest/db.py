"""Opening DuckDB: the one `connect` of stepscope, and the stepscope database file with
one writer or any number of read-only readers.

Every connection stepscope opens (the database file, the readers' in-memory databases)
comes from `connect`, which turns DuckDB's extension auto-install and auto-load off: a
path that is not a DuckDB file (a SQLite database, say) is refused at once with one line,
never by downloading an extension.

DuckDB locks the file per process: one process may write it, or any number may read it,
never both at once. So a reader also locks out a writer while it is open, and a writer
locks out readers. A writer waits for another process's lock a bounded time
($STEPSCOPE_LOCK_WAIT seconds, default 10: a report or a dashboard page reading the file
closes it within seconds), then gets DatabaseBusyError (exit 2) naming the holder; a
reader gets it at once (the dashboard then serves its last state). Never partial
data. Readers therefore close as soon as they are done (docs/schema.md, "Concurrency").
Opening checks what the file is before anything is written (ingest/schema.py): a file
that is not a stepscope database, or is one of a newer schema version, is refused; an
older one is migrated by a writer and read through compatible views by a reader.
"""

from __future__ import annotations

import errno
import os
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import duckdb

from stepscope.ingest import interrupts, schema
from stepscope.ingest.errors import (
    DatabaseBusyError,
    MachineFailure,
    StepscopeError,
    UsageError,
    machine_problem,
    one_line,
    quote_name,
)
from stepscope.ingest.folder_names import folder_ending, names_a_folder
from stepscope.ingest.limits import (
    MEMORY_LIMIT_ENV,
    address_space_config,
    memory_limit_setting,
    usable_memory_bytes,
)
from stepscope.ingest.number_text import NumberTextError, decimal, setting
from stepscope.ingest.sql_files import sql

DEFAULT_DB = "stepscope.duckdb"
MEMORY_ENV = MEMORY_LIMIT_ENV  # read only through limits.memory_limit_setting
# How long a writer waits for another process's lock on the database (seconds), polling
# every LOCK_POLL_S; past it, DatabaseBusyError names the holder (docs/schema.md,
# "Concurrency").
LOCK_WAIT_ENV = "STEPSCOPE_LOCK_WAIT"
DEFAULT_LOCK_WAIT_S = 10.0
MAX_LOCK_WAIT_S = 86_400.0
LOCK_POLL_S = 0.2
# The writer's DuckDB memory limit when $STEPSCOPE_MEMORY_LIMIT is not set: 1GB for what a
# write connection does besides ingesting (nightly reports, merges). An ingest sets it
# as working room on top of what the uncommitted run holds in memory when the step
# starts (`fit_memory_limit`): the floor while it appends (a batch streams from
# Parquet), then room sized to the largest batch of the attribution, so the run's
# written blocks spill to disk instead of filling memory (docs/scale.md). The floors: at
# 64 MiB the appends of 1,024 simulated ranks peaked 30 MB higher than at 32
# (benchmarks/README.md), and at 64 MiB of room the attribution of 1,024 ranks peaked
# 25 MB higher than at 32 (a small run never fills that room; the large one's cached
# blocks do).
DEFAULT_MEMORY_LIMIT = "1GB"
MEMORY_FLOOR_BYTES = 32 << 20
MEMORY_PER_EVENT_BYTES = 320   # working memory of the attribution per trace event
# The attribution's queries get one DuckDB thread per this much of their room: each
# thread holds its own sort, hash and Parquet buffers, and the 4 ranks and 22k CPU ops
# of sample_traces/cpu/ckpt ran out of memory at 32 MiB of room on 2 threads (4 tries
# in 5; 36 MiB or 1 thread: none in 5).
ROOM_PER_THREAD_BYTES = 32 << 20
# What the attribution lowers the limit to between its batches (`Room.shed`): below what
# DuckDB holds pinned there, so that it evicts every block it can.
SHED_TO_BYTES = 1 << 20
MEMORY_CEILING_BYTES = 4 << 30
# The rooms an ingest tries, as multiples of the ones above, when a step runs out of its
# room: 32 MiB, then 256 MiB, then 2 GiB of floor (each only with twice that usable).
# Retried, not guessed: the small room keeps memory flat in ranks where it suffices.
ROOM_SCALES = (1, 8, 64)
_ROOM_SCALE: ContextVar[int] = ContextVar("stepscope_room_scale", default=1)
# Rows per row group in what a writer appends (catalog/attach_writer.sql): the
# uncommitted run's partly filled last group of every table stays in memory until the
# commit; at DuckDB's default of 122,880 rows that tail grew the writer by 46 MB at 1,024
# simulated ranks (benchmarks/README.md). The file is ~5% larger.
WRITE_ROW_GROUP_ROWS = 16_384
NO_EXTENSION_DOWNLOADS: dict[str, str | bool | int | float | list[str]] = {
    "autoinstall_known_extensions": False, "autoload_known_extensions": False}
DUCKDB_MAGIC = b"DUCK"      # bytes 8-11 of every DuckDB database file
DUCKDB_HEADERS = 3 * 4096   # the file header and two database headers, before block 0
SQLITE_MAGIC = b"SQLite format 3\x00"

DAMAGED_SIGNS = ("Could not read enough bytes", "not a valid DuckDB database file",
                 "Corrupt database file", "checksum")

Config = Mapping[str, str | bool | int | float | list[str]]


def connect(path: str | Path = ":memory:", read_only: bool = False,
            config: Config | None = None) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with extension auto-install and auto-load off (no network,
    no extension loaded behind the caller's back) and no progress bar on stderr;
    `config` adds settings."""
    con = duckdb.connect(str(path), read_only=read_only,
                         config={**NO_EXTENSION_DOWNLOADS, **address_space_config(),
                                 **(config or {})})
    con.execute(sql("catalog/no_progress_bar.sql"))
    return con


def connect_write(db: str | Path) -> duckdb.DuckDBPyConnection:
    """Open (creating if needed) the database for writing, at the current schema: a new
    file gets it, an older one is migrated; anything else is refused before a write."""
    _check_file_name(db)
    path = Path(db)
    if path.parent and not path.parent.exists():
        raise UsageError(f"{path}: the folder {path.parent} does not exist")
    con = _open_waiting(path, lock_wait_s())
    with _closing_on_error(con, path):
        schema.migrate(con, schema.classify(con, path))
    return con


def lock_wait_s() -> float:
    """The writer's wait for the lock: $STEPSCOPE_LOCK_WAIT seconds (0: none), default
    DEFAULT_LOCK_WAIT_S; anything but a number in [0, 1 day] is a usage error."""
    raw = setting(LOCK_WAIT_ENV)
    if raw is None:
        return DEFAULT_LOCK_WAIT_S
    try:  # ASCII digits only (ingest.number_text): float() read ' 5', '+5' and '1_0'
        return decimal(raw, 0.0, MAX_LOCK_WAIT_S, low_open=False)
    except NumberTextError:
        raise UsageError(f"${LOCK_WAIT_ENV}={quote_name(raw)}: not a number of seconds in "
                         f"[0, {MAX_LOCK_WAIT_S:.0f}]; give e.g. 30 (default "
                         f"{DEFAULT_LOCK_WAIT_S:.0f}, 0: do not wait)") from None


def _open_waiting(path: Path, wait_s: float) -> duckdb.DuckDBPyConnection:
    """Open `path` for writing, waiting up to `wait_s` while another process holds its
    lock (a report, a dashboard page, a notebook reading it closes it soon); past that,
    one line names the holder and the wait. A lock of this process (another connection
    of it) is not waited for: nothing would release it."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            con = _open(path, read_only=False)
            if path.exists():
                return con
            # its name was removed while this waited for the lock (a failed ingest's new,
            # unused file: db_file.NewFile): open the name again, never the removed file
            con.close()
            continue
        except DatabaseBusyError as exc:
            holder = _HELD_BY.search(str(exc))
            if holder is None or int(holder.group(1)) == os.getpid() or wait_s <= 0:
                raise
            if time.monotonic() + LOCK_POLL_S > deadline:
                head, _, tail = str(exc).rpartition("; wait for it")
                raise DatabaseBusyError(f"{head}; waited {wait_s:g} s for it "
                                        f"(${LOCK_WAIT_ENV}); wait for it{tail}") from None
            if interrupts.stop_pending():  # a stop signal ends the wait, as it would a query
                raise KeyboardInterrupt from None
            time.sleep(LOCK_POLL_S)


_HELD_BY = re.compile(r"locked by process (\d+)")


def connect_read_only(db: str | Path) -> duckdb.DuckDBPyConnection:
    """Open an existing stepscope database read-only. Any number of readers share the
    file, but while this connection is open no process can write it (close it promptly).
    An older schema is read through temporary views of the current layout."""
    _check_file_name(db)
    lock_wait_s()  # a reader never waits, but a bad $STEPSCOPE_LOCK_WAIT is refused alike
    path = Path(db)
    check_duckdb_file(path)  # a device or a folder is no DuckDB file, not "nothing here"
    if not path.is_file():
        raise UsageError(f"{path}: no stepscope database here; run `stepscope ingest` first")
    con = _open(path, read_only=True)
    with _closing_on_error(con, path):
        version = schema.classify(con, path)
        if version is None:
            raise UsageError(f"{path}: not a stepscope database (an empty DuckDB file); "
                             "run `stepscope ingest` into it first")
        if version < schema.SCHEMA_VERSION:
            schema.read_as_current(con, _current_layout())
        else:
            schema.check_tables(con, path, _current_layout())
    return con


def _check_file_name(db: str | Path) -> None:
    """A --db written with a trailing '/' names a folder ('x.duckdb/' would create the
    file x.duckdb, or open a folder's parent): refused."""
    if isinstance(db, str) and names_a_folder(db):
        raise UsageError(f"--db {quote_name(db)}: ends with '{folder_ending(db)}', so it "
                         "names a folder; give the database's file name")


def _open(path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    _check_utf8_name(path)
    check_duckdb_file(path)
    try:
        con = connect(path, read_only=True) if read_only else _connect_writer(path)
    except duckdb.Error as exc:
        raise _open_error(path, exc) from None
    with _closing_on_error(con, path):
        _check_complete(con, path)
    return con


def _connect_writer(path: Path) -> duckdb.DuckDBPyConnection:
    """A connection in memory with the database file attached as its default database
    (`stepscope`), its row groups WRITE_ROW_GROUP_ROWS long, and the temp folder beside
    the file (`<db>.tmp`), where DuckDB would put it for a file it opened itself. DuckDB's
    cache of external files is off: the writer reads each stage Parquet file once."""
    con = connect(config={**_memory_config(), "temp_directory": f"{path}.tmp",
                          "enable_external_file_cache": False})
    try:
        con.execute(sql("catalog/attach_writer.sql"),
                    {"path": str(path), "rows": WRITE_ROW_GROUP_ROWS})
        con.execute(sql("catalog/use_writer.sql"))
    except BaseException:
        con.close()
        raise
    return con


def _check_utf8_name(path: Path) -> None:
    """DuckDB takes file names as UTF-8 text; a name with other bytes (Python carries
    them as surrogates) would be an internal error inside DuckDB, so it is refused."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"{quote_name(path)}: DuckDB cannot open a file whose name is not "
                         "UTF-8; rename it, or give --db another name") from None


@contextmanager
def _closing_on_error(con: duckdb.DuckDBPyConnection, path: Path) -> Iterator[None]:
    """Close `con` when the block raises; a DuckDB error reading the file becomes one
    line (a damaged file's catalog fails here, not in the middle of a report)."""
    try:
        yield
    except duckdb.Error as exc:
        con.close()
        if isinstance(exc, duckdb.InterruptException):
            raise
        raise _open_error(path, exc) from None
    except BaseException:
        con.close()
        raise


def _check_complete(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Refuse a file shorter than its header says (a copy cut short, a full disk): its
    missing blocks would otherwise fail deep inside a query. Skipped while a write-ahead
    log is pending, whose blocks the file does not hold yet."""
    if Path(f"{path}.wal").exists():
        return
    rows = con.execute(sql("catalog/size.sql")).fetchall()
    if not rows:
        return
    (blocks, block_size), = rows
    size, needed = path.stat().st_size, DUCKDB_HEADERS + blocks * block_size
    if size < needed:
        raise UsageError(f"{path}: not a readable DuckDB file (truncated: {size} bytes, its "
                         f"header needs {needed}); restore it from a copy or use another --db")


def check_duckdb_file(path: Path) -> None:
    """Refuse an existing path that is not a DuckDB database, from its first bytes, or
    whose write-ahead log beside it is not a regular file (DuckDB would block forever
    reading a FIFO there)."""
    _check_wal(path)
    if not path.exists():
        return
    if not path.is_file():
        raise UsageError(f"{path}: not a DuckDB file (not a regular file); "
                         "point --db at a stepscope database or a new file name")
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the database ({exc.strerror})") from None
    if head[8:12] == DUCKDB_MAGIC:
        return
    what = ("a SQLite database" if head.startswith(SQLITE_MAGIC)
            else "an empty file" if not head else "unknown contents")
    raise UsageError(f"{path}: not a DuckDB file ({what}); point --db at a stepscope "
                     "database or a new file name")


def _check_wal(path: Path) -> None:
    wal = path.with_name(path.name + ".wal")
    if (wal.is_symlink() or wal.exists()) and not wal.is_file():
        raise UsageError(f"{quote_name(wal)}: the database's write-ahead log is not a "
                         "regular file; move it away, or point --db at another database")


def check_stepscope_file(db: str | Path) -> None:
    """Refuse an existing file that is not a DuckDB file, or a DuckDB file stepscope must
    not touch (another application's tables, a newer schema, damaged): the checks of
    connect_read_only (`report --db`), made before anything is started on it (the
    dashboard's server). A new name or an empty DuckDB file passes (the first ingest fills
    it); so does a database another process is writing now (its readers wait for it)."""
    path = Path(db)
    check_duckdb_file(path)
    if not path.is_file():
        return
    try:
        con = _open(path, read_only=True)
    except DatabaseBusyError:
        return
    try:
        with _closing_on_error(con, path):
            schema.classify(con, path)
    finally:
        con.close()


# DuckDB's words for the machine's failures while it opens (and first writes) a
# database: malloc failed, in DuckDB's words "Allocation failure" or "(bad allocation)"
# (the process's address space or the machine's memory; a
# $STEPSCOPE_MEMORY_LIMIT too small says "could not allocate block" instead), the disk
# full, the quota, the file size limit (ulimit -f).
_MACHINE_OPEN = (("allocation failure", errno.ENOMEM), ("bad allocation", errno.ENOMEM),
                 ("no space left on device", errno.ENOSPC),
                 ("disk quota exceeded", errno.EDQUOT), ("file too large", errno.EFBIG))


def _machine_open_failure(db: Path, text: str) -> MachineFailure | None:
    """The machine's failure to open `db` (exit 1, as in the middle of the work), or
    None: never blamed on the database or on $STEPSCOPE_MEMORY_LIMIT (exit 2)."""
    lower = text.lower()
    code = next((c for words, c in _MACHINE_OPEN if words in lower), None)
    what = machine_problem(OSError(code, "")) if code is not None else None
    if what is None:
        return None
    return MachineFailure(f"{quote_name(db)}: cannot open the database: {what} (the "
                          "machine's failure, not the database's); nothing was committed",
                          what=what)


def _open_error(db: Path, exc: duckdb.Error) -> StepscopeError:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    if (machine := _machine_open_failure(db, text)) is not None:
        return machine
    # $STEPSCOPE_MEMORY_LIMIT too small or not a size (tested first: DuckDB's "could not
    # allocate block" is no lock)
    if isinstance(exc, duckdb.OutOfMemoryException) or (
            MEMORY_ENV in os.environ and "memory" in first.lower()):
        return UsageError(f"{db}: cannot open the database with ${MEMORY_ENV}="
                          f"{os.environ.get(MEMORY_ENV, DEFAULT_MEMORY_LIMIT)!r} ({first[:160]}); "
                          f"give a size such as 2GB (default {DEFAULT_MEMORY_LIMIT})")
    # another process holds the write lock, or this process has the file open with the
    # other mode (read-only vs read-write, or attached by a writer): all clear once that
    # connection closes
    if re.search(r"\block", text.lower()) or "different configuration" in text.lower() \
            or isinstance(exc, duckdb.ResourceInUseException):
        return DatabaseBusyError(f"{db}: the database is locked by {_lock_holder(text)}; "
                                 "wait for it to finish or use another --db")
    if isinstance(exc, duckdb.SerializationException) or any(
            sign in text for sign in DAMAGED_SIGNS):
        return UsageError(f"{db}: not a readable DuckDB file (truncated or damaged: "
                          f"{first[:160]}); restore it from a copy or use another --db")
    return UsageError(f"{db}: cannot open the database ({first})")


_LOCK_PID = re.compile(r"\(PID (\d+)\)")


def _lock_holder(text: str) -> str:
    """Who holds the database, from DuckDB's lock error ("Conflicting lock is held in
    /usr/bin/python3 (PID 4242)"): the process id and its command line (a dashboard, a
    notebook, another ingest), so the user knows what to close; the generic words when
    DuckDB did not say."""
    match = _LOCK_PID.search(text)
    if match is None:
        return "another stepscope process (an ingest in progress?)"
    pid = match.group(1)
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()  # a small pseudo-file
    except OSError:
        return f"process {pid}"
    command = one_line(" ".join(os.fsdecode(a) for a in raw.split(b"\0") if a))[:120]
    return f"process {pid} ({command})" if command else f"process {pid}"


def _memory_config() -> Config:
    """DuckDB's memory limit for the writer ($STEPSCOPE_MEMORY_LIMIT, default 1GB; an
    ingest lowers it, `fit_memory_limit`): past it, DuckDB evicts cached blocks and spills
    to a temp folder beside the database (`<db>.tmp`, removed when the connection closes),
    so the ingest's memory does not grow with the number of ranks or their size
    (docs/scale.md)."""
    return {"memory_limit": memory_limit_setting() or DEFAULT_MEMORY_LIMIT}


def memory_limit_for(events: int) -> int | None:
    """The writer's memory limit in bytes for work on `events` trace events at once
    (MEMORY_PER_EVENT_BYTES each, between the floor and the ceiling), times the room
    scale of the ingest's attempt (`larger_rooms`); None when $STEPSCOPE_MEMORY_LIMIT
    is set: the user's limit holds as given."""
    return room_for_bytes(MEMORY_PER_EVENT_BYTES * events)


def room_for_bytes(wanted: int) -> int | None:
    """The writer's memory limit in bytes for work that needs `wanted` bytes (at least
    the floor, at most the ceiling), times the room scale of the ingest's attempt
    (`larger_rooms`); None when $STEPSCOPE_MEMORY_LIMIT is set."""
    if memory_limit_setting():
        return None
    scale = _ROOM_SCALE.get()
    return min(max(MEMORY_FLOOR_BYTES, wanted) * scale,
               max(MEMORY_CEILING_BYTES, MEMORY_FLOOR_BYTES * scale))


def room_scales() -> tuple[int, ...]:
    """The room scales an ingest tries in turn (ROOM_SCALES), each floor at most half
    the memory this process may use (the machine's, or its cgroup's); (1,) when
    $STEPSCOPE_MEMORY_LIMIT is set (the user's limit is not second-guessed)."""
    if memory_limit_setting():
        return (1,)
    free = usable_memory_bytes()
    return tuple(s for i, s in enumerate(ROOM_SCALES)
                 if i == 0 or free is None or MEMORY_FLOOR_BYTES * s <= free // 2)


@contextmanager
def larger_rooms(scale: int) -> Iterator[None]:
    """Within the block, every room `memory_limit_for` gives is `scale` times larger:
    an ingest whose step ran out of its room tries again with a larger one
    (ingest.writer) instead of failing where the machine has memory free."""
    token = _ROOM_SCALE.set(scale)
    try:
        yield
    finally:
        _ROOM_SCALE.reset(token)


_LIMIT_HIT = re.compile(r"\(([0-9.]+ ?[KMGT]?i?B)/([0-9.]+ ?[KMGT]?i?B) used\)")


def limit_that_failed(exc: BaseException) -> str | None:
    """The memory limit DuckDB names in an out-of-memory error ('... (3.9 MiB/4.0 MiB
    used)' -> '4.0 MiB'); None when the text names none."""
    match = _LIMIT_HIT.search(str(exc))
    return match.group(2) if match else None


# DuckDB's words for its memory limit reached; a commit that cannot pin a block says
# only the second ("TransactionContext Error: Failed to commit: failed to pin block of
# size 10.0 MiB (22.8 MiB/32.6 MiB used)", a trace with a 10 MB string in its args).
OUT_OF_MEMORY_TEXTS = ("out of memory", "failed to pin block")


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether DuckDB ran out of its memory limit (not the machine's failure to
    allocate, which Python reports as MemoryError)."""
    return isinstance(exc, duckdb.OutOfMemoryException) or (
        isinstance(exc, duckdb.Error)
        and any(words in str(exc).lower() for words in OUT_OF_MEMORY_TEXTS))


def threads_for(events: int) -> int | None:
    """The DuckDB threads for queries on `events` trace events at once: one per
    ROOM_PER_THREAD_BYTES of their room (`memory_limit_for`; at least one), so that a
    machine's many cores do not split the room into buffers too small for each; None
    when $STEPSCOPE_MEMORY_LIMIT is set (every thread, under the user's limit)."""
    room = memory_limit_for(events)
    return None if room is None else max(1, room // ROOM_PER_THREAD_BYTES)


def run_memory_bytes(con: duckdb.DuckDBPyConnection) -> int:
    """The bytes of DuckDB's buffers that hold rows not yet in the database file (the
    uncommitted run: catalog/run_memory.sql); the commit needs them pinned."""
    (held,), = con.execute(sql("catalog/run_memory.sql")).fetchall()
    return int(held)


@dataclass(frozen=True)
class Room:
    """The limit a `fit_memory_limit` block set, in bytes (None: it left the limit as it
    was, the user's $STEPSCOPE_MEMORY_LIMIT)."""

    con: duckdb.DuckDBPyConnection
    limit: int | None = None

    @contextmanager
    def within(self, room: int | None) -> Iterator[None]:
        """Within the block, DuckDB's limit is `room` bytes where that is below the
        room's (None, or a room at least as large: unchanged), then the room's again: for
        a step whose working set is known to be smaller than the largest batch's (the
        clock alignment, which reads per-host ends, not trace events), so that DuckDB
        does not fill the whole room with its cache and buffers there (benchmarks/
        README.md, "The cross-rank steps per batch"). Lowered on a cursor, as `shed`
        does: where DuckDB cannot evict down to it, the failed SET leaves the limit as it
        was and aborts that cursor's statement only. Not restored when the block raises:
        the connection is then past saving (see threads_limit)."""
        if self.limit is None or room is None or room >= self.limit:
            yield
            return
        self._set_on_cursor(room)
        yield
        self.con.execute(sql("catalog/memory_limit.sql"), {"limit": f"{self.limit}B"})

    def _set_on_cursor(self, limit: int) -> None:
        """Set DuckDB's limit to `limit` bytes on a cursor, a failure to evict down to it
        (DuckDB then evicts what it can) left to that cursor."""
        cursor = self.con.cursor()
        try:
            cursor.execute(sql("catalog/memory_limit.sql"), {"limit": f"{limit}B"})
        except duckdb.OutOfMemoryException:
            pass  # it evicted what it could; the limit is as it was
        finally:
            cursor.close()

    def shed(self) -> None:
        """Make DuckDB drop the blocks it caches, the room kept: the limit is lowered to
        SHED_TO_BYTES (DuckDB evicts every unpinned block, the uncommitted run's to the
        file or its temp folder, and hands its allocator's caches back) and set again.
        Between the attribution's batches: within its room DuckDB keeps every block a
        batch read or wrote until the room is full, so the writer grew with the ranks
        up to the whole room (benchmarks/README.md, "The attribution's cache"). Done on
        a cursor of the connection: the limit is the database's, and where DuckDB cannot
        evict down to the lower limit (pinned blocks, indexes) the failed SET, which
        evicts what it can, aborts that cursor's statement, not the ingest's
        transaction."""
        if self.limit is None:
            return
        cursor = self.con.cursor()
        try:
            try:
                cursor.execute(sql("catalog/memory_limit.sql"),
                               {"limit": f"{SHED_TO_BYTES}B"})
            except duckdb.OutOfMemoryException:
                pass  # it evicted what it could
            cursor.execute(sql("catalog/memory_limit.sql"), {"limit": f"{self.limit}B"})
        finally:
            cursor.close()


@contextmanager
def fit_memory_limit(con: duckdb.DuckDBPyConnection, events: int) -> Iterator[Room]:
    """Within the block, the connection's DuckDB memory limit is room for a step that
    works on `events` trace events at once (the attribution's largest batch of ranks; 0:
    the floor, as an ingest appends its ranks) on top of what the uncommitted run holds in
    memory as the block starts (`run_memory_bytes`): enough for that batch's queries, not
    the whole run, which DuckDB would otherwise keep cached up to the limit. (A fixed
    32 MiB ran out of memory in the attribution and the commit of 2,048 simulated ranks,
    whose appended rows took 31.9 of it. Measured once, at the start: raised after every
    append instead, the limit fed the run's buffers, which grew into it, 13.6 → 31.6 MB
    at 1,024 ranks.)

    Afterwards the limit before is restored when that raises it; a lower one is left
    for the enclosing block to restore when it ends: lowering it again (the ingest's
    floor, after its attribution) would make DuckDB evict, to its temp folder, what the
    commit that follows writes to the file anyway (0.1 s of CPU on 8 real ranks)."""
    room = memory_limit_for(events)
    if room is None:
        yield Room(con)
        return
    limit = room + run_memory_bytes(con)
    (before,), = con.execute(sql("catalog/memory_limit_get.sql")).fetchall()
    con.execute(sql("catalog/memory_limit.sql"), {"limit": f"{limit}B"})
    yield Room(con, limit)  # not `finally`: see threads_limit
    lower = size_bytes(before)
    if lower is None or lower > limit:
        con.execute(sql("catalog/memory_limit.sql"), {"limit": before})


_SIZE = re.compile(r"\s*([0-9.]+)\s*(bytes|[KMGT]iB)\s*")
_UNITS = {"bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def size_bytes(text: str) -> float | None:
    """A size as DuckDB prints a memory limit ('64.0 MiB', '1.8 GiB') in bytes; None for
    any other text."""
    match = _SIZE.fullmatch(text)
    return None if match is None else float(match.group(1)) * _UNITS[match.group(2)]


@contextmanager
def threads_limit(con: duckdb.DuckDBPyConnection, threads: int | None) -> Iterator[None]:
    """Within the block, the connection's DuckDB runs on at most `threads` threads (None:
    as many as before, e.g. `threads_for` under the user's memory limit); the count
    before is restored afterwards.

    The writer appends its batches of ranks on one thread: a parallel INSERT into a table
    of the file costs more CPU in all (each thread compresses and writes its own row
    groups: 1.6x the CPU of one thread for a real 8-rank `cpu_ops`, measured), and the
    appends run while the workers parse the next files on the other cores."""
    (before,), = con.execute(sql("catalog/threads_get.sql")).fetchall()
    if threads is None or int(before) <= threads:
        yield
        return
    con.execute(sql("catalog/threads.sql"), {"threads": threads})
    # Restored when the block ends, not when it raises: the connection is then past saving
    # (its transaction aborted, or the database invalidated by a failed commit) and its
    # owner closes it; a statement now would raise a second error ("Current transaction
    # is aborted", "database has been invalidated") in place of the first, the one the
    # user must see (a batch's append that ran out of memory read "could not be stored").
    yield
    con.execute(sql("catalog/threads.sql"), {"threads": int(before)})


@cache
@cache
def _current_layout() -> schema.Layout:
    """The current schema's layout, from a scratch in-memory database built by the
    migrations (what an older file is made to look like)."""
    scratch = connect()
    try:
        schema.migrate(scratch, None)
        return schema.layout(scratch)
    finally:
        scratch.close()


def delete_run_rows(con: duckdb.DuckDBPyConnection, run: str) -> None:
    """Delete `run` from every table stepscope owns whose rows belong to a run (the
    registry stepscope_tables; the nightly `history` keeps its rows, and a table stepscope
    does not own is never touched), in the caller's transaction.

    The one statement stepscope builds as text: DuckDB takes no table name as a query
    parameter and has no relational delete. The names come from the registry and are
    quoted; the run is a parameter."""
    for table in schema.owned_run_tables(con):
        con.execute(f"DELETE FROM {quote_identifier(table)} WHERE run = $run", {"run": run})


def insert_by_name(con: duckdb.DuckDBPyConnection, table: str, rows: duckdb.DuckDBPyRelation,
                   constants: Mapping[str, object] | None = None) -> None:
    """Append `rows` to `table`, matching columns by name (case-insensitively, as DuckDB
    matches identifiers) like INSERT ... BY NAME: each of the table's columns takes the
    value in `constants`, else the column of `rows` of that name, else NULL (a column
    default is not applied). Built with DuckDB's relational API, so no SQL text names the
    table. A column of `rows` the table lacks raises duckdb.BinderException, as the SQL
    statement does."""
    given = {name.lower(): value for name, value in (constants or {}).items()}
    staged = {name.lower(): name for name in rows.columns}
    target = con.table(table)
    extra = set(staged) - {name.lower() for name in target.columns} - set(given)
    if extra:
        raise duckdb.BinderException(f"table {table} has no column(s) {sorted(extra)}")
    rows.select(*(
        duckdb.ConstantExpression(given[name.lower()]).cast(kind).alias(name)
        if name.lower() in given
        else duckdb.ColumnExpression(staged[name.lower()]).alias(name)
        if name.lower() in staged
        else duckdb.ConstantExpression(None).cast(kind).alias(name)
        for name, kind in zip(target.columns, target.types, strict=True)
    )).insert_into(table)


def quote_identifier(name: str) -> str:
    """A table or column name as a quoted SQL identifier (embedded quotes doubled), for
    names read from a database: they are never spliced into SQL text as they are."""
    return '"' + name.replace('"', '""') + '"'
