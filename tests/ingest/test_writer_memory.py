"""The writer's DuckDB memory limit (ingest/db.py, docs/scale.md "Memory"): 1GB on a
write connection, small while an ingest appends its run, sized to the attribution's
largest batch of ranks while it runs, the user's $STEPSCOPE_MEMORY_LIMIT as given; and
the ingest under these limits stores the same rows and leaves the database unchanged
when it fails."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

import stepscope
from stepscope.analyzers.breakdown import attribution
from stepscope.ingest import IngestResult, ingest
from stepscope.ingest import db as ingest_db
from stepscope.ingest.db import (
    MEMORY_CEILING_BYTES,
    MEMORY_ENV,
    MEMORY_FLOOR_BYTES,
    MEMORY_PER_EVENT_BYTES,
    ROOM_PER_THREAD_BYTES,
    Room,
    connect_write,
    fit_memory_limit,
    memory_limit_for,
    room_for_bytes,
    run_memory_bytes,
    size_bytes,
    threads_for,
)

pytestmark = pytest.mark.slow  # ingests runs under memory limits

MIB = 2**20


def _limit_bytes(con: duckdb.DuckDBPyConnection) -> float:
    """The connection's memory limit in bytes (DuckDB prints it rounded, e.g. 61.0 MiB)."""
    (text,), = con.execute("SELECT current_setting('memory_limit')").fetchall()
    size = size_bytes(text)
    assert size is not None, text
    return size


def test_limit_for_events(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MEMORY_ENV, raising=False)
    assert memory_limit_for(0) == MEMORY_FLOOR_BYTES
    assert memory_limit_for(1_000_000) == 1_000_000 * MEMORY_PER_EVENT_BYTES
    assert memory_limit_for(10**12) == MEMORY_CEILING_BYTES
    monkeypatch.setenv(MEMORY_ENV, "2GB")
    assert memory_limit_for(1_000_000) is None  # the user's limit holds


def test_threads_for_events(monkeypatch: pytest.MonkeyPatch) -> None:
    """One DuckDB thread per ROOM_PER_THREAD_BYTES of a query's room: the floor's room
    runs on one thread, a batch of a million events (305 MiB) on nine."""
    monkeypatch.delenv(MEMORY_ENV, raising=False)
    assert ROOM_PER_THREAD_BYTES == MEMORY_FLOOR_BYTES
    assert threads_for(0) == threads_for(50_000) == 1
    assert threads_for(1_000_000) == 1_000_000 * MEMORY_PER_EVENT_BYTES // (32 << 20) == 9
    monkeypatch.setenv(MEMORY_ENV, "2GB")
    assert threads_for(1_000_000) is None  # every thread, under the user's limit


def test_writer_opens_at_1gb_and_an_ingest_runs_at_the_floor(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reports on a write connection (the nightly's) get the 1GB default; an ingest lowers
    it to the floor while it appends and sizes it to the batch while it attributes and
    commits."""
    monkeypatch.delenv(MEMORY_ENV, raising=False)
    con = connect_write(tmp_path / "a.duckdb")
    try:
        assert _limit_bytes(con) == pytest.approx(1e9, rel=0.01)
        with fit_memory_limit(con, 0):
            assert _limit_bytes(con) == pytest.approx(MEMORY_FLOOR_BYTES, rel=0.01)
            with fit_memory_limit(con, 2_000_000):
                assert _limit_bytes(con) == pytest.approx(
                    2_000_000 * MEMORY_PER_EVENT_BYTES, rel=0.01)
            # not lowered again (that would evict what the commit writes): the floor's
            # block restores its own limit when it ends
            assert _limit_bytes(con) == pytest.approx(
                2_000_000 * MEMORY_PER_EVENT_BYTES, rel=0.01)
        assert _limit_bytes(con) == pytest.approx(1e9, rel=0.01)
        with fit_memory_limit(con, 2_000_000):  # below 1GB: restored
            assert _limit_bytes(con) == pytest.approx(
                2_000_000 * MEMORY_PER_EVENT_BYTES, rel=0.01)
        assert _limit_bytes(con) == pytest.approx(1e9, rel=0.01)
    finally:
        con.close()
    monkeypatch.setenv(MEMORY_ENV, "300MB")
    con = connect_write(tmp_path / "b.duckdb")
    try:
        assert _limit_bytes(con) == pytest.approx(300e6, rel=0.01)
        with fit_memory_limit(con, 2_000_000):
            assert _limit_bytes(con) == pytest.approx(300e6, rel=0.01)
    finally:
        con.close()


def test_a_step_that_needs_less_runs_in_less(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """`Room.within` lowers DuckDB's limit for a block whose working set is known to be
    smaller than the room's (the clock alignment's fit: END_BYTES per host end), inside
    the ingest's transaction, and sets the room's back; a larger or no room (the user's
    limit) leaves it as it is."""
    monkeypatch.delenv(MEMORY_ENV, raising=False)
    assert room_for_bytes(0) == MEMORY_FLOOR_BYTES
    assert room_for_bytes(48 * MIB) == 48 * MIB
    con = connect_write(tmp_path / "a.duckdb")
    try:
        con.execute("BEGIN TRANSACTION")
        room = Room(con, 96 * MIB)
        con.execute(f"SET memory_limit = '{96 * MIB}B'")
        with room.within(room_for_bytes(40 * MIB)):
            assert _limit_bytes(con) == pytest.approx(40 * MIB, rel=0.01)
            con.execute("CREATE TEMP TABLE t AS SELECT range AS a FROM range(100000)")
        assert _limit_bytes(con) == pytest.approx(96 * MIB, rel=0.01)
        for larger in (room_for_bytes(200 * MIB), None):
            with room.within(larger):
                assert _limit_bytes(con) == pytest.approx(96 * MIB, rel=0.01)
        with Room(con).within(room_for_bytes(0)):  # the user's limit: as it is
            assert _limit_bytes(con) == pytest.approx(96 * MIB, rel=0.01)
        con.execute("COMMIT")
    finally:
        con.close()
    monkeypatch.setenv(MEMORY_ENV, "2GB")
    assert room_for_bytes(0) is None


def test_the_limit_is_room_above_what_the_run_holds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The uncommitted rows of the run sit in DuckDB's buffers until the commit, where
    they must be pinned: the limit of a step is its room on top of them."""
    monkeypatch.delenv(MEMORY_ENV, raising=False)
    con = connect_write(tmp_path / "a.duckdb")
    try:
        con.execute("CREATE TABLE t (a BIGINT)")
        con.execute("BEGIN TRANSACTION")
        con.execute("INSERT INTO t SELECT range FROM range(4000000)")
        held = run_memory_bytes(con)
        assert held > 0
        with fit_memory_limit(con, 0):
            assert _limit_bytes(con) == pytest.approx(MEMORY_FLOOR_BYTES + held, rel=0.01)
            with fit_memory_limit(con, 2_000_000):
                assert _limit_bytes(con) == pytest.approx(
                    2_000_000 * MEMORY_PER_EVENT_BYTES + run_memory_bytes(con), rel=0.01)
        con.execute("ROLLBACK")
    finally:
        con.close()


def _spy_limits(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, float, int]]:
    """Record the connection's memory limit and thread count at every attribution
    script."""
    seen: list[tuple[str, float, int]] = []
    original: Callable[..., None] = attribution.run_script

    def spy(con: duckdb.DuckDBPyConnection, name: str, params: object = None) -> None:
        (threads,), = con.execute("SELECT current_setting('threads')").fetchall()
        seen.append((name, _limit_bytes(con), int(threads)))
        original(con, name, params)

    monkeypatch.setattr(attribution, "run_script", spy)
    return seen


def test_attribution_runs_at_its_batch_limit(
        make_run: Callable[..., Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The ingest's attribution runs with the room of its largest batch (here the floor:
    a small job) on top of what the run pins, and the rows are those of an ingest with a
    generous limit."""
    monkeypatch.delenv(MEMORY_ENV, raising=False)
    monkeypatch.setenv("STEPSCOPE_JOBS", "1")
    folder = make_run(world_size=3, steps=3)
    seen = _spy_limits(monkeypatch)
    stepscope.ingest_run(folder, db=tmp_path / "small.duckdb", run="r", executor="inline")
    con = duckdb.connect(str(tmp_path / "small.duckdb"), read_only=True)
    (events,), = con.execute("SELECT sum(n_events) FROM ranks").fetchall()
    con.close()
    expected = memory_limit_for(int(events))
    assert expected is not None and seen
    assert {name for name, _, _ in seen} >= {"attribution/collective_match.sql",
                                             "attribution/attribution.sql"}
    # room for the batch on top of what the uncommitted 3-rank run pins (well under 4 MiB)
    # for every query (the macros, installed before, read no rows), on the one thread
    # that the floor's room gives
    queries = [(limit, n) for name, limit, n in seen if not name.endswith("/macros.sql")]
    assert all(expected <= limit <= expected + (4 << 20) for limit, _ in queries), seen
    assert threads_for(int(events)) == 1
    assert {n for _, n in queries} == {1}, seen
    monkeypatch.setenv(MEMORY_ENV, "2GB")
    stepscope.ingest_run(folder, db=tmp_path / "big.duckdb", run="r", executor="inline")
    tables = ("step_attribution", "collective_waits", "collective_exposure", "idle_gaps",
              "host_activity", "gpu_ops", "cpu_ops")
    assert _rows(tmp_path / "small.duckdb", tables) == _rows(tmp_path / "big.duckdb", tables)


def _rows(path: Path, tables: tuple[str, ...]) -> dict[str, list[tuple[object, ...]]]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return {t: sorted(map(repr, con.execute(f"SELECT * FROM {t}").fetchall()))
                for t in tables}
    finally:
        con.close()


def test_failed_attribution_leaves_the_database(
        make_run: Callable[..., Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An out-of-memory failure in the attribution (a limit too small for the batch, as a
    user's $STEPSCOPE_MEMORY_LIMIT can be) rolls the whole run back: the run ingested
    before is untouched and the spill folder is gone."""
    monkeypatch.delenv(MEMORY_ENV, raising=False)
    monkeypatch.setenv("STEPSCOPE_JOBS", "1")
    db = tmp_path / "s.duckdb"
    stepscope.ingest_run(make_run(world_size=2), db=db, run="keep", executor="inline")
    before = _rows(db, ("runs", "step_attribution", "gpu_ops"))

    def too_small(events: int) -> int:
        # the appends at the floor; the attribution in 1 MiB, where its queries cannot run
        return (1 << 20) if events else MEMORY_FLOOR_BYTES

    monkeypatch.setattr(ingest_db, "memory_limit_for", too_small)
    with pytest.raises(duckdb.OutOfMemoryException):
        stepscope.ingest_run(make_run(world_size=2, steps=3), db=db, run="keep",
                             executor="inline")
    assert _rows(db, ("runs", "step_attribution", "gpu_ops")) == before
    assert not Path(f"{db}.tmp").exists() or not any(Path(f"{db}.tmp").iterdir())


HEALTHY = Path(__file__).resolve().parents[2] / "sample_traces" / "simulated" / "healthy"


def test_failed_ingest_leaves_the_file_as_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run rolled back after its rows were written (DuckDB writes a large transaction's
    row groups to the file as it goes) leaves the file byte for byte as it was: before,
    the healthy set's failed ingest grew the file from 4.47 to 4.73 MB for good."""
    monkeypatch.delenv(MEMORY_ENV, raising=False)
    db = tmp_path / "s.duckdb"
    stepscope.ingest_run(HEALTHY, db=db, run="keep", executor="inline")
    before = db.read_bytes()

    def fail(con: duckdb.DuckDBPyConnection, run: str) -> None:
        raise RuntimeError("the analyzers failed")

    with pytest.raises(RuntimeError, match="the analyzers failed"):
        ingest([HEALTHY], db=db, run="new", executor="inline", after_load=fail)
    assert db.read_bytes() == before
    assert not Path(f"{db}.wal").exists()


def test_out_of_memory_is_the_error_shown(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A step that runs out of its room, with no larger room to try, fails with DuckDB's
    own out-of-memory error, named with the limit that failed; before, the appends'
    settings were restored inside the aborted transaction and the user read "could not be
    stored (TransactionContext Error: Current transaction is aborted) ... (please report
    this file)", and the message named a 1GB limit when 8 MiB failed."""
    from stepscope.ingest.db_errors import explain

    monkeypatch.delenv(MEMORY_ENV, raising=False)
    monkeypatch.setenv("STEPSCOPE_JOBS", "1")
    db = tmp_path / "s.duckdb"
    stepscope.ingest_run(HEALTHY, db=db, run="keep", executor="inline")
    before = db.read_bytes()
    monkeypatch.setattr(ingest_db, "MEMORY_FLOOR_BYTES", 8 * MIB)
    monkeypatch.setattr(ingest_db, "ROOM_SCALES", (1,))
    with pytest.raises(duckdb.OutOfMemoryException) as failed:
        stepscope.ingest_run(HEALTHY, db=db, run="new", executor="inline")
    line = str(explain(failed.value, db))
    assert line.startswith("out of memory in the database at its limit of 8.0 MiB"), line
    assert "nothing was committed" in line and "\n" not in line
    assert db.read_bytes() == before


def test_ingest_tries_a_larger_room(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the smallest room is too small, the ingest runs again in a larger one and
    stores the same rows as at the defaults, saying so in one warning."""
    monkeypatch.delenv(MEMORY_ENV, raising=False)
    monkeypatch.setenv("STEPSCOPE_JOBS", "1")
    stepscope.ingest_run(HEALTHY, db=tmp_path / "ref.duckdb", run="r", executor="inline")
    monkeypatch.setattr(ingest_db, "MEMORY_FLOOR_BYTES", 4 * MIB)
    result = stepscope.ingest_run(HEALTHY, db=tmp_path / "s.duckdb", run="r",
                                  executor="inline")
    assert [w for w in result.warnings if "ran out of memory" in w] == [
        "the database ran out of memory at 4.0 MiB while appending the ranks; the ingest "
        "was rolled back and ran again with 8x the room"]
    tables = ("runs", "step_attribution", "collective_waits", "gpu_ops", "cpu_ops")
    ref, got = _rows(tmp_path / "ref.duckdb", tables), _rows(tmp_path / "s.duckdb", tables)
    assert got.pop("runs")[0].split("datetime")[0] == ref.pop("runs")[0].split("datetime")[0]
    assert got == ref


def _count_parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files the inline executor parses, in order."""
    from stepscope.ingest import executors

    parsed: list[str] = []
    original = executors.run_task

    def counting(task: object, token: object) -> object:
        parsed.append(task.path)  # type: ignore[attr-defined]
        return original(task, token)  # type: ignore[arg-type]

    monkeypatch.setattr(executors, "run_task", counting)
    return parsed


def _fails_once(exc: BaseException) -> Callable[[duckdb.DuckDBPyConnection, str], None]:
    """An after_load (the analyzers, inside the ingest's transaction) that fails the first
    try, after every file was parsed and appended, as the attribution or the commit does
    when the room is too small."""
    calls: list[int] = []

    def after_load(con: duckdb.DuckDBPyConnection, run: str) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise exc
        attribution.materialize(con, run)

    return after_load


def _ingest_failing_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                         ) -> tuple[list[str], IngestResult]:
    """The healthy set ingested twice: ref.duckdb as usual, then s.duckdb with a first try
    that runs out of room in the attribution; the files parsed by the second, and its
    result."""
    monkeypatch.delenv(MEMORY_ENV, raising=False)
    monkeypatch.setenv("STEPSCOPE_JOBS", "1")
    ingest([HEALTHY], db=tmp_path / "ref.duckdb", run="r", executor="inline",
           after_load=attribution.materialize)
    parsed = _count_parses(monkeypatch)
    result = ingest([HEALTHY], db=tmp_path / "s.duckdb", run="r", executor="inline",
                    after_load=_fails_once(duckdb.OutOfMemoryException(
                        "Out of Memory Error: could not allocate block (4.0 MiB/4.0 MiB "
                        "used)")))
    return parsed, result


def test_retry_appends_the_kept_parses(tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A try that ran out of room after every file arrived is retried from the Parquet
    files it kept: each file is parsed once (before: twice, half of a 4,096-rank ingest's
    59 minutes), and the rows are those of an ingest that never failed."""
    tables = ("step_attribution", "collective_waits", "gpu_ops", "cpu_ops", "ranks")
    parsed, result = _ingest_failing_once(tmp_path, monkeypatch)
    n_files = len(list(HEALTHY.glob("rank*.json.gz")))
    assert len(parsed) == len(set(parsed)) == n_files, parsed
    assert [w for w in result.warnings if "ran out of memory" in w] == [
        "the database ran out of memory at 4.0 MiB in the attribution; the ingest was "
        "rolled back and appended the parsed files again with 8x the room"]
    assert _rows(tmp_path / "s.duckdb", tables) == _rows(tmp_path / "ref.duckdb", tables)


def test_retry_parses_again_past_the_keep_budget(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """With no disk to keep the parsed files on, a retry parses every file again (and
    stores the same rows)."""
    from stepscope.ingest import writer

    monkeypatch.setattr(writer, "keep_budget", lambda stage: 0)
    tables = ("step_attribution", "gpu_ops", "ranks")
    parsed, result = _ingest_failing_once(tmp_path, monkeypatch)
    n_files = len(list(HEALTHY.glob("rank*.json.gz")))
    assert len(parsed) == 2 * n_files and len(set(parsed)) == n_files
    assert any("and ran again with 8x the room" in w for w in result.warnings)
    assert _rows(tmp_path / "s.duckdb", tables) == _rows(tmp_path / "ref.duckdb", tables)


def _fails_at_append(number: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer's `number`-th append of a batch of ranks (counted over every try) runs
    out of its room, as the first append of 2,048 simulated ranks did at 32 MiB."""
    from stepscope.ingest import writer

    appends: list[int] = []
    original = writer.run_script

    def failing(con: duckdb.DuckDBPyConnection, name: str, params: object) -> None:
        if name == "load/append_ranks.sql":
            appends.append(1)
            if len(appends) == number:
                raise duckdb.OutOfMemoryException(
                    "Out of Memory Error: could not allocate block (4.0 MiB/4.0 MiB used)")
        original(con, name, params)  # type: ignore[arg-type]

    monkeypatch.setattr(writer, "run_script", failing)


def test_retry_after_an_append_parses_only_what_never_arrived(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A try that ran out of room while appending (its second batch of 2 ranks: 4 of 8
    outcomes had arrived) is retried from the parses it kept: the retry parses only the 4
    files still to come, and a third try (the second ran out in the attribution) parses
    none. Each file is parsed once in all (before: 12 parses, the second try parsing all 8
    again), and the rows are those of an ingest that never failed."""
    from stepscope.ingest import writer

    monkeypatch.delenv(MEMORY_ENV, raising=False)
    monkeypatch.setenv("STEPSCOPE_JOBS", "1")
    ingest([HEALTHY], db=tmp_path / "ref.duckdb", run="r", executor="inline",
           after_load=attribution.materialize)
    parsed = _count_parses(monkeypatch)
    monkeypatch.setattr(writer, "BATCH_RANKS", 2)
    _fails_at_append(2, monkeypatch)
    result = ingest([HEALTHY], db=tmp_path / "s.duckdb", run="r", executor="inline",
                    after_load=_fails_once(duckdb.OutOfMemoryException(
                        "Out of Memory Error: could not allocate block (32.0 MiB/32.0 MiB "
                        "used)")))
    n_files = len(list(HEALTHY.glob("rank*.json.gz")))
    assert n_files == 8
    assert len(parsed) == len(set(parsed)) == n_files, parsed
    assert [w for w in result.warnings if "ran out of memory" in w] == [
        "the database ran out of memory at 4.0 MiB while appending the ranks; the ingest "
        "was rolled back and ran again with 8x the room, appending the 4 files it had "
        "parsed without parsing them again",
        "the database ran out of memory at 32.0 MiB in the attribution; the ingest was "
        "rolled back and appended the parsed files again with 8x the room"]
    tables = ("step_attribution", "collective_waits", "gpu_ops", "cpu_ops", "ranks")
    assert _rows(tmp_path / "s.duckdb", tables) == _rows(tmp_path / "ref.duckdb", tables)


def test_batches_leave_no_memory_behind(tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """What the uncommitted run holds in DuckDB's memory when the attribution starts does
    not depend on the number of batches the ranks were appended in: before, each batch's
    two temp tables (its files, its process groups) stayed until the commit (8 batches of
    1 rank: 7.77 MB against 7.69 for 1 batch of 8; a 64-rank batch's file list of ~900
    rows alone took 270 KB, ~32 of them at 2,048 ranks). Now 7.38 MB both ways."""
    from stepscope.ingest import writer

    monkeypatch.delenv(MEMORY_ENV, raising=False)
    monkeypatch.setenv("STEPSCOPE_JOBS", "1")
    held: dict[int, int] = {}
    for ranks_per_batch in (1, 64):
        monkeypatch.setattr(writer, "BATCH_RANKS", ranks_per_batch)

        def after_load(con: duckdb.DuckDBPyConnection, run: str, n: int = ranks_per_batch
                       ) -> None:
            held[n] = run_memory_bytes(con)
            attribution.materialize(con, run)

        ingest([HEALTHY], db=tmp_path / f"b{ranks_per_batch}.duckdb", run="r",
               executor="inline", after_load=after_load)
    assert held[1] == held[64], held


def test_duckdb_that_got_no_memory_from_the_machine_is_the_machines_failure() -> None:
    """DuckDB's "bad allocation" (the machine gave it nothing, as under `ulimit -v`) names
    no limit of its own: the line says the machine's failure; before, it blamed "the
    database at its limit" and told the user to raise $STEPSCOPE_MEMORY_LIMIT."""
    from stepscope.ingest.db_errors import explain

    exc = duckdb.OutOfMemoryException(
        "Out of Memory Error: Failed to allocate block of 16384 bytes (bad allocation)")
    line = str(explain(exc, "x.duckdb"))
    assert line.startswith("out of memory; "), line
    assert "(the machine's failure, not the database's)" in line and "at its limit" not in line
    assert line.endswith("nothing was committed to x.duckdb")


def test_a_commit_that_cannot_pin_a_block_is_out_of_memory(tmp_path: Path) -> None:
    """DuckDB's own commit error when the uncommitted rows need more than the limit says
    "failed to pin block", never "out of memory": it is still the limit reached, so the
    ingest retries in a larger room (before, exit 1 "database error (TransactionException
    …)"). The error is made here by DuckDB itself, every time: eight 10 MiB strings
    appended in one transaction under a 32 MiB limit, then COMMIT."""
    from stepscope.ingest.db import is_out_of_memory, limit_that_failed

    con = duckdb.connect(str(tmp_path / "pin.duckdb"), config={"memory_limit": "32MiB"})
    con.execute("CREATE TABLE t (s VARCHAR)")
    con.execute("BEGIN TRANSACTION")
    for _ in range(8):
        con.execute("INSERT INTO t VALUES (?)", ["x" * (10 * MIB)])
    with pytest.raises(duckdb.Error) as caught:
        con.execute("COMMIT")
    assert "failed to pin block" in str(caught.value).lower(), caught.value
    assert "out of memory" not in str(caught.value).lower(), caught.value
    assert is_out_of_memory(caught.value)
    assert limit_that_failed(caught.value) == "32.0 MiB"
