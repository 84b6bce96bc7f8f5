"""The attribution's per-batch steps start from the uncommitted run, not from what the
steps before them cached (ingest.db.Room.shed): within the attribution's room DuckDB
kept every block a batch read or wrote until the room was full, so at 2,048 simulated
ranks the writer held its whole room through the batches and the commit, and at 64 a
fraction of it (benchmarks/README.md, "The attribution's cache")."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

import stepscope
from stepscope.analyzers.breakdown import attribution
from stepscope.ingest.db import MEMORY_ENV

pytestmark = pytest.mark.slow  # two ingests


def _in_memory_bytes(con: duckdb.DuckDBPyConnection) -> int:
    """The bytes DuckDB holds in memory for tables now (the uncommitted run's and the
    file's blocks it has read)."""
    (held,), = con.execute(
        "SELECT CAST(coalesce(sum(memory_usage_bytes), 0) AS BIGINT) FROM duckdb_memory() "
        "WHERE tag IN ('IN_MEMORY_TABLE', 'BASE_TABLE')").fetchall()
    return int(held)


def _held_at_batches(make_run: Callable[..., Path], db: Path, ranks: int,
                     monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """Ingest a job of `ranks` ranks, attributed one rank per batch; the most table
    bytes DuckDB holds as a batch's attribution.sql starts (after the first) and as the
    commit starts, and the run's gpu_ops rows."""
    starts: list[int] = []
    commit: list[int] = []
    original: Callable[..., None] = attribution.run_script
    materialize: Callable[..., None] = attribution.materialize

    def spy(con: duckdb.DuckDBPyConnection, name: str, params: object = None) -> None:
        if name == "attribution/attribution.sql":
            starts.append(_in_memory_bytes(con))
        original(con, name, params)

    def one_rank_batches(con: duckdb.DuckDBPyConnection, run: str) -> None:
        materialize(con, run, batch_ranks=1)
        commit.append(_in_memory_bytes(con))

    with monkeypatch.context() as patch:
        patch.setattr(attribution, "run_script", spy)
        patch.setattr(attribution, "materialize", one_rank_batches)
        stepscope.ingest_run(make_run(world_size=ranks, steps=3), db=db, run="r",
                             executor="inline")
    con = duckdb.connect(str(db), read_only=True)
    try:
        (rows,), = con.execute("SELECT count(*) FROM gpu_ops").fetchall()
    finally:
        con.close()
    assert len(starts) == ranks and len(commit) == 1
    return max(max(starts[1:]), commit[0]), int(rows)


def test_batches_and_commit_start_without_the_cache_of_the_steps_before(
        make_run: Callable[..., Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """At 2 and 8 ranks (4x the rows), the batches and the commit start with the same
    table bytes in DuckDB's memory, whatever the job's size: before, every block the
    appends and the batches before had read stayed cached (far under the room at these
    sizes), 4x as many at 4x the ranks."""
    monkeypatch.delenv(MEMORY_ENV, raising=False)
    monkeypatch.setenv("STEPSCOPE_JOBS", "1")
    small, small_rows = _held_at_batches(make_run, tmp_path / "n.duckdb", 2, monkeypatch)
    large, large_rows = _held_at_batches(make_run, tmp_path / "4n.duckdb", 8, monkeypatch)
    assert large_rows == 4 * small_rows > 0
    assert large <= small + (256 << 10), (small, large)  # one block of slack
