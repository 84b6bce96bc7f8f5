"""The simulator's ground truth is linear in ranks and the same as before it was (issue 44).

`ground_truth` (sample_traces/simulate_gpu.py) needs, for each collective, its instance on
every member rank (the straggler wait is the op's time past the shortest member's). It
used to scan every op of every rank once per instance: quadratic in ranks (4,096 ranks of
TP8 x PP8 ran over 60 CPU-minutes unfinished). It now indexes the ops by `key` once
(`collective_instances`). Here: the truth is identical to the scan's, kept only in this
test, and to the committed ground_truth.json of bundled sets; and the ops visited grow
4x from N to 4N ranks, where the scan's grow about 16x."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from conftest import REPO

SIM = REPO / "sample_traces"


@pytest.fixture(scope="module")
def simulator() -> Iterator[ModuleType]:
    """simulate_gpu, with sample_traces/ on the path while the tests run."""
    sys.path.insert(0, str(SIM))
    try:
        import simulate_gpu

        yield simulate_gpu
    finally:
        sys.path.remove(str(SIM))


class ScanPerLookup:
    """The lookup as it was: every op of every rank scanned for each instance's key."""

    def __init__(self, programs: dict[int, list[Any]]) -> None:
        self.programs = programs

    def __getitem__(self, key: str) -> list[Any]:
        return [o for ops in self.programs.values() for o in ops if o.key == key]


class CountingList(list[Any]):
    """A rank's program that counts the ops handed out by iterating it."""

    visits = 0

    def __iter__(self) -> Iterator[Any]:
        for op in super().__iter__():
            CountingList.visits += 1
            yield op


def truth(sim: ModuleType, cfg: Any, scan: bool = False,
          monkeypatch: pytest.MonkeyPatch | None = None) -> dict[str, Any]:
    """ground_truth of a set as write_set computes it (quantum 1 us for int_us traces)."""
    programs, spans = sim.simulate(cfg)
    quantum = 1000 if cfg.ts_style == "int_us" else 1
    if scan:
        assert monkeypatch is not None
        with monkeypatch.context() as m:
            m.setattr(sim, "collective_instances", ScanPerLookup)
            return sim.ground_truth(cfg, programs, quantum, spans)  # type: ignore[no-any-return]
    return sim.ground_truth(cfg, programs, quantum, spans)  # type: ignore[no-any-return]


# (set, the category it is built to show): straggler: PP2 x TP2 x DP2 with a slow rank
# (the category the instance lookup decides); deep_pipeline: 4 stages, 4 microbatches;
# input_bound: microsecond timestamps (quantum 1,000 ns); tp8pp8_64: the bench shape
@pytest.mark.parametrize(("name", "shown"), [
    ("straggler", "straggler_wait_ns"), ("deep_pipeline", "bubble_ns"),
    ("input_bound", "exposed_comm_ns"), ("tp8pp8_64", "bubble_ns")])
def test_the_index_gives_the_truth_of_the_scan(simulator: ModuleType, name: str, shown: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = {**simulator.SETS, **simulator.BENCH_SETS}[name]
    fresh = truth(simulator, cfg)
    before = truth(simulator, cfg, scan=True, monkeypatch=monkeypatch)
    assert fresh == before
    rows = [r for steps in fresh["per_rank"].values() for r in steps]
    assert len(fresh["per_rank"]) == cfg.world and len(rows) == cfg.world * cfg.steps
    assert sum(r[shown] for r in rows) > 0


@pytest.mark.parametrize("name", ["straggler", "deep_pipeline"])
def test_the_index_gives_the_committed_truth(simulator: ModuleType, name: str) -> None:
    """Against ground_truth.json as committed before the index (per rank and step)."""
    committed = json.loads((SIM / "simulated" / name / "ground_truth.json").read_text())
    fresh = json.loads(json.dumps(truth(simulator, simulator.SETS[name])))
    assert fresh["per_rank"] == committed["per_rank"]
    assert fresh["categories"] == committed["categories"]


def ops_visited(sim: ModuleType, cfg: Any, scan: bool,
                monkeypatch: pytest.MonkeyPatch) -> int:
    """Ops handed out by the ranks' programs while ground_truth runs."""
    programs, spans = sim.simulate(cfg)
    counted = {r: CountingList(ops) for r, ops in programs.items()}
    CountingList.visits = 0
    with monkeypatch.context() as m:
        if scan:
            m.setattr(sim, "collective_instances", ScanPerLookup)
        sim.ground_truth(cfg, counted, 1, spans)
    return CountingList.visits


def test_the_work_is_linear_in_ranks(simulator: ModuleType,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """TP2 x PP2 x DP2 (8 ranks) against DP8 (32 ranks): every rank runs the same program
    shape, so linear work is exactly 4x the ops visited; the scan's is about 16x."""
    small = dataclasses.replace(simulator.SETS["straggler"], dp=2)
    large = dataclasses.replace(small, dp=8)
    assert large.world == 4 * small.world
    n, four_n = (ops_visited(simulator, c, False, monkeypatch) for c in (small, large))
    assert n > 0 and four_n <= 4 * n
    scan_n, scan_four_n = (ops_visited(simulator, c, True, monkeypatch)
                           for c in (small, large))
    assert scan_four_n > 10 * scan_n  # the check fails on the scan it replaced
