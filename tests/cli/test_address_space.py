"""Under an address-space limit (`ulimit -v`) the CLI spends the limit on the data: one
malloc arena, one BLAS and one polars thread (stepscope/address_space.py), so running out
is stepscope's one line (exit 1), not an abort inside glibc or Rust (exit 127 / 134)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

SHOW = ("import os; from stepscope.address_space import fit_address_space_limit; "
        "fit_address_space_limit(); "
        "print([os.environ.get(n) for n in "
        "('MALLOC_ARENA_MAX', 'OPENBLAS_NUM_THREADS', 'POLARS_MAX_THREADS')])")
VARIABLES = ("MALLOC_ARENA_MAX", "OPENBLAS_NUM_THREADS", "POLARS_MAX_THREADS")


def _settings(limit: int | None) -> str:
    def preexec() -> None:
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    done = subprocess.run([sys.executable, "-c", SHOW], capture_output=True, text=True,
                          env=env, preexec_fn=preexec, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_nothing_changes_without_a_limit() -> None:
    assert _settings(None) == "[None, None, None]"


def test_one_arena_and_one_thread_each_under_a_limit() -> None:
    assert _settings(4 << 30) == "['1', '1', '1']"


DUCKDB_THREADS = ("from stepscope.ingest.db import connect; "
                  "print(connect().execute(\"SELECT current_setting('threads')\").fetchone()[0])")


def _duckdb_threads(limit: int | None) -> int:
    def preexec() -> None:
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    done = subprocess.run([sys.executable, "-c", DUCKDB_THREADS], capture_output=True,
                          text=True, preexec_fn=preexec, timeout=120)
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


def test_duckdb_on_one_thread_under_a_limit() -> None:
    """DuckDB starts its worker threads when a database opens; under `ulimit -v` one of
    them could abort the process in glibc (CI: `export` under 600 MB, exit 127)."""
    assert _duckdb_threads(4 << 30) == 1
    import duckdb
    default = duckdb.connect().execute("SELECT current_setting('threads')").fetchone()
    assert default is not None and _duckdb_threads(None) == int(default[0])


@pytest.fixture(scope="module")
def base_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from stepscope import ingest_run
    db = tmp_path_factory.mktemp("as") / "as.duckdb"
    sample = Path(__file__).resolve().parents[2] / "sample_traces" / "cpu" / "straggler"
    assert ingest_run([sample], db=db, run="base").exit_code == 0
    return db


@pytest.mark.parametrize("attempt", range(4))
def test_report_out_of_address_space_is_one_line(base_db: Path, attempt: int,
                                                 tmp_path: Path) -> None:
    """At 600 MB the report runs, or fails with the one line; before, 2 of 16 runs
    aborted inside glibc ("cannot allocate memory for thread-local data", exit 127), and
    until DuckDB ran on one thread within a room none could finish."""
    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (600 << 20, 600 << 20))
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    done = subprocess.run([sys.executable, "-P", "-m", "stepscope", "report", "base",
                           "--db", str(base_db)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, preexec_fn=preexec, timeout=300)
    lines = done.stderr.splitlines()
    assert done.returncode in (0, 1), done.stderr
    if done.returncode == 0:  # since DuckDB runs on one thread within a room: it fits
        assert done.stdout.startswith("# stepscope report: base") and not lines, done.stderr
        return
    assert len(lines) == 1 and lines[0].startswith("error: ") and "out of memory" in lines[0]
    assert "machine's failure" in lines[0] or "memory" in lines[0]


def test_splitting_sql_starts_no_thread() -> None:
    """The SQL files are split by a parsing connection of one thread; DuckDB's default
    connection (`duckdb.extract_statements`) started 10 threads in every process, and
    under `ulimit -v` their address space made `report` run out at 700 MB."""
    code = ("import os; from stepscope.ingest.sql_files import split_statements; "
            "assert split_statements('SELECT 1; SELECT 2') == ('SELECT 1;', ' SELECT 2'); "
            "print(len(os.listdir('/proc/self/task')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == 1


def _cli_under(limit: int, argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    return subprocess.run([sys.executable, "-P", "-m", "stepscope", *argv], capture_output=True,
                          text=True, env=env, cwd=cwd, preexec_fn=preexec, timeout=300)


SAMPLE = Path(__file__).resolve().parents[2] / "sample_traces" / "cpu" / "ddp"


@pytest.mark.parametrize("command", ["ingest", "nightly"])
def test_a_small_job_is_ingested_in_640_mib(command: str, tmp_path: Path) -> None:
    """DuckDB's JSON reader took a buffer of twice its largest object before reading a
    byte: at 256 MiB, 512 MiB of memory for every trace, so 4 ranks of 115 KB failed "out
    of memory" under `ulimit -v` 2 GB. It is now the events file's size (ingest/
    json_read.py). And polars' thread starts before DuckDB takes its room: `nightly` at
    550 MB panicked ("could not spawn threads", 45 lines) in 3 runs of 3."""
    argv = ["ingest", str(SAMPLE), "--db", "x.duckdb", "--quiet"] if command == "ingest" else \
        ["nightly", str(SAMPLE), "--job", "j", "--db", "x.duckdb", "--out-dir", "out"]
    done = _cli_under(640 << 20, argv, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "panicked" not in done.stderr and "Traceback" not in done.stderr


def test_below_the_floor_every_command_refuses_in_one_line(tmp_path: Path) -> None:
    """Under 600 MiB a library could stop the process itself (polars' panic, its
    allocator's abort, exit 134; OpenBLAS's own exit): the command refuses to start with
    the machine's one line, exit 1, naming the limit and the floor."""
    done = _cli_under(450 << 20, ["report", str(SAMPLE)], tmp_path)
    assert done.returncode == 1 and done.stderr.splitlines() == [
        "error: out of memory; the address-space limit (ulimit -v) of 450 MiB is below the "
        "600 MiB stepscope needs: raise it (the machine's failure, not stepscope's)"]
    assert not list(tmp_path.iterdir())


def test_json_read_takes_the_events_files_size(tmp_path: Path) -> None:
    from stepscope.ingest.json_read import MAX_OBJECT_BYTES, MIN_OBJECT_BYTES, max_object_bytes
    small, large = tmp_path / "small.json", tmp_path / "large.json"
    small.write_text("[]")
    with large.open("wb") as f:  # sparse: its size without its bytes
        f.truncate(5 << 20)
    assert max_object_bytes(small) == MIN_OBJECT_BYTES
    assert max_object_bytes(large) == (5 << 20) + 1
    assert max_object_bytes(tmp_path / "missing.json") == MAX_OBJECT_BYTES
