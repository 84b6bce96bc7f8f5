"""Ctrl-C tells the truth (issue 9): whatever the moment, exit 130, one line saying
whether the run was committed, no traceback, no hang, and the database agrees.

In-process tests send SIGINT at chosen points (while reading files, while the analyzers
run inside the transaction, after the commit); the subprocess test sends it at several
moments of a real `stepscope ingest` and checks the line against the database.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest
from conftest import SAMPLES, q

import stepscope
from stepscope.cli import main
from stepscope.ingest.errors import Interrupted

SIMULATED = SAMPLES.parent / "simulated"
pytestmark = [pytest.mark.interrupt,
              pytest.mark.skipif(not hasattr(signal, "SIGINT") or os.name != "posix",
                                 reason="POSIX signals")]


def _sigint() -> None:
    os.kill(os.getpid(), signal.SIGINT)


@pytest.fixture
def db_with_run(tmp_path: Path) -> Path:
    """A database holding run 'x' (ddp, 4 ranks) and run 'keep'."""
    db = tmp_path / "i.duckdb"
    stepscope.ingest_run(SAMPLES / "ddp", db=db, run="x")
    stepscope.ingest_run(SAMPLES / "straggler", db=db, run="keep")
    return db


def _state(db: Path) -> list[tuple[Any, ...]]:
    return q(db, "SELECT run, n_ranks, ingested_at, (SELECT count(*) FROM cpu_ops c "
                 "WHERE c.run = r.run) FROM runs r ORDER BY run")


def test_sigint_while_reading_files_rolls_back(db_with_run: Path) -> None:
    before = _state(db_with_run)

    def interrupt(done: int, total: int, file: str) -> None:
        if done == 2:
            _sigint()  # handled as a flag: the ingest stops at its next safe point

    with pytest.raises(Interrupted) as err:
        stepscope.ingest_run(SIMULATED / "healthy", db=db_with_run, run="x", progress=interrupt,
                         jobs=1)
    assert not err.value.committed
    assert str(err.value) == (f"interrupted: run 'x' was not ingested; {db_with_run} is "
                              "unchanged")
    assert _state(db_with_run) == before


def test_sigint_inside_the_transaction_rolls_back(db_with_run: Path) -> None:
    """While the analyzers run inside the transaction (a DuckDB query in flight)."""
    from stepscope.ingest import ingest

    before = _state(db_with_run)

    def analyse(con: duckdb.DuckDBPyConnection, run: str) -> None:
        _sigint()
        con.execute("SELECT count(*) FROM range(30000000) a, range(10) b").fetchall()

    with pytest.raises(Interrupted) as err:
        ingest([SAMPLES / "pipeline"], db=db_with_run, run="x", after_load=analyse)
    assert not err.value.committed
    assert _state(db_with_run) == before


def test_sigint_after_the_commit_says_committed(
        db_with_run: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import stepscope.commands.ingest_cmd as ingest_cmd

    def summary_then_sigint(*args: Any) -> str:
        _sigint()
        time.sleep(0.1)  # the default handler raises KeyboardInterrupt here
        return ""

    monkeypatch.setattr(ingest_cmd, "summary_text", summary_then_sigint)
    code = main(["ingest", str(SAMPLES / "pipeline"), "--db", str(db_with_run), "--run", "x"])
    err = capsys.readouterr().err
    assert code == 130
    assert err.strip().splitlines()[1:] == [
        f"interrupted: run(s) 'x' were committed to {db_with_run} (complete); only the "
        "summary was not printed"]
    assert err.startswith(f"note: replaced run 'x' in {db_with_run}")  # it held 'x' before
    assert q(db_with_run, "SELECT n_ranks FROM runs WHERE run = 'x'") == [(4,)]
    assert q(db_with_run, "SELECT source_file LIKE '%pipeline%' FROM ranks WHERE run = 'x' "
                          "LIMIT 1") == [(True,)]


def test_main_leaves_the_sigint_handler_as_it_found_it(
        db_with_run: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from stepscope.dashboard.render import formats

    def interrupted(*args: Any) -> str:
        raise KeyboardInterrupt

    monkeypatch.setitem(formats.SUMMARY, "text", interrupted)
    before = signal.getsignal(signal.SIGINT)
    assert main(["summary", "--db", str(db_with_run)]) == 130
    assert signal.getsignal(signal.SIGINT) is before
    capsys.readouterr()


def test_sigint_in_a_read_only_command_says_nothing_was_written(
        db_with_run: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from stepscope.dashboard.render import formats

    def interrupted(*args: Any) -> str:
        raise KeyboardInterrupt

    monkeypatch.setitem(formats.SUMMARY, "text", interrupted)
    assert main(["summary", "--db", str(db_with_run)]) == 130
    assert capsys.readouterr().err == "interrupted: nothing was written\n"


def _ingest_and_interrupt(db: Path, delay: float, cwd: Path) -> tuple[int, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "stepscope", "ingest", str(SIMULATED / "healthy"),
         "--db", str(db), "--run", "x", "--jobs", "1", "--quiet"],
        cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # a child inherits an ignored SIGINT (nohup, `&` in scripts): start from the default
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(delay)
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=120)  # never a hang
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"ingest did not stop within 120 s of SIGINT at {delay} s")
    return proc.returncode, err


# Ctrl-C while the interpreter shuts down, after main has printed its outcome: an atexit
# hook (run during shutdown) sends the process SIGINT and gives it time to arrive.
_SIGINT_AT_EXIT = """
import atexit, os, signal, sys, time
def ctrl_c():
    print("SIGINT ignored at exit:", signal.getsignal(signal.SIGINT) is signal.SIG_IGN)
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.5)
atexit.register(ctrl_c)
sys.argv = ["stepscope", "summary", "--db", sys.argv[1]]
from stepscope.cli import entry
entry()
"""


def test_sigint_after_main_returned_keeps_its_exit_code(db_with_run: Path) -> None:
    """A Ctrl-C that lands while a finished command exits changes nothing: exit 0, the
    output printed, no traceback. Before, SIGINT kept its handler after main returned:
    a KeyboardInterrupt in the exit hooks, or, once CPython had reset the handler during
    shutdown, death by SIGINT (-2) with no line."""
    proc = subprocess.run([sys.executable, "-c", _SIGINT_AT_EXIT, str(db_with_run)],
                          capture_output=True, text=True, timeout=120,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert (proc.returncode, proc.stderr) == (0, "")
    assert "SIGINT ignored at exit: True" in proc.stdout and "run" in proc.stdout


def test_sigint_at_any_moment_of_a_real_ingest(tmp_path: Path) -> None:
    """SIGINT at several moments (imports, reading, analysing, committing, after): the
    one line always matches the database; the other run is never touched."""
    interrupted = 0
    for i, delay in enumerate((0.3, 1.0, 2.0, 3.5, 6.0)):
        db = tmp_path / f"s{i}.duckdb"
        stepscope.ingest_run(SAMPLES / "ddp", db=db, run="keep")
        keep = _state(db)
        code, err = _ingest_and_interrupt(db, delay, tmp_path)
        print(f"SIGINT at {delay} s: exit {code}, {err.strip() or '(no message)'}")
        assert "Traceback" not in err and "internal error" not in err, (delay, err)
        runs = {r[0] for r in q(db, "SELECT run FROM runs")}
        assert [row for row in _state(db) if row[0] == "keep"] == keep
        if code == 0:
            assert err == "" and runs == {"keep", "x"}
            continue
        assert code == 130, (delay, code, err)
        interrupted += 1
        (line,) = err.strip().splitlines()
        assert line.startswith("interrupted: ")
        if "was committed" in line:
            assert runs == {"keep", "x"}, line
        else:
            assert ("was not ingested" in line or "nothing was" in line), line
            assert runs == {"keep"}, line
    assert interrupted >= 2
