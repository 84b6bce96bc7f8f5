"""The attribution's cross-rank steps work one batch of ranks at a time (issue 44: at
2,048 ranks, the clock alignment and the collective matching over every rank at once
bounded the writer's peak; benchmarks/README.md "The cross-rank steps per batch"): the
matching aggregates and writes each batch's calls alone (attribution/collective_parts.sql,
collective_waits.sql), the clocks' evidence holds one batch of whole hosts' ranks
(clocks/ends.sql), and the rows are those of one batch of all ranks."""

from __future__ import annotations

import dataclasses
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest

from stepscope import ingest_run
from stepscope.analyzers import clocks
from stepscope.analyzers.breakdown import attribution

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "sample_traces"))
import simulate_gpu  # noqa: E402

pytestmark = pytest.mark.slow  # a simulated 16-rank job, attributed four times

RUN = "skew"
# Every row of the two cross-rank steps' tables, in a fixed order.
WAITS = "SELECT * EXCLUDE (run) FROM collective_waits ORDER BY rank, coll_id"
OFFSETS = "SELECT * EXCLUDE (run) FROM clock_offsets ORDER BY host, rank NULLS FIRST"


@pytest.fixture(scope="module")
def skewed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A TP2 x PP2 x DP4 job on four 4-GPU nodes with skewed clocks, whose rank 5 ends its
    collectives 1 ms late (a rank whose clock is not its host's: clock_offsets has a row
    for it), ingested."""
    root = tmp_path_factory.mktemp("skew")
    cfg = dataclasses.replace(simulate_gpu.SETS["healthy"], name=RUN, tp=2, pp=2, dp=4,
                              gpus_per_node=4, steps=3, microbatches=4,
                              clock_offsets_us=(0.0, 400.0, -250.0, 1300.0))
    db = root / f"{RUN}.duckdb"
    ingest_run(simulate_gpu.write_set(cfg, root), db=db, run=RUN, jobs=1)
    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE collectives SET work_end_ns = work_end_ns + 1000000 "
                    "WHERE rank = 5")
    return db


def _attribute(db: Path, tmp_path: Path, batch_ranks: int,
               monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], list[Any], dict[str, Any]]:
    """Attribute a copy of `db` in batches of `batch_ranks` ranks: its collective_waits
    and clock_offsets rows, and what each per-batch step held: per call of
    collective_waits.sql its (lo, hi) and the ranks it wrote, per call of
    collective_parts.sql the calls it aggregated, per batch of the clocks the ranks in
    clk_rank_ends."""
    copy = tmp_path / f"b{batch_ranks}.duckdb"
    shutil.copyfile(db, copy)
    seen: dict[str, Any] = {"waits": [], "parts": [], "clock_ranks": []}
    script: Callable[..., None] = attribution.run_script
    clock_script: Callable[..., None] = clocks.run_script

    def spy(con: duckdb.DuckDBPyConnection, name: str, params: Any = None) -> None:
        if name.endswith("collective_waits.sql"):
            before = con.execute("SELECT count(*) FROM collective_waits").fetchall()[0][0]
        script(con, name, params)
        if name.endswith("collective_waits.sql"):
            (after,), = con.execute("SELECT count(*) FROM collective_waits").fetchall()
            ranks = [r for r, in con.execute(
                "SELECT DISTINCT rank FROM collective_waits WHERE rank BETWEEN $lo AND $hi "
                "ORDER BY rank",
                {"lo": params["lo"], "hi": params["hi"]}).fetchall()]
            seen["waits"].append((params["lo"], params["hi"], after - before, ranks))
        if name.endswith("collective_parts.sql"):
            seen["parts"].append(con.execute(
                "SELECT coalesce(sum(n), 0) FROM a_inst_part").fetchall()[0][0])

    def clock_spy(con: duckdb.DuckDBPyConnection, name: str, params: Any = None) -> None:
        clock_script(con, name, params)
        if name.endswith("clocks/ends.sql"):
            seen["clock_ranks"].append(con.execute(
                "SELECT count(DISTINCT rank) FROM clk_rank_ends").fetchall()[0][0])

    monkeypatch.setattr(attribution, "run_script", spy)
    monkeypatch.setattr(clocks, "run_script", clock_spy)
    with duckdb.connect(str(copy)) as con:
        con.execute("BEGIN TRANSACTION")
        attribution.materialize(con, RUN, batch_ranks=batch_ranks)
        con.execute("COMMIT")
        waits, offsets = con.execute(WAITS).fetchall(), con.execute(OFFSETS).fetchall()
    monkeypatch.undo()
    return waits, offsets, seen


def test_cross_rank_steps_hold_one_batch(skewed: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """In batches of 1 and 8 ranks the matching writes each batch's waits alone, its parts
    grow by one batch's calls at a time, and the clocks' evidence holds one host (4
    ranks) or two (8) of the 16 at once; the rows are those of one batch of all 16 ranks,
    rank 5's own clock row included."""
    whole, whole_offsets, one = _attribute(skewed, tmp_path, 64, monkeypatch)
    assert [(lo, hi) for lo, hi, *_ in one["waits"]] == [(-(2**31), 2**31 - 1)]
    assert one["clock_ranks"] == [16]
    assert any(rank == 5 for _, rank, *_ in whole_offsets)  # the rank's own row
    for batch_ranks, hosts_ranks in ((1, 4), (8, 8)):
        waits, offsets, seen = _attribute(skewed, tmp_path, batch_ranks, monkeypatch)
        assert waits == whole and offsets == whole_offsets, batch_ranks
        assert len(seen["waits"]) == 16 // batch_ranks
        for lo, hi, wrote, ranks in seen["waits"]:
            # each step wrote its own ranks' calls, and only those
            assert ranks == list(range(max(lo, 0), min(hi, 15) + 1)), (lo, hi)
            assert wrote == sum(1 for row in whole if row[0] in ranks) > 0
        parts = seen["parts"]  # the calls aggregated so far, after each batch
        assert len(parts) == 16 // batch_ranks
        steps = [b - a for a, b in zip([0, *parts], parts, strict=False)]
        assert min(steps) > 0 and max(steps) < parts[-1]
        assert seen["clock_ranks"] == [hosts_ranks] * (16 // hosts_ranks), batch_ranks
