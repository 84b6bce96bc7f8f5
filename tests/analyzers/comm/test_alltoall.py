"""MoE and embedding all_to_all (docs/alltoall.md): bytes sent and received per rank,
tokens, the imbalance of each call and its cost against the simulator (moe_roofline:
uneven all_to_allv splits, rank 2's expert the popular one); the advice, checked against a
re-simulation with balanced routing; split sizes as record_param_comms writes them; the
real traces."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest
from conftest import REPO, SIM, kineto_trace, write_trace

import stepscope
from stepscope.analyzers.report import build_report
from stepscope.analyzers.results import Report


def report(db: Path, run: str) -> Report:
    with stepscope.open(db) as store:
        return build_report(store.con, run)


def truth() -> dict[str, Any]:
    return json.loads((SIM / "moe_roofline" / "ground_truth.json").read_text())


def complete_steps(t: dict[str, Any]) -> set[int]:
    return {row["step"] for row in t["per_rank"]["0"] if row["has_successor"]}


def test_bytes_and_tokens_per_rank_are_exact(sample_db: Path) -> None:
    a2a = report(sample_db, "moe_roofline").all_to_all
    assert a2a is not None and a2a.message is None
    t = truth()
    steps = complete_steps(t)
    for row in a2a.ranks:
        per_step = [t["all_to_all"]["per_rank"][str(row.rank)][str(s)] for s in steps]
        for key, got in (("sent_bytes", row.sent_bytes), ("received_bytes", row.received_bytes),
                         ("tokens_received", row.tokens_received)):
            assert got == sum(p[key] for p in per_step) / len(per_step), (row.rank, key)
    assert max(a2a.ranks, key=lambda r: r.received_bytes).rank == 2


def test_imbalance_and_its_cost_match(sample_db: Path) -> None:
    a2a = report(sample_db, "moe_roofline").all_to_all
    assert a2a is not None
    (group,) = a2a.groups
    t = truth()
    steps = complete_steps(t)
    inst = [i for i in t["all_to_all"]["instances"].values() if i["step"] in steps]
    assert group.group_label == "EXPERT_MODEL_PARALLEL_GROUP" and group.members == 4
    assert group.splits == "given"
    assert group.calls_per_step == len(inst) / len(steps)
    assert group.imbalance == pytest.approx(sum(i["imbalance"] for i in inst) / len(inst),
                                            rel=1e-9)
    assert group.imbalance_max == pytest.approx(max(i["imbalance"] for i in inst), rel=1e-9)
    # every rank takes part in every call: per rank and step = per step
    assert group.imbalance_cost_ms == pytest.approx(
        sum(i["cost_ns"] for i in inst) / len(steps) / 1e6, rel=1e-6)
    assert group.heaviest_rank == 2 and group.heaviest_vs_mean > 1.2


def _step_ms(imbalance: float) -> float:
    """Mean complete step of moe_roofline re-simulated with routing `imbalance`."""
    sys.path.insert(0, str(REPO / "sample_traces"))
    try:
        import simulate_gpu
        cfg = dataclasses.replace(simulate_gpu.SETS["moe_roofline"], ep_imbalance=imbalance)
        programs, spans = simulate_gpu.simulate(cfg)
        facts = simulate_gpu.ground_truth(cfg, programs, 1, spans)
    finally:
        sys.path.remove(str(REPO / "sample_traces"))
    steps = [r["window_end_ns"] - r["window_start_ns"]
             for rows in facts["per_rank"].values() for r in rows if r["has_successor"]]
    return sum(steps) / len(steps) / 1e6


def test_advice_names_the_hot_rank_and_predicts_a_balanced_step(sample_db: Path) -> None:
    r = report(sample_db, "moe_roofline")
    (rec,) = [x for x in r.recommendations if x.id == "a2a-imbalance"]
    assert rec.title == ("Balance the expert load (token imbalance): rank 2 receives 1.25x "
                         "the mean rank's tokens")
    assert rec.detail.startswith(
        "Token imbalance across the all_to_all ranks: rank 2 receives 20,512 tokens/step "
        "(1.37x the least loaded), against 16,384 for the mean rank and 14,976 for the "
        "least loaded (rank 0). Rank 2 is also flagged as a straggler")
    balanced = _step_ms(0.0)
    assert rec.expected_gain_ms == pytest.approx(r.step_time_ms - balanced, rel=0.05)
    # rank 2 straggles because its expert receives more tokens: one advice, not two
    assert "straggler" not in {x.id for x in r.recommendations}
    assert "rank 2 (host node000) as a straggler: arrived last" in rec.evidence
    assert "a2a-imbalance" not in {x.id for x in report(sample_db, "moe_ep").recommendations}


def test_advice_does_not_credit_the_imbalance_twice(sample_db: Path) -> None:
    """a2a-imbalance claims the imbalance cost (part of the calls' exposed time) and the
    wait for rank 2; exposed-ep-comm gets the rest of the exposed time, so the advice
    adds up to at most the all_to_all's exposed time + wait, which it claims to recover."""
    r = report(sample_db, "moe_roofline")
    gains = {x.id: x.expected_gain_ms for x in r.recommendations}
    (group,) = r.all_to_all.groups if r.all_to_all else ()
    (a2a,) = [c for c in r.collectives if c.collective == "all_to_all"]
    assert gains["a2a-imbalance"] == pytest.approx(group.imbalance_cost_ms + group.wait_ms)
    assert gains["exposed-ep-comm"] == pytest.approx(a2a.exposed_ms - group.imbalance_cost_ms)
    assert sum(gains.values()) <= a2a.exposed_ms + a2a.straggler_wait_ms + 1e-9
    (ep,) = [x for x in r.recommendations if x.id == "exposed-ep-comm"]
    assert "0.34 ms/step of the exposed time is the load imbalance, counted in " \
        "a2a-imbalance's gain" in ep.evidence


def test_split_sizes_as_record_param_comms_writes_them(tmp_path: Path) -> None:
    extra = []
    for i, (ins, outs) in enumerate((("[1, 3]", "[2, 2]"), ("[]", "[]"),
                                     ("[1, 2, 3, 4, 5, ...]", "[1, 2, 3, 4, 5, ...]"))):
        t0 = 100.0 + 30 * i
        extra += [
            {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 100, "tid": 100,
             "ts": t0, "dur": 10.0, "args": {
                 "Collective name": "all_to_allv", "dtype": "Float", "In msg nelems": 64,
                 "Out msg nelems": 64, "Group size": 2, "In split size": ins,
                 "Out split size": outs, "Process Group Name": "0"}},
            {"ph": "X", "cat": "user_annotation", "name": "nccl:all_to_all", "pid": 100,
             "tid": 100, "ts": t0 + 1, "dur": 8.0, "args": {}}]
    trace = kineto_trace(rank=0, world_size=1, steps=2, extra_events=extra)
    db = tmp_path / "s.duckdb"
    stepscope.ingest_run(write_trace(tmp_path / "t" / "rank0.json", trace), db=db, run="x")
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute("SELECT in_splits, out_splits, splits_truncated, in_bytes FROM "
                       "collectives WHERE collective = 'all_to_all' ORDER BY coll_id").fetchall()
    con.close()
    assert rows == [([1, 3], [2, 2], False, 256), (None, None, False, 256),
                    (None, None, True, 256)]
