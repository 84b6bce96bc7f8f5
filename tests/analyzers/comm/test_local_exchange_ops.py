"""DeepEP's get_dispatch_layout is part of the token exchange (issue 41 §11) but runs on
each rank alone: it counts tokens per rank and expert and moves nothing between GPUs
(deepseek-ai/DeepEP csrc/kernels/layout.cu). So it is never one instance across ranks:
no arrival order, no wait for a late rank, no straggler evidence, no cross-rank edge on
the critical path. Truth: the simulator (sample_traces/sim_shapes.py build_moe_program)
runs it as a plain kernel of 20 us on each rank's compute stream with no cross-rank
dependency, 8 a step; the exchange kernels proper (notify, dispatch, combine) are
synchronised across the 4 EP ranks. Before: the layout calls were matched across ranks
('stream_order', 480 matched calls in moe_ep, 96 of them layout)."""

from __future__ import annotations

import duckdb
import pytest
from conftest import SIM

import stepscope
from stepscope.analyzers.report import build_report
from stepscope.analyzers.results import Report

STEPS, RANKS, LAYOUT_PER_STEP, EXCHANGE_PER_STEP = 3, 4, 8, 32


@pytest.fixture(scope="module")
def moe(tmp_path_factory: pytest.TempPathFactory) -> tuple[duckdb.DuckDBPyConnection, Report]:
    db = tmp_path_factory.mktemp("moe_local") / "s.duckdb"
    assert stepscope.ingest_run([SIM / "moe_ep"], db=db, run="moe").exit_code == 0
    con = duckdb.connect(str(db), read_only=True)
    return con, build_report(con, "moe")


def _waits(con: duckdb.DuckDBPyConnection, op: str) -> list[tuple[object, ...]]:
    return con.execute(
        "SELECT w.match_method, w.instance_key IS NULL, w.n_ranks, w.wait_ns, "
        "w.arrived_last, count(*) FROM collective_waits w JOIN collectives c "
        "ON c.run = w.run AND c.rank = w.rank AND c.coll_id = w.coll_id "
        "WHERE w.run = 'moe' AND c.library = 'deepep' AND c.comm_op = ? "
        "AND c.step IS NOT NULL GROUP BY ALL ORDER BY ALL", [op]).fetchall()


def test_layout_kernels_are_never_matched_across_ranks(
        moe: tuple[duckdb.DuckDBPyConnection, Report]) -> None:
    con, _ = moe
    layout = _waits(con, "layout")
    assert layout == [("local", True, 1, 0, None, RANKS * STEPS * LAYOUT_PER_STEP)]
    # the exchange proper still is: every dispatch an instance of the 4 ranks
    dispatch = _waits(con, "dispatch")
    assert {(m, nul, n) for m, nul, n, *_ in dispatch} == {("stream_order", False, RANKS)}


def test_matching_counts_and_note(moe: tuple[duckdb.DuckDBPyConnection, Report]) -> None:
    report = moe[1]
    assert report.collective_matching == {
        "local": RANKS * STEPS * LAYOUT_PER_STEP,
        "stream_order": RANKS * STEPS * EXCHANGE_PER_STEP}
    assert ("480 deepep kernel calls counted as communication (communication-kernel "
            "table); matched across ranks by their order within the step on their group; "
            "96 (layout) run on each rank alone and move nothing between GPUs: never "
            "matched across ranks, no straggler evidence") in report.notes


def test_exchange_figures_per_rank_stay(moe: tuple[duckdb.DuckDBPyConnection, Report]) -> None:
    """The layout row: 8 calls of 20 us a step on every rank, no straggler wait, link
    none; no rank is a straggler by it."""
    report = moe[1]
    (layout,) = [c for c in report.collectives if c.op == "layout"]
    assert layout.calls_per_step == LAYOUT_PER_STEP
    assert layout.time_ms == pytest.approx(LAYOUT_PER_STEP * 0.020)
    assert layout.straggler_wait_ms == 0.0
    assert layout.exposed_ms + layout.overlapped_ms == pytest.approx(layout.time_ms, abs=1e-9)
    assert (layout.link, layout.link_peak_gbs) == ("none", None)
    con = moe[0]
    per_rank = con.execute(
        "SELECT rank, count(*) / ?, sum(work_end_ns - work_start_ns) / ? / 1e6 "
        "FROM collectives WHERE run = 'moe' AND comm_op = 'layout' AND step IS NOT NULL "
        "GROUP BY rank ORDER BY rank", [STEPS, STEPS]).fetchall()
    assert per_rank == [(r, 8.0, pytest.approx(0.16)) for r in range(RANKS)]
