"""Run diff against a simulated pair with a known change, and the advisor's matrix:
each recommendation fires on the set built to trigger it and nowhere else."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO

import stepscope
from stepscope.analyzers.comm.collectives import op_times
from stepscope.analyzers.diff.build import STAGES, build_diff
from stepscope.analyzers.flops.model_spec import load_spec
from stepscope.analyzers.plan.layouts import zero_state_bytes_per_param
from stepscope.analyzers.report import build_report
from stepscope.analyzers.results import Report, to_builtins
from stepscope.cli import main

SIM = REPO / "sample_traces" / "simulated"
TRIGGERS = {
    "tp_across_nodes": "tp-spans-nodes",
    "deep_pipeline": "pipeline-bubble",
    "dp_exposed": "exposed-dp-comm",
    "straggler": "straggler",
    "recompute": "recompute",
    "recompute_reentrant": "recompute",
    "input_bound": "input-bound",
    "host_bound": "host-bound",
    "launch_bound": "launch-bound",
    "healthy": None,
    "tb_names": "tp-spans-nodes",
    "pipeline_torch23": "pipeline-bubble",
    "pipeline_imbalance": ("pipeline-bubble", "pipeline-imbalance"),
    "critical_path": ("straggler", "pipeline-bubble", "exposed-dp-comm"),
}


@pytest.fixture
def db(sample_db: Path) -> Path:
    """The session's database of every bundled run (conftest.sample_db)."""
    return sample_db


@cache
def typed_report(db: Path, run: str, spec_from: str | None = None) -> Report:
    """The report of `run` in the read-only `db`, built once per test process (frozen:
    the matrix and the grounding tests read the same sets)."""
    spec = load_spec(SIM / spec_from / "model.json") if spec_from else None
    with stepscope.open(db) as store:
        return build_report(store.con, run, spec)


def report(db: Path, run: str, spec_from: str | None = None) -> dict[str, Any]:
    return to_builtins(typed_report(db, run, spec_from))


@pytest.mark.parametrize("name", sorted(TRIGGERS))
def test_each_recommendation_fires_only_on_its_set(db: Path, name: str) -> None:
    ids = {r["id"] for r in report(db, name)["recommendations"]}
    want = TRIGGERS[name]
    expected = set(want) if isinstance(want, tuple) else {want} if want else set()
    assert ids == expected


def test_recommendations_are_grounded(db: Path) -> None:
    for name, rids in TRIGGERS.items():
        for rid in rids if isinstance(rids, tuple) else (rids,) if rids else ():
            r = report(db, name)
            (rec,) = [x for x in r["recommendations"] if x["id"] == rid]
            _grounded(r, rec)


def _grounded(r: dict[str, Any], rec: dict[str, Any]) -> None:
    assert rec["evidence"] and rec["detail"] and rec["title"]
    assert rec["severity"] in ("high", "medium")
    assert 0.05 * r["step_time_ms"] <= rec["expected_gain_ms"] <= r["step_time_ms"]
    assert rec["expected_mfu_points"] is not None and rec["expected_mfu_points"] > 0


@pytest.mark.parametrize("name", sorted(p.name for p in SIM.iterdir() if p.is_dir()))
def test_advice_never_credits_more_than_the_lost_time(db: Path, name: str) -> None:
    """No lost millisecond is credited to two recommendations: their gains add up to at
    most the step's time outside compute (what any of them can recover), and those that
    act on the pipeline bubble to at most the bubble."""
    r = report(db, name)
    gains = {x["id"]: x["expected_gain_ms"] for x in r["recommendations"]}
    bd = r["breakdown_ms"]
    assert sum(gains.values()) <= r["step_time_ms"] - bd["compute"] + 1e-9, gains
    bubble = [gains[k] for k in ("pipeline-bubble", "pipeline-imbalance") if k in gains]
    if len(bubble) == 2:
        assert sum(bubble) <= bd["bubble"] + 1e-9, gains


def test_pipeline_bubble_is_what_rebalancing_leaves(db: Path) -> None:
    """pipeline_imbalance: rebalancing the stages claims its what-if gain out of the
    bubble; more microbatches shrink what is left by the theory's ratio."""
    r = report(db, "pipeline_imbalance")
    recs = {x["id"]: x for x in r["recommendations"]}
    stage, bubble = recs["pipeline-imbalance"], recs["pipeline-bubble"]
    left = r["breakdown_ms"]["bubble"] - stage["expected_gain_ms"]
    # S=4, M=8 -> 58: theory 3/11 -> 3/61
    assert bubble["expected_gain_ms"] == pytest.approx(left * (1 - (3 / 61) / (3 / 11)))
    assert f"the gain is on the {left:.2f} ms left" in bubble["evidence"]


def test_pipeline_bubble_numbers(db: Path) -> None:
    (rec,) = report(db, "deep_pipeline")["recommendations"]
    # S=4, M=4: (S-1)/(S-1+M) = 3/7; M = 19*(S-1)+1 = 58 brings it under 5%
    assert "4 -> 58 microbatches" in rec["title"]
    assert "42.9%" in rec["detail"] and "4.9%" in rec["detail"]


def test_straggler_names_rank_and_host(db: Path) -> None:
    (rec,) = report(db, "straggler")["recommendations"]
    assert "rank 3" in rec["title"] and "node000" in rec["title"]
    (cpu,) = [x for x in report(db, "cpu-straggler")["recommendations"]
              if x["id"] == "straggler"]
    assert "rank 2" in cpu["title"]


def test_zero_state_formulas() -> None:
    assert zero_state_bytes_per_param(0, 8) == 16
    assert zero_state_bytes_per_param(1, 8) == pytest.approx(4 + 12 / 8)
    assert zero_state_bytes_per_param(2, 8) == pytest.approx(2 + 14 / 8)
    assert zero_state_bytes_per_param(3, 8) == pytest.approx(2.0)


def test_memory_check_with_a_spec(db: Path) -> None:
    (rec,) = report(db, "dp_exposed", spec_from="dp_exposed")["recommendations"]
    assert "ZeRO-0" in rec["detail"] and "ZeRO-3" in rec["detail"] and "GB" in rec["detail"]


def test_diff_against_the_known_change(db: Path) -> None:
    ta = typed_report(db, "diff_base", "diff_base")
    tb = typed_report(db, "diff_scaled", "diff_base")
    a = to_builtins(ta)
    with stepscope.open(db) as store:
        d = to_builtins(build_diff(ta, tb, op_times(store.con, "diff_base"),
                                   op_times(store.con, "diff_scaled")))
    truth_a = json.loads((SIM / "diff_base" / "ground_truth.json").read_text())
    truth_b = json.loads((SIM / "diff_scaled" / "ground_truth.json").read_text())
    assert d["mfu_delta_points"] == pytest.approx(
        100 * (truth_b["mfu"]["mfu"] - truth_a["mfu"]["mfu"]), abs=0.2)
    # per-category points add up exactly to the MFU change
    assert sum(d["mfu_points_by_category"].values()) == pytest.approx(
        d["mfu_delta_points"], abs=1e-9)
    assert set(d["mfu_points_by_category"]) == set(STAGES)
    # the breakdown deltas match the ground truth of both sets (per category, 1% of step)
    for cat, delta in d["breakdown_delta_ms"].items():
        want = _truth_mean(truth_b, cat) - _truth_mean(truth_a, cat)
        assert delta == pytest.approx(want, abs=0.01 * a["step_time_ms"]), cat
    worst = min(d["mfu_points_by_category"], key=d["mfu_points_by_category"].get)
    assert worst == "exposed_comm"
    assert d["mfu_points_by_category"]["straggler_wait"] < -1
    changes = {c["what"]: (c["a"], c["b"]) for c in d["setup_changes"]}
    assert changes["world_size"] == (8, 16) and changes["dp"] == (4, 8)
    assert changes["nodes"] == (2, 4)
    dp = next(c for c in d["collectives"] if c["group"] == "DATA_PARALLEL_GROUP")
    assert dp["a"]["bus_bw_gbs"] == pytest.approx(100, rel=0.01)
    assert dp["b"]["bus_bw_gbs"] == pytest.approx(20, rel=0.01)
    assert dp["b"]["link"] == "network"
    assert [s["rank"] for s in d["stragglers"]["new"]] == [13]
    assert d["top_ops"][0]["op"].startswith("ncclDevKernel_AllReduce")
    text = d["narrative"]
    assert text.startswith("MFU fell 45.9% -> 24.6%")
    assert "exposed communication" in text and "bus bandwidth 100 -> 20 GB/s" in text
    assert "rank 13 (host node003)" in text and "dp 4 -> 8" in text
    assert {"a", "b", "mfu_delta_points", "step_time_delta_ms", "breakdown_delta_ms",
            "mfu_points_by_category", "setup_changes", "collectives",
            "narrative"} <= set(d)


def _narrative(db: Path, a: str, b: str, spec_from: str | None = None) -> str:
    ta, tb = typed_report(db, a, spec_from), typed_report(db, b, spec_from)
    with stepscope.open(db) as store:
        return build_diff(ta, tb, op_times(store.con, a), op_times(store.con, b)).narrative


def test_a_rise_is_explained_by_what_gave_the_points(db: Path) -> None:
    """4 -> 8 microbatches: MFU rises by the bubble's shrinking; the headline names it
    (it named only losses: '+0.06 ms of exposed communication (-1.7 pts)')."""
    text = _narrative(db, "plan_mb4", "plan_mb8", "plan_mb4")
    assert text.startswith("MFU rose 26.2% -> 32.8%")
    assert "Top causes: pipeline bubble -2.32 ms/step (+8.4 pts)" in text
    assert "exposed communication" not in text


def test_a_straggler_wait_cause_quotes_the_wait(db: Path) -> None:
    """DDP -> FSDP2 (gloo, CPU): the straggler-wait cause quotes the collective's wait,
    not its exposed time (which it repeated: 'exposed 0.00 -> 16.40 ms' twice)."""
    text = _narrative(db, "cpu-ddp", "cpu-fsdp2")
    assert "exposed communication +24.30 ms/step as all_gather on default_pg exposed " \
           "0.00 -> 16.40 ms" in text
    assert "straggler wait +10.19 ms/step as all_gather on default_pg waited for " \
           "0.00 -> 8.69 ms" in text


def _truth_mean(truth: dict[str, Any], cat: str) -> float:
    per_rank = []
    for rows in truth["per_rank"].values():
        full = [r for r in rows if r["has_successor"]]
        per_rank.append(sum(r[f"{cat}_ns"] for r in full) / len(full) / 1e6)
    return sum(per_rank) / len(per_rank)


def test_diff_cli_on_paths_and_runs(db: Path, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "d.json"
    assert main(["diff", str(SIM / "diff_base"), str(SIM / "diff_scaled"), "--format", "json",
                 "--out", str(out)]) == 0
    d = json.loads(out.read_text())
    assert d["a"]["run"] == "diff_base" and d["b"]["run"] == "diff_scaled"
    assert main(["diff", "cpu-ddp", "cpu-straggler", "--db", str(db)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("# stepscope diff: cpu-ddp -> cpu-straggler")
    assert "no MFU" in text and "new: rank 2 (vm)" in text
    assert main(["diff", "cpu-ddp", "nope", "--db", str(db)]) == 2
    assert "no run named 'nope'" in capsys.readouterr().err
