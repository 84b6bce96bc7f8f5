"""A slower network is a cause (issue 45, point 7): from diff_base to diff_scaled the
cross-node DP all_reduce's bus bandwidth fell 100 -> 20 GB/s (the simulator's link
model); the diff names it with the critical-path what-if on B, which agrees with
`stepscope whatif --collective all_reduce:DATA_PARALLEL_GROUP --speedup 5` and with the
simulator's ground truth of that link."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import stepscope
from stepscope.analyzers.builders import diff_runs
from stepscope.analyzers.context import run_context
from stepscope.analyzers.critical_path.analysis import what_if
from stepscope.analyzers.critical_path.whatif import WhatIf

SIM = Path(__file__).resolve().parents[3] / "sample_traces" / "simulated"


def test_a_bandwidth_drop_is_named_with_its_what_if(sample_db: Path) -> None:
    cfg_a = json.loads((SIM / "diff_base" / "ground_truth.json").read_text())["config"]
    cfg_b = json.loads((SIM / "diff_scaled" / "ground_truth.json").read_text())["config"]
    factor = cfg_a["dp_bw_gbs"] / cfg_b["dp_bw_gbs"]  # 100 / 20
    with stepscope.open(sample_db) as store:
        diff = diff_runs(store.con, "diff_base", store.con, "diff_scaled").diff
        direct = what_if(run_context(store.con, "diff_scaled"),
                         WhatIf(collective="all_reduce:DATA_PARALLEL_GROUP", speedup=factor))
    recs = [r for r in diff.recommendations if r.id == "bandwidth_drop"]
    assert len(recs) == 1
    rec = recs[0]
    assert "all_reduce on DATA_PARALLEL_GROUP" in rec.title and "100 -> 20 GB/s" in rec.title
    assert rec.expected_gain_ms == pytest.approx(direct.gain_ms, abs=1e-5)
    assert rec.expected_gain_ms == pytest.approx(3.52, abs=0.05)
    gains = [r.expected_gain_ms for r in diff.recommendations]
    assert gains == sorted(gains, reverse=True)  # the most valuable first


def test_no_drop_no_recommendation(sample_db: Path) -> None:
    with stepscope.open(sample_db) as store:
        diff = diff_runs(store.con, "healthy", store.con, "straggler").diff
    assert not [r for r in diff.recommendations if r.id == "bandwidth_drop"]
