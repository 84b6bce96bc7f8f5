"""The attribution's cross-rank steps (analyzers/sql/attribution/collective_match.sql,
the clock alignment's analyzers/sql/clocks/ends.sql) hold no row per collective call of
the run once they have written their tables: the per-batch steps that follow and the
commit run beside the uncommitted run, and a temp table of every call (the matching held
two, a_coll and a_waits, until the commit, and the clocks one, clk_rank_ends; benchmarks/
README.md "The attribution's allocation") grew the writer's peak with the job's size."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

import stepscope
from stepscope.analyzers.breakdown import attribution
from stepscope.ingest.db import MEMORY_ENV

pytestmark = pytest.mark.slow  # two ingests


def _temp_rows(con: duckdb.DuckDBPyConnection) -> int:
    """Rows in the connection's temp tables now (counted: inside the ingest's transaction
    duckdb_tables() estimates them at 0)."""
    names = [name for name, in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE temporary").fetchall()]
    counts = [con.execute(f'SELECT count(*) FROM temp.main."{name}"').fetchall()[0][0]
              for name in names]
    return int(sum(counts))


def _held_by_script(make_run: Callable[..., Path], db: Path, ranks: int,
                    monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, int], int]:
    """Ingest a job of `ranks` ranks; per attribution script, the most temp-table rows
    there when it starts, and ("commit") those left when the clocks are aligned, the
    attribution's last step; and the run's collective calls."""
    held: dict[str, int] = {}
    original: Callable[..., None] = attribution.run_script
    align: Callable[..., None] = attribution.clocks.materialize

    def spy(con: duckdb.DuckDBPyConnection, name: str, params: object = None) -> None:
        held[name] = max(held.get(name, 0), _temp_rows(con))
        original(con, name, params)

    def clocks(con: duckdb.DuckDBPyConnection, run: str, *args: object) -> None:
        align(con, run, *args)
        held["commit"] = _temp_rows(con)

    with monkeypatch.context() as patch:
        patch.setattr(attribution, "run_script", spy)
        patch.setattr(attribution.clocks, "materialize", clocks)
        stepscope.ingest_run(make_run(world_size=ranks, steps=3), db=db, run="r",
                             executor="inline")
    con = duckdb.connect(str(db), read_only=True)
    try:
        (calls,), = con.execute("SELECT count(*) FROM collective_waits").fetchall()
    finally:
        con.close()
    return held, int(calls)


def test_per_batch_steps_and_commit_hold_no_row_per_call(
        make_run: Callable[..., Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """At 2 and 8 ranks (4x the collective calls), the per-batch scripts start and the
    commit starts with the same temp-table rows: none of the matching's or the clocks'
    rows per call are left (before: 12 and 48 at the batches, 2 per call; at the commit
    the same plus the clocks' evidence)."""
    monkeypatch.delenv(MEMORY_ENV, raising=False)
    monkeypatch.setenv("STEPSCOPE_JOBS", "1")
    small, small_calls = _held_by_script(make_run, tmp_path / "n.duckdb", 2, monkeypatch)
    large, large_calls = _held_by_script(make_run, tmp_path / "4n.duckdb", 8, monkeypatch)
    assert large_calls == 4 * small_calls > 0
    batch_scripts = ("attribution/attribution.sql", "attribution/idle.sql")
    for name in (*batch_scripts, "commit"):
        assert small[name] == large[name] == 0, (name, small, large)
