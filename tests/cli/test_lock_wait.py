"""Issue 43, the database lock: a writer waits for another process's lock a bounded time
($STEPSCOPE_LOCK_WAIT seconds, default 10), then fails with one line naming the holder
and the wait (exit 2, nothing written); a reader that closes within the wait lets the
ingest through. Each holder is a process of its own that opens the file read-only (as
a report, a dashboard page or a notebook does)."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from conftest import kineto_trace, write_trace

from stepscope.cli import main


def cli(*argv: str | Path) -> tuple[int, list[str]]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in argv])
    return rc, err.getvalue().splitlines()


def job(folder: Path) -> Path:
    for r in range(2):
        write_trace(folder / f"rank{r}.json.gz", kineto_trace(rank=r, world_size=2))
    return folder


def runs_in(db: Path) -> list[str]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [r for (r,) in con.execute("SELECT run FROM runs ORDER BY run").fetchall()]
    finally:
        con.close()


@contextlib.contextmanager
def reader(db: Path, hold_s: float) -> Iterator[subprocess.Popen[str]]:
    """Another process holding `db` open read-only for `hold_s` seconds."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1], "
         "read_only=True); print('open', flush=True); time.sleep(float(sys.argv[2])); "
         "c.close()", str(db), str(hold_s)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "open\n"
        yield holder
    finally:
        holder.kill()
        holder.wait()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "db.duckdb"
    assert cli("ingest", job(tmp_path / "t"), "--db", path, "--run", "first", "--quiet")[0] == 0
    return path


def test_a_writer_waits_for_a_reader_that_closes(db: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: exit 2 at once ("the database is locked by process …"), though the reader
    closed a second later."""
    monkeypatch.setenv("STEPSCOPE_LOCK_WAIT", "60")
    with reader(db, 1.0):
        rc, err = cli("ingest", tmp_path / "t", "--db", db, "--run", "second", "--quiet")
    assert rc == 0 and err == [], err
    assert runs_in(db) == ["first", "second"]


def test_the_wait_is_bounded_and_names_the_holder(db: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEPSCOPE_LOCK_WAIT", "0.6")
    with reader(db, 120.0) as holder:
        t0 = time.monotonic()
        rc, err = cli("ingest", tmp_path / "t", "--db", db, "--run", "second", "--quiet")
        waited = time.monotonic() - t0
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith(f"error: {db}: the database is locked by process {holder.pid} (")
    assert err[0].endswith("; waited 0.6 s for it ($STEPSCOPE_LOCK_WAIT); wait for it to "
                           "finish or use another --db"), err
    assert 0.4 < waited < 30  # bounded: it did wait, and it did stop
    assert runs_in(db) == ["first"]


def test_no_wait_with_zero(db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEPSCOPE_LOCK_WAIT", "0")
    with reader(db, 120.0) as holder:
        rc, err = cli("ingest", tmp_path / "t", "--db", db, "--run", "second", "--quiet")
    assert rc == 2 and len(err) == 1, err
    assert f"locked by process {holder.pid} (" in err[0] and "waited" not in err[0], err


@pytest.mark.parametrize("value", ["abc", "-1", "nan", "1e9"])
def test_a_wait_that_is_no_number_of_seconds_is_refused(value: str, db: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEPSCOPE_LOCK_WAIT", value)
    rc, err = cli("ingest", tmp_path / "t", "--db", db, "--run", "second", "--quiet")
    assert rc == 2 and err == [
        f"error: $STEPSCOPE_LOCK_WAIT={value}: not a number of seconds in [0, 86400]; give "
        "e.g. 30 (default 10, 0: do not wait)"], err
    assert runs_in(db) == ["first"]
