"""The machine's failures for every command that reads a trace path (issue 43).

Nothing here lists the commands: the parser (stepscope.cli.build_parser) is walked as in
test_option_matrix.py, and every argument that takes a trace path (its metavar says PATH,
or its help says "trace path") puts its command here. Each runs in a process of its own
under each of three limits set before it starts (resource.setrlimit in preexec_fn): the
file size (RLIMIT_FSIZE 8 KiB), the open files (RLIMIT_NOFILE 8: at 12 some commands
finish) and the address space (RLIMIT_AS 550 MiB, with one malloc arena: ONE_ARENA; once 430, 550
and 690 MiB all failed in stepscope's code; since every command refuses to start below
600 MiB, where a library could stop the process itself, and finishes at 600 MiB on these
traces, this case pins that refusal). Whatever fails, it
is the machine's failure: exit 1, one line (docs/cli.md) saying what ran out, naming what
the user gave:
- a trace path read into a temporary database (`report`, `diff`, `whatif`, `export`,
  `hang`, `plan --from`): the path ("PATH: cannot write the temporary database of the
  traces: …"), never the temporary /tmp/stepscope-*/run.duckdb, nor the --db it leaves
  unused (stepscope/scratch_db.py);
- traces ingested into the user's database (`ingest`, `nightly`): the --db.
No traceback, no "internal error", nothing left in the current folder or in $TMPDIR.

First run against the code before this module's fixes (2a28b96): 18 of 25 failed, every
trace-path command under every limit: past the file size the line named the temporary
/tmp/stepscope-*/run.duckdb; with 8 open files "too many open files … nothing was
committed to stepscope.duckdb" (the --db a trace path leaves unused) or "to the
database"; in 550 MiB the line named a trace file, then the temporary database.
`ingest` and `nightly` (6) and the walk held.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import kineto_trace, write_trace

from stepscope.cli import build_parser

# what each limit runs out of, in the line's words (ingest.errors.machine_problem)
LIMITS: dict[str, tuple[int, int, str]] = {
    "file size 8 KiB": (resource.RLIMIT_FSIZE, 8 << 10, "the file size limit is reached"),
    "8 open files": (resource.RLIMIT_NOFILE, 8, "too many open files in this process"),
    # below the floor (stepscope/address_space.py) every command refuses to start
    "550 MiB of address space": (resource.RLIMIT_AS, 550 << 20,
                                 "out of memory; the address-space limit (ulimit -v) of "
                                 "550 MiB is below the 600 MiB stepscope needs: raise it"),
}
# The rest of each command line: only what the command requires. {t} and {t2} are trace
# folders, {db} the user's database, {sandbox} a folder for outputs.
BASE: dict[str, tuple[str, ...]] = {
    "ingest": ("ingest", "{t}", "--db", "{db}", "--quiet"),
    "report": ("report", "{t}"),
    "diff": ("diff", "{t}", "{t2}"),
    "plan": ("plan", "--from", "{t}"),
    "whatif": ("whatif", "{t}", "--rank", "0"),
    "export": ("export", "{t}", "--out", "{sandbox}/e.json"),
    "hang": ("hang", "{t}"),
    "nightly": ("nightly", "{t}", "--job", "j", "--db", "{db}", "--out-dir", "{sandbox}/n"),
}
# Fewer places for the address space to run out at random: one malloc arena (glibc
# reserves 64 MiB of address space for each thread's own) and one BLAS thread; without
# them a thread's first touch of a library's thread-local data aborts the process now
# and then under RLIMIT_AS ("cannot allocate memory for thread-local data: ABORT", exit
# 127), inside the C runtime where no Python code runs.
ONE_ARENA = {"MALLOC_ARENA_MAX": "1", "OPENBLAS_NUM_THREADS": "1"}
INTO_THE_DB = {"ingest", "nightly"}  # the traces go into the user's --db, kept


def _takes_a_trace_path(action: argparse.Action) -> bool:
    return "PATH" in str(action.metavar or "") or "trace path" in (action.help or "")


def commands_reading_trace_paths() -> set[str]:
    """Every command with an argument that takes a trace path, from the parser itself."""
    commands = next(a for a in build_parser()._actions
                    if isinstance(a, argparse._SubParsersAction))
    return {name for name, parser in commands.choices.items()
            if any(_takes_a_trace_path(a) for a in parser._actions)}


def test_every_command_reading_a_trace_path_is_here() -> None:
    """A new command (or argument) that takes a trace path fails here until it has a base
    command line; the walk itself finds the commands the docs list."""
    found = commands_reading_trace_paths()
    assert found == set(BASE), found ^ set(BASE)
    assert {"report", "diff", "whatif", "export", "hang", "plan"} <= found


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    base = tmp_path_factory.mktemp("machine_paths")
    for r in range(2):
        write_trace(base / "t" / f"rank{r}.json.gz", kineto_trace(rank=r, world_size=2))
        write_trace(base / "t2" / f"rank{r}.json.gz", kineto_trace(rank=r, world_size=2))
    yield base


def _run(argv: list[str], cwd: Path, tmpdir: Path, limit: tuple[int, int]
         ) -> tuple[int, list[str]]:
    """The CLI in a process of its own under `limit`, with $TMPDIR its own folder."""
    def preexec() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the file size: EFBIG
        resource.setrlimit(limit[0], (limit[1], limit[1]))

    proc = subprocess.run([sys.executable, "-P", "-m", "stepscope", *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=240, preexec_fn=preexec,
                          env={**os.environ, **ONE_ARENA, "TMPDIR": str(tmpdir)}, check=False)
    return proc.returncode, proc.stderr.splitlines()


@pytest.mark.parametrize("limit", list(LIMITS))
@pytest.mark.parametrize("command", list(BASE))
def test_the_machines_failure_names_what_the_user_gave(
        traces: Path, tmp_path: Path, command: str, limit: str) -> None:
    kind, value, ran_out = LIMITS[limit]
    cwd, tmpdir, sandbox = tmp_path / "cwd", tmp_path / "tmp", tmp_path / "sandbox"
    for folder in (cwd, tmpdir, sandbox):
        folder.mkdir()
    fill = {"t": str(traces / "t"), "t2": str(traces / "t2"), "db": str(sandbox / "u.duckdb"),
            "sandbox": str(sandbox)}
    rc, err = _run([a.format(**fill) for a in BASE[command]], cwd, tmpdir, (kind, value))
    assert not any("Traceback" in x or "internal error" in x for x in err), err[-5:]
    lines = [x for x in err if not x.startswith(("note:", "warning:"))]
    assert rc == 1 and len(lines) == 1, (rc, err[-5:])
    line = lines[0]
    assert ran_out in line, line  # DuckDB's own "out of memory in the database" too
    if kind == resource.RLIMIT_AS:  # refused before any work: nothing read or written
        assert line.startswith("error: out of memory;") and not list(sandbox.iterdir()), line
    elif command in INTO_THE_DB:
        assert line.startswith("error: ") and fill["db"] in line, line
    else:
        named = line.split(": cannot ", 1)[0]
        assert named in (f"error: {fill['t']}", f"error: {fill['t2']}"), line
        assert ": cannot write the temporary database of the traces: " in line or \
            ": cannot read the temporary database of the traces: " in line, line
        assert "stepscope-" not in line and "duckdb" not in line, line
    assert not list(cwd.iterdir()) and not list(tmpdir.iterdir())
