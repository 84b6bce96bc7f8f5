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
