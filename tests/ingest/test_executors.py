"""Issue 14: per-rank tasks on any executor give the same database; --ranks subsets.

The executors (inline, worker processes, Ray) run the same task function; these tests
ingest the same simulated job with each and compare every stored row, attribution
included, to the nanosecond. Speed and memory are measured in benchmarks/, not here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from conftest import SIM, kineto_trace, start_local_ray, write_trace

import stepscope
import stepscope.ingest.writer
from stepscope.cli import main
from stepscope.ingest.errors import UsageError
from stepscope.ingest.executors import (
    InlineExecutor,
    ProcessExecutor,
    make_executor,
    parse_executor,
)
from stepscope.ingest.ranksets import parse_ranks

pytestmark = pytest.mark.slow  # ingests a set with every executor

JOB = SIM / "straggler"  # 8 ranks, TP2 x PP2 x DP2, rank 3 slow

# Every table of a run's rows, with the columns that differ by design left out.
VOLATILE = {"runs": ["ingested_at"]}


def run_tables(db: Path) -> dict[str, list[tuple[object, ...]]]:
    """All rows of every table with a `run` column, sorted, keyed by table."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        names = [r[0] for r in con.execute(
            "SELECT DISTINCT table_name FROM duckdb_columns() WHERE column_name = 'run' "
            "AND NOT internal AND schema_name = 'main' ORDER BY 1").fetchall()]
        out = {}
        for name in names:
            exclude = VOLATILE.get(name, [])
            cols = [r[0] for r in con.execute(
                "SELECT column_name FROM duckdb_columns() WHERE table_name = $t "
                "ORDER BY column_index", {"t": name}).fetchall() if r[0] not in exclude]
            quoted = ", ".join('"' + c + '"' for c in cols)
            out[name] = con.execute(
                f'SELECT {quoted} FROM "{name}" ORDER BY ALL').fetchall()
        return out
    finally:
        con.close()


@pytest.fixture(scope="module")
def inline_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("inline") / "s.duckdb"
    stepscope.ingest_run([JOB], db=db, run="job", executor="inline")
    return db


def test_process_executor_stores_exactly_what_inline_stores(inline_db: Path,
                                                           tmp_path: Path) -> None:
    db = tmp_path / "p.duckdb"
    result = stepscope.ingest_run([JOB], db=db, run="job", executor="process", jobs=2)
    assert result.status == "complete" and sorted(result.ranks) == list(range(8))
    inline, process = run_tables(inline_db), run_tables(db)
    assert process.keys() == inline.keys()
    assert {"cpu_ops", "gpu_ops", "collectives", "step_attribution"} <= inline.keys()
    for table in inline:
        assert process[table] == inline[table], table
    assert len(inline["step_attribution"]) == 8 * 3


def test_small_batches_store_what_one_batch_stores(inline_db: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Appending 3 ranks at a time (process groups deduplicated across batches) changes
    nothing."""
    monkeypatch.setattr(stepscope.ingest.writer, "BATCH_RANKS", 3)
    db = tmp_path / "b.duckdb"
    stepscope.ingest_run([JOB], db=db, run="job", executor="inline")
    assert run_tables(db) == run_tables(inline_db)


def test_stage_dir_is_used_and_left_empty(tmp_path: Path) -> None:
    """Glob characters in the folder's name are just characters."""
    stage = tmp_path / "st[a]ge*"
    stage.mkdir()
    stepscope.ingest_run([JOB], db=tmp_path / "s.duckdb", run="job", stage_dir=stage)
    assert list(stage.iterdir()) == []


def test_missing_stage_dir_is_a_usage_error(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.duckdb"
    code = main(["ingest", str(JOB), "--db", str(db), "--stage-dir", str(tmp_path / "nope")])
    assert code == 2
    assert capsys.readouterr().err.strip() == (
        f"error: --stage-dir {tmp_path / 'nope'}: no such folder")


@pytest.fixture(scope="module")
def local_ray() -> Iterator[Any]:
    """A local Ray instance with 2 CPUs, as on a CI machine (started once: ~10 s)."""
    ray = start_local_ray()
    yield ray
    ray.shutdown()


def test_ray_executor_stores_exactly_what_local_stores(inline_db: Path, tmp_path: Path,
                                                       local_ray: Any) -> None:
    """A local Ray instance runs the same tasks: identical rows, attribution to the
    nanosecond."""
    db = tmp_path / "r.duckdb"
    result = stepscope.ingest_run([JOB], db=db, run="job", executor="ray")
    assert result.status == "complete" and sorted(result.ranks) == list(range(8))
    assert run_tables(db) == run_tables(inline_db)


def test_ray_reports_a_bad_file_like_local(tmp_path: Path, local_ray: Any) -> None:
    run_dir = tmp_path / "job"
    write_trace(run_dir / "rank0.json.gz", kineto_trace(rank=0))
    (run_dir / "rank1.json").write_text('{"traceEvents": [')
    result = stepscope.ingest_run([run_dir], db=tmp_path / "r.duckdb", executor="ray")
    local = stepscope.ingest_run([run_dir], db=tmp_path / "l.duckdb", executor="inline")
    assert result.failures == local.failures
    assert [f for f, _ in result.failures] == [str(run_dir / "rank1.json")]
    assert result.ranks == local.ranks == [0]


# ------------------------------------------------------------------ --ranks
def test_ranks_subset_ingests_only_those_and_says_so(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.duckdb"
    assert main(["ingest", str(JOB), "--db", str(db), "--run", "sub", "--ranks", "0-2,5"]) == 0
    out = capsys.readouterr().out
    assert "ingested run 'sub': 4 rank(s) from 8 file(s)" in out
    assert "(--ranks 0-2,5: 4 other file(s) skipped)" in out
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT n_ranks, world_size, rank_subset, status FROM runs").fetchall() \
        == [(4, 8, "0-2,5", "complete")]
    assert [r for (r,) in con.execute("SELECT rank FROM ranks ORDER BY 1").fetchall()] \
        == [0, 1, 2, 5]
    assert con.execute("SELECT count(DISTINCT rank) FROM gpu_ops").fetchall() == [(4,)]
    con.close()
    assert main(["report", "sub", "--db", str(db), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["run"]["rank_subset"] == "0-2,5"
    assert report["run"]["ranks"] == 4 and report["run"]["world_size"] == 8
    assert any(n.startswith("covers a subset: only ranks 0-2,5 were ingested (--ranks), "
                            "4 of 8") for n in report["notes"])
    assert main(["report", "sub", "--db", str(db)]) == 0
    assert "- subset: ranks 0-2,5 only (--ranks)" in capsys.readouterr().out


def test_ranks_subset_of_a_full_run_has_the_same_rows_for_those_ranks(
        inline_db: Path, tmp_path: Path) -> None:
    """Per-rank tables of a subset equal the full run's rows of those ranks."""
    db = tmp_path / "s.duckdb"
    stepscope.ingest_run([JOB], db=db, run="job", ranks="2-3")
    sub, full = run_tables(db), run_tables(inline_db)
    for table in ("cpu_ops", "gpu_ops", "steps", "collectives", "threads"):
        rank_col = 1  # (run, rank, ...)
        assert sub[table] == [r for r in full[table] if r[rank_col] in (2, 3)], table


def test_ranks_matching_nothing_is_exit_1(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.duckdb"
    assert main(["ingest", str(JOB), "--db", str(db), "--ranks", "100-200"]) == 1
    assert capsys.readouterr().err.strip() == (
        "error: nothing ingested into run 'straggler': none of the 8 trace file(s) holds one "
        "of the ranks 100-200 (--ranks)")
    assert not db.exists() or duckdb.connect(str(db)).execute(
        "SELECT count(*) FROM runs").fetchall() == [(0,)]


@pytest.mark.parametrize(("spec", "message"), [
    ("0-", "'0-' is not a rank or a range like 0-63"),
    ("5-2", "the range '5-2' runs backwards"),
    ("1,,2", "give ranks and ranges like 0-63,512"),
    ("x", "'x' is not a rank or a range like 0-63"),
])
def test_bad_ranks_are_usage_errors(spec: str, message: str, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ingest", str(JOB), "--db", str(tmp_path / "s.duckdb"), "--ranks", spec]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: stepscope ingest: argument --ranks: {message} (see --help)")


def test_rank_sets_merge_and_print_canonically() -> None:
    ranks = parse_ranks("512, 0-63,10-70,71")
    assert str(ranks) == "0-71,512"
    assert ranks.size == 73
    assert 0 in ranks and 71 in ranks and 512 in ranks
    assert 72 not in ranks and 511 not in ranks


# ------------------------------------------------------------------ executors
def test_executor_choice() -> None:
    assert isinstance(make_executor("auto", None, 1), InlineExecutor)
    assert isinstance(make_executor("auto", 1, 8), InlineExecutor)
    assert isinstance(make_executor("auto", 2, 8), ProcessExecutor)
    assert isinstance(make_executor("inline", 4, 8), InlineExecutor)
    assert parse_executor("ray") == ("ray", None)
    assert parse_executor("ray://head:10001") == ("ray", "ray://head:10001")
    assert parse_executor("ray:auto") == ("ray", "auto")
    with pytest.raises(UsageError, match="choose auto, inline, process, ray or ray://ADDRESS"):
        parse_executor("dask")


def test_bad_executor_is_a_usage_error(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ingest", str(JOB), "--db", str(tmp_path / "s.duckdb"),
                 "--executor", "dask"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: stepscope ingest: argument --executor: choose auto, inline, process, ray or "
        "ray://ADDRESS (see --help)")


def test_jobs_default_comes_from_stepscope_jobs(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("STEPSCOPE_JOBS", "3")
    executor = make_executor("auto", None, 8)
    assert isinstance(executor, ProcessExecutor) and executor.jobs == 3
    monkeypatch.setenv("STEPSCOPE_JOBS", "1")
    assert isinstance(make_executor("auto", None, 8), InlineExecutor)
    assert isinstance(make_executor("auto", 2, 8), ProcessExecutor)  # --jobs wins
    monkeypatch.setenv("STEPSCOPE_JOBS", "many")
    db = tmp_path / "s.duckdb"
    assert main(["ingest", str(JOB), "--db", str(db)]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: $STEPSCOPE_JOBS='many': expected a whole number from 1 to 1024")
    assert not db.exists()


def test_a_worker_that_dies_fails_its_file_only(tmp_path: Path) -> None:
    """A worker killed mid-task (say by the OOM killer) fails that file; the task sent
    ahead to it, never started, goes back to the front of the queue; a new worker takes
    the next task."""
    from collections import deque

    from stepscope.ingest.executors import _Worker
    from stepscope.ingest.tasks import Outcome, RankFailed, RankParsed, RankTask, Task

    files = sorted(JOB.glob("rank*.json.gz"))[:3]
    tasks = [RankTask(i, str(f), f.name, str(tmp_path / str(i)), 8)
             for i, f in enumerate(files)]
    worker = _Worker()
    worker.start(tasks[0])
    worker.start(tasks[1])
    worker.proc.kill()
    queue: deque[Task] = deque([tasks[2]])
    done: dict[int, Outcome] = {}
    ProcessExecutor._collect([worker], queue, done)
    assert done == {0: RankFailed(0, files[0].name, "the worker process died while reading "
                                  "it (killed by SIGKILL, with nothing on stderr: out of "
                                  "memory?)")}
    assert list(queue) == [tasks[1], tasks[2]] and not worker.pending
    worker.stop(kill=True)
    tasks = tasks[:2]
    executor = ProcessExecutor(2)
    outcomes = list(executor.run(tasks))
    assert [type(o) for o in outcomes] == [RankParsed, RankParsed]
    assert [o.index for o in outcomes] == [0, 1]


def test_every_outcome_waiting_in_a_workers_pipe_is_read(tmp_path: Path) -> None:
    """A worker has two tasks sent ahead, so while the consumer is busy both outcomes can
    wait in its pipe; each must be seen by the poll that collects them. (Read through a
    buffered reader, the second went into the reader's buffer, where the poll never saw
    it, and the ingest waited forever.)"""
    from collections import deque

    from stepscope.ingest.executors import _Worker
    from stepscope.ingest.tasks import Outcome, RankTask, Task

    files = [write_trace(tmp_path / f"bad{i}.json", "not JSON") for i in range(2)]
    tasks = [RankTask(i, str(f), f.name, str(tmp_path / str(i)), 8)
             for i, f in enumerate(files)]  # failures: outcomes of a few hundred bytes
    worker = _Worker()
    try:
        worker.start(tasks[0])
        worker.start(tasks[1])
        _wait_until_answered(worker.fileno())  # a busy consumer meanwhile
        queue: deque[Task] = deque()
        done: dict[int, Outcome] = {}
        ProcessExecutor._collect([worker], queue, done)
        ProcessExecutor._collect([worker], queue, done)
        assert sorted(done) == [0, 1] and not worker.pending
    finally:
        worker.stop(kill=True)


def _wait_until_answered(fd: int, settle_s: float = 1.0, limit_s: float = 60) -> None:
    """Wait until bytes wait in the pipe `fd` and their count has not grown for
    `settle_s` (the worker answered every task it had), at most `limit_s`."""
    import fcntl
    import struct
    import termios
    import time

    def waiting() -> int:
        return int(struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0])

    deadline = time.monotonic() + limit_s
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        now = waiting()
        if now != last:
            last, since = now, time.monotonic()
        elif now and time.monotonic() - since >= settle_s:
            return
        time.sleep(0.05)
    raise AssertionError("the worker never answered")


def test_ray_start_keeps_the_stop_signal_handlers() -> None:
    """ray.init installs a SIGTERM handler that exits 15 without a word (a SIGTERM during
    Ray's start ended `stepscope ingest --executor ray` that way); the executor keeps
    the CLI's handlers in place during the start and after it."""
    import signal
    import types

    from stepscope.ingest.executors import RayExecutor

    offered: list[Any] = []

    def ray_sets(handler: Any) -> None:  # Ray's own: installs its handler
        signal.signal(signal.SIGTERM, handler)

    utils = types.SimpleNamespace(set_sigterm_handler=ray_sets)

    def init(**_: Any) -> None:
        def exits_15(signum: int, frame: Any) -> None:
            raise SystemExit(signum)
        offered.append(exits_15)
        utils.set_sigterm_handler(exits_15)
        assert signal.getsignal(signal.SIGTERM) is ours  # during the start, too
        signal.signal(signal.SIGINT, exits_15)  # whatever else it does is undone

    fake_ray = types.SimpleNamespace(init=init, _private=types.SimpleNamespace(utils=utils))

    def ours(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    signal.signal(signal.SIGTERM, ours)
    try:
        RayExecutor(None)._init(fake_ray)
        assert offered and signal.getsignal(signal.SIGTERM) is ours
        assert signal.getsignal(signal.SIGINT) is before[signal.SIGINT]
        assert utils.set_sigterm_handler is ray_sets  # Ray's function is given back
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
