"""The committed simulated sets are what sample_traces/simulate_gpu.py writes today: each
set regenerated into a temporary folder has the same files, the same decompressed JSON
of every trace and the same ground_truth.json and model.json, byte for byte (the gzip
header's time stamp is 0, so regenerating a set rewrites nothing: it rewrote all 175
traces, differing only in that stamp). A simulator change that
alters a bundled set fails here until the set is regenerated
(`python sample_traces/simulate_gpu.py --sets NAME`) and its tests are looked at."""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from conftest import REPO

SIM = REPO / "sample_traces" / "simulated"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def simulator() -> Iterator[ModuleType]:
    """simulate_gpu, with sample_traces/ on the path while the tests run: it imports its
    helpers (sim_shapes, sim_critical_path) when a set needs them."""
    sys.path.insert(0, str(SIM.parent))
    try:
        import simulate_gpu

        yield simulate_gpu
    finally:
        sys.path.remove(str(SIM.parent))


def content(path: Path) -> Any:
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if path.name.endswith(".gz") else data)


@pytest.mark.parametrize("name", sorted(p.name for p in SIM.iterdir() if p.is_dir()))
def test_committed_set_is_what_the_simulator_writes(name: str, simulator: ModuleType,
                                                    tmp_path: Path) -> None:
    assert name in simulator.SETS, f"{name} is bundled but the simulator has no such set"
    fresh = simulator.write_set(simulator.SETS[name], tmp_path)
    committed = SIM / name
    files = sorted(p.name for p in committed.iterdir())
    assert sorted(p.name for p in fresh.iterdir()) == files
    for file in files:
        assert content(fresh / file) == content(committed / file), f"{name}/{file} drifted"
        assert (fresh / file).read_bytes() == (committed / file).read_bytes(), (
            f"{name}/{file}: same content, other bytes (the gzip header's time stamp?)")


def test_regenerating_a_set_twice_writes_the_same_bytes(simulator: ModuleType,
                                                       tmp_path: Path) -> None:
    """Two generations of a set, in two folders, hold byte-identical files."""
    one = simulator.write_set(simulator.SETS["hip_graph"], tmp_path / "one")
    two = simulator.write_set(simulator.SETS["hip_graph"], tmp_path / "two")
    files = sorted(p.name for p in one.iterdir())
    assert files == sorted(p.name for p in two.iterdir()) and files
    assert any(f.endswith(".json.gz") for f in files)
    for file in files:
        assert (one / file).read_bytes() == (two / file).read_bytes(), file


def test_every_bundled_trace_has_no_gzip_time_stamp() -> None:
    """Bytes 4-7 of a gzip member are its MTIME (RFC 1952): 0 in every bundled .json.gz,
    simulated (simulate_gpu.py) and CPU (generate_cpu.py) alike."""
    traces = sorted((REPO / "sample_traces").rglob("*.json.gz"))
    assert len(traces) > 150
    stamped = [str(p.relative_to(REPO)) for p in traces
               if p.read_bytes()[:2] != b"\x1f\x8b" or p.read_bytes()[4:8] != bytes(4)]
    assert not stamped, stamped


def test_every_simulated_set_is_bundled(simulator: ModuleType) -> None:
    assert sorted(simulator.SETS) == sorted(p.name for p in SIM.iterdir() if p.is_dir())
