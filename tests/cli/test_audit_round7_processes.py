"""Audit round 7 (issue 43), the cases that need a process of their own: a stop signal
sent to each command from outside while it works (SIGTERM and SIGINT), stdout on a full
disk or a closed pipe, the file-size, open-file and address-space limits of a process,
and SIGTERM while a writer waits for a locked database. The in-process cases are in
test_audit_round7.py (its docstring holds the round's first-run count).

First run against the unchanged code: 31 of 34 held. Failed: RLIMIT_AS of 1.5 GiB made
each rank 'could not be read (Out of Memory Error ...)' (the machine's failure blamed on
the files, three lines); SIGTERM while an ingest waits for a locked database was
deferred until the wait ended (100 s); and SIGINT to `report` once hung for 60 s with no
output (not reproduced in five runs since; the case stays as it is). Three more failed
through errors of the test itself, corrected before any code changed: the plan case
patched a name `plan` does not call, and under a 256 KiB RLIMIT_FSIZE the ingest rightly
exits 0 (its write-ahead log fits; the run is replayed on the next open).

Fixed since: DuckDB's "Out of Memory Error" reading a trace's events is the machine's
failure (one line, "rank0.json.gz: out of memory; free memory, or ingest with fewer
--jobs (the machine's failure, not the file's): the ingest stopped and nothing was
committed", exit 1), and a stop signal ends the wait for a locked database at its next
poll (143, "interrupted by SIGTERM: nothing was ingested; ... is unchanged").
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import pytest
from conftest import cli_in_process as cli
from conftest import kineto_trace, write_trace

STEPSCOPE = [sys.executable, "-P", "-m", "stepscope"]
# A command whose work is replaced by a wait that says "ready" on stdout, so the signal
# arrives while the command is inside it (no race with the start-up).
HOLD = """
import importlib, sys, time
module = importlib.import_module("stepscope.commands." + sys.argv[1])
def hold(*args, **kwargs):
    sys.stdout.write("ready\\n"); sys.stdout.flush(); time.sleep(120)
setattr(module, sys.argv[2], hold)
sys.argv = ["stepscope", *sys.argv[3:]]
from stepscope.cli import entry
entry()
"""


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    base = tmp_path_factory.mktemp("audit7p")
    for r in range(2):
        write_trace(base / "t" / f"rank{r}.json.gz", kineto_trace(rank=r, world_size=2))
    for run in ("base", "other"):
        assert cli(("ingest", base / "t", "--db", base / "db.duckdb", "--run", run,
                    "--quiet"))[0] == 0
    yield base


HELD = {  # command: (module, the attribute its work goes through, its arguments)
    "summary": ("summary_cmd", "Store", ("summary", "--db", "{db}")),
    "report": ("report_cmd", "report", ("report", "base", "--db", "{db}")),
    "whatif": ("whatif_cmd", "open_target", ("whatif", "base", "--rank", "0", "--db",
                                             "{db}")),
    "export": ("export_cmd", "open_target", ("export", "base", "--out", "{root}/e.json",
                                             "--db", "{db}")),
    "hang": ("hang_cmd", "Store", ("hang", "base", "--db", "{db}")),
    "diff": ("diff_cmd", "diff", ("diff", "base", "other", "--db", "{db}")),
    "history": ("history_cmd", "Store", ("history", "j", "--db", "{db}")),
    "plan": ("plan_cmd", "plan_result", ("plan", "--params", "7e9", "--gpus", "8", "--gpu", "H100",
                                  "--seq", "4096")),
    "ingest": ("ingest_cmd", "ingest_run", ("ingest", "{root}/t", "--db", "{db}", "--run",
                                            "new")),
    "nightly": ("nightly_cmd", "run_nightly", ("nightly", "{root}/t", "--db", "{db}",
                                               "--job", "j", "--out-dir", "{root}/n")),
}
LINES = {
    signal.SIGTERM: (143, "interrupted by SIGTERM: "),
    signal.SIGINT: (130, "interrupted: "),
}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("command", list(HELD))
def test_a_stop_signal_from_outside(root: Path, command: str, sig: int) -> None:
    module, attr, argv = HELD[command]
    fill = {"db": str(root / "db.duckdb"), "root": str(root)}
    proc = subprocess.Popen([sys.executable, "-P", "-c", HOLD, module, attr,
                             *(a.format(**fill) for a in argv)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    code, start = LINES[sig]
    lines = err.splitlines()
    assert proc.returncode == code and len(lines) == 1 and lines[0].startswith(start), \
        (proc.returncode, err)
    assert not (root / "e.json").exists() and not (root / "n").exists()


def _run(argv: list[str], *, stdout: object = subprocess.DEVNULL,
         limit: Callable[[], None] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, stdout=stdout, stderr=subprocess.PIPE, text=True,
                          timeout=300, preexec_fn=limit)


@pytest.mark.parametrize("argv", [
    ("summary",), ("report", "base"), ("report", "base", "--format", "json"),
    ("history", "nojob-yet"), ("whatif", "base", "--rank", "0"),
], ids=["summary", "report", "report json", "history", "whatif"])
def test_stdout_on_a_full_disk(root: Path, argv: tuple[str, ...]) -> None:
    """`stepscope summary > /dev/full`: the machine's failure, one line, exit 1."""
    with open("/dev/full", "w") as full:
        done = _run([*STEPSCOPE, *argv, "--db", str(root / "db.duckdb")], stdout=full)
    lines = done.stderr.splitlines()
    if argv[0] == "history":  # no such job: its usage error, whatever stdout is
        assert done.returncode == 2 and len(lines) == 1, done.stderr
        return
    assert done.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: ") \
        and "No space left on device" in lines[0], (done.returncode, done.stderr)


@pytest.mark.parametrize("argv", [("summary",), ("report", "base"),
                                  ("report", "base", "--format", "html")],
                         ids=["summary", "report", "report html"])
def test_stdout_into_a_closed_pipe(root: Path, argv: tuple[str, ...]) -> None:
    """`stepscope report base | head -0`: the reader is gone; exit 0 and nothing on
    stderr, as after a BrokenPipeError anywhere else."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = _run([*STEPSCOPE, *argv, "--db", str(root / "db.duckdb")], stdout=write)
    finally:
        os.close(write)
    assert done.returncode == 0 and done.stderr == "", (done.returncode, done.stderr)


def _limit(kind: int, value: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(kind, (value, value))
    return apply


def _runs(db: Path) -> list[tuple[str, ...]]:
    if not db.exists():
        return []
    try:
        con = duckdb.connect(str(db), read_only=True)
    except duckdb.Error:
        return [("unreadable",)]
    try:
        return con.execute("SELECT run FROM runs").fetchall()
    except duckdb.Error:
        return []
    finally:
        con.close()


def test_ingest_past_the_file_size_limit(root: Path, tmp_path: Path) -> None:
    """RLIMIT_FSIZE of 256 KiB: the run's 61 KB write-ahead log fits, its checkpoint into
    the file does not; the run is committed (in the log, replayed on the next open), exit
    0. At 16 KiB not even the new database's first commit fits: one line naming the
    limit, exit 1 (the machine's failure, not the database's), nothing committed."""
    db = tmp_path / "db.duckdb"
    argv = [*STEPSCOPE, "ingest", str(root / "t"), "--db", str(db), "--quiet", "--executor",
            "inline"]
    done = _run(argv, limit=_limit(resource.RLIMIT_FSIZE, 256 << 10))
    assert (done.returncode, done.stderr) == (0, "")
    assert _runs(db) == [("t",)]
    db.unlink()
    (tmp_path / "db.duckdb.wal").unlink(missing_ok=True)
    done = _run(argv, limit=_limit(resource.RLIMIT_FSIZE, 16 << 10))
    lines = done.stderr.splitlines()
    assert done.returncode == 1 and len(lines) == 1 and lines[0].startswith(
        f"error: {db}: ") and "file size limit" in lines[0], (done.returncode,
                                                                 done.stderr)
    assert _runs(db) in ([], [("unreadable",)])


def test_report_out_past_the_file_size_limit(root: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.md"
    out.write_text("old")
    done = _run([*STEPSCOPE, "report", "base", "--db", str(root / "db.duckdb"), "--out",
                 str(out)], limit=_limit(resource.RLIMIT_FSIZE, 512))
    lines = done.stderr.splitlines()
    assert done.returncode == 1 and len(lines) == 1 and lines[0].startswith(
        f"error: {out}: could not be written (File too large)"), (done.returncode, done.stderr)
    assert out.read_text() == "old"


def test_plan_out_past_the_file_size_limit(tmp_path: Path) -> None:
    out = tmp_path / "p.md"
    done = _run([*STEPSCOPE, "plan", "--params", "7e9", "--gpus", "8", "--gpu", "H100",
                 "--seq", "4096", "--out", str(out)],
                limit=_limit(resource.RLIMIT_FSIZE, 512))
    lines = done.stderr.splitlines()
    assert done.returncode == 1 and len(lines) == 1 and "File too large" in lines[0], \
        (done.returncode, done.stderr)
    assert not out.exists()


def test_ingest_with_few_open_files(root: Path, tmp_path: Path) -> None:
    """RLIMIT_NOFILE of 24: DuckDB cannot open what it needs; one line, exit 1."""
    db = tmp_path / "db.duckdb"
    done = _run([*STEPSCOPE, "ingest", str(root / "t"), "--db", str(db), "--quiet",
                 "--executor", "inline"], limit=_limit(resource.RLIMIT_NOFILE, 24))
    lines = done.stderr.splitlines()
    assert done.returncode in (0, 1) and len(lines) <= 1, (done.returncode, done.stderr)
    assert not any("Traceback" in x or "internal error" in x for x in lines), done.stderr
    if done.returncode == 1:
        assert "too many open files" in lines[0], done.stderr


def test_ingest_in_a_small_address_space(root: Path, tmp_path: Path) -> None:
    """RLIMIT_AS of 1.5 GiB (the default DuckDB memory limit is 1 GB): the ingest either
    runs or stops with one line naming memory, exit 1, nothing committed."""
    db = tmp_path / "db.duckdb"
    done = _run([*STEPSCOPE, "ingest", str(root / "t"), "--db", str(db), "--quiet",
                 "--executor", "inline"], limit=_limit(resource.RLIMIT_AS, 1536 << 20))
    lines = done.stderr.splitlines()
    assert not any("Traceback" in x or "internal error" in x for x in lines), done.stderr
    assert (done.returncode, lines) == (0, []) or (
        done.returncode == 1 and len(lines) == 1 and ": out of memory; " in lines[0]
        and "(the machine's failure, not the file's)" in lines[0]
        and "nothing was committed" in lines[0]), done.stderr
    # it ran: the run is there (one malloc arena under the limit since
    # stepscope/address_space.py made 1.5 GiB enough); it stopped: nothing was committed
    assert _runs(db) == ([("t",)] if done.returncode == 0 else []) or \
        _runs(db) == [("unreadable",)]


def test_sigterm_while_waiting_for_a_locked_database(root: Path, tmp_path: Path) -> None:
    """A writer waits up to $STEPSCOPE_LOCK_WAIT for another process's lock; SIGTERM in
    that wait stops it at once: 143 and its one line."""
    db = tmp_path / "db.duckdb"
    assert cli(("ingest", root / "t", "--db", db, "--run", "a", "--quiet"))[0] == 0
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
         "print('open', flush=True); time.sleep(120)", str(db)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "open\n"
        proc = subprocess.Popen([*STEPSCOPE, "ingest", str(root / "t"), "--db", str(db),
                                 "--run", "b", "--quiet"], stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "STEPSCOPE_LOCK_WAIT": "100"})
        time.sleep(8)  # started and waiting for the lock
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        holder.kill()
        holder.wait()
    lines = err.splitlines()
    assert proc.returncode == 143 and len(lines) == 1 and \
        lines[0].startswith("interrupted by SIGTERM: "), (proc.returncode, err)
