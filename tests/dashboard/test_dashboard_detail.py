"""The drill-down data behind the dashboard: the Timeline's segments are the attribution
made visible (they add up to step_attribution exactly), bounded in rectangles; the rank
x step grid names the straggler; kernels add up."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import duckdb
import pytest

from stepscope.analyzers.breakdown.attribution import CATEGORIES
from stepscope.analyzers.detail import rank_step_grid, step_timeline, timeline_ranks, top_kernels


@pytest.fixture(scope="module")
def detail_db(sample_db: Path) -> Path:
    """The session's sample database (runs `straggler` and `cpu-straggler`; read only)."""
    return sample_db


def attributed(con: duckdb.DuckDBPyConnection, run: str, step: int) -> dict[int, dict]:
    cols = ", ".join(f"{c}_ns" for c in CATEGORIES)
    rows = con.execute(f"SELECT rank, {cols} FROM step_attribution WHERE run = $r AND "
                       "step = $s", {"r": run, "s": step}).fetchall()
    return {r[0]: dict(zip(CATEGORIES, (v / 1e6 for v in r[1:]), strict=True)) for r in rows}


@pytest.mark.parametrize("run", ["straggler", "cpu-straggler"])
def test_timeline_segments_add_up_to_the_attribution(detail_db, run):
    con = duckdb.connect(str(detail_db), read_only=True)
    step = con.execute("SELECT min(step) FROM step_attribution WHERE run = $r AND "
                       "has_successor", {"r": run}).fetchone()[0]
    ranks = [r for (r,) in con.execute("SELECT rank FROM ranks WHERE run = $r",
                                       {"r": run}).fetchall()]
    tl = step_timeline(con, run, step, ranks)
    truth = attributed(con, run, step)
    con.close()
    assert tl.bin_ms is None and tl.ranks == tuple(sorted(ranks))
    sums: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for rank, s, e, cat in zip(tl.rank, tl.start_ms, tl.end_ms, tl.category, strict=True):
        assert e > s >= 0
        sums[rank][cat] += e - s
    for rank, cats in truth.items():
        for cat in CATEGORIES:
            assert sums[rank][cat] == pytest.approx(cats[cat], abs=1e-6), (rank, cat)
    # segments tile each rank's window: no gap, no overlap
    for i, rank in enumerate(tl.ranks):
        spans = sorted((s, e) for r, s, e in zip(tl.rank, tl.start_ms, tl.end_ms,
                                                 strict=True) if r == rank)
        assert spans[0][0] == pytest.approx(0) and spans[-1][1] == pytest.approx(
            tl.window_ms[i])
        assert all(a[1] == pytest.approx(b[0]) for a, b in zip(spans, spans[1:], strict=False))


def test_timeline_is_bounded(detail_db):
    con = duckdb.connect(str(detail_db), read_only=True)
    exact = step_timeline(con, "straggler", 1, range(8))
    small = step_timeline(con, "straggler", 1, range(8), max_rectangles=80)
    many = step_timeline(con, "straggler", 1, range(64))
    con.close()
    assert exact.rectangles > 80
    assert small.rectangles <= 80 and small.bin_ms == pytest.approx(
        max(small.window_ms) / 10)
    assert set(small.rank) == set(range(8))
    assert len(many.ranks) == 8  # only ranks that exist, at most 16


def test_rank_step_grid_names_the_straggler(detail_db):
    con = duckdb.connect(str(detail_db), read_only=True)
    grid = rank_step_grid(con, "straggler")
    con.close()
    caused: dict[int, float] = defaultdict(float)
    for rank, ms in zip(grid.rank, grid.wait_caused_ms, strict=True):
        caused[rank] += ms
    assert max(caused, key=caused.__getitem__) == 3  # the simulated slow rank
    assert len(grid.rank) == len(set(zip(grid.rank, grid.step, strict=True)))


def test_top_kernels(detail_db):
    con = duckdb.connect(str(detail_db), read_only=True)
    rows = top_kernels(con, "straggler", limit=500)
    con.close()
    assert rows and rows == tuple(sorted(rows, key=lambda r: -r.mean_ms))
    assert sum(r.share_of_gpu_time for r in rows) == pytest.approx(1.0)
    for r in rows:
        assert r.min_ms <= r.mean_ms <= r.max_ms


def test_timeline_ranks_cover_stragglers_and_stages():
    picked = timeline_ranks([37], [[0, 1], [32, 33]], range(64), limit=16)
    assert 37 in picked and 0 in picked and 32 in picked and len(picked) == 16
