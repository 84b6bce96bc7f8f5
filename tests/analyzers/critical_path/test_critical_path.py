"""The critical path across ranks and the what-if (docs/critical_path.md) against the
simulator's own knowledge: what set every start and which member of each collective
arrived last (sample_traces/sim_critical_path.py), and re-simulations with the change."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import SIM

import stepscope
from stepscope.analyzers.context import run_context
from stepscope.analyzers.critical_path.analysis import Analysis, what_if
from stepscope.analyzers.critical_path.graph import INFERRED, causes, chain, load
from stepscope.analyzers.critical_path.whatif import WhatIf, evaluate
from stepscope.analyzers.report import build_report
from stepscope.analyzers.results import Report
from stepscope.cli import main

# sets whose truth is computed here by running the simulator again (their bundled
# ground_truth.json predates the critical path); `critical_path` and
# `pipeline_imbalance` carry theirs in the file
ON_THE_FLY = ("straggler", "healthy", "deep_pipeline", "hidden_straggler")
SETS = ("critical_path", "pipeline_imbalance", *ON_THE_FLY)


@cache
def truth(name: str) -> dict[str, Any]:
    facts = json.loads((SIM / name / "ground_truth.json").read_text())
    if "critical_path" in facts:
        return dict(facts["critical_path"])
    sys.path.insert(0, str(SIM.parent))
    try:
        import simulate_gpu as sim
        from sim_critical_path import critical_path_truth
    finally:
        sys.path.remove(str(SIM.parent))
    cfg = sim.SETS[name]
    programs, _spans = sim.simulate(cfg)
    return dict(critical_path_truth(cfg, programs, {}, sim.simulate, sim.BASE_NS))


@cache
def analysis(db: str, run: str) -> Analysis:
    with stepscope.open(db) as store:
        return Analysis(store.con, run)


@pytest.mark.parametrize("name", SETS)
def test_the_path_is_the_simulated_one(sample_db: Path, name: str) -> None:
    """Per step: the reference rank, the path's length (= the window within 0.1%), its
    time per rank and category, and exactly the ops the simulator says set the step."""
    a = analysis(str(sample_db), name)
    want = {s["step"]: s for s in truth(name)["steps"]}
    assert set(a.steps) == set(want)
    for step, facts in want.items():
        path = a.path(step)
        assert path is not None
        assert path.reference_rank == facts["reference_rank"]
        assert path.we - path.ws == facts["window_ns"]
        assert path.length_ns == pytest.approx(facts["window_ns"], rel=1e-3)
        by_rank: dict[str, int] = {}
        by_cat: dict[str, int] = {}
        for rank, cat, s, e in zip(path.rank, path.cat, path.s, path.e, strict=True):
            by_rank[str(rank)] = by_rank.get(str(rank), 0) + int(e - s)
            by_cat[str(cat)] = by_cat.get(str(cat), 0) + int(e - s)
        assert by_rank == facts["by_rank_ns"]
        assert {k: v for k, v in by_cat.items() if v} == {
            k: v for k, v in facts["by_category_ns"].items() if v}
        ops = {(int(r), int(a.g.s[n])) for r, n in zip(path.rank, path.node, strict=True)
               if n >= 0}
        assert ops == {(o[0], o[1]) for o in facts["ops"]}


def test_the_path_crosses_to_the_straggler_and_back(sample_db: Path) -> None:
    """critical_path: rank 5 (stage 1) is slow; the path of stage 0's rank 0 goes to it
    through a send/recv, stays on it through its TP all-reduces (rank 4 waits for it),
    and comes back to stage 0 with the gradients."""
    path = analysis(str(sample_db), "critical_path").path(2)
    assert path is not None
    in_time = [int(r) for r in path.rank[::-1]]
    hops = [r for i, r in enumerate(in_time) if i == 0 or r != in_time[i - 1]]
    assert path.reference_rank == 0 and 5 in hops
    five = hops.index(5)
    assert hops[five - 1] in (0, 1) and any(r in (0, 1) for r in hops[five + 1:])
    on_five = sum(int(e - s) for r, s, e in zip(path.rank, path.s, path.e, strict=True) if r == 5)
    assert on_five > 0.5 * path.length_ns


@pytest.mark.parametrize("name", SETS)
def test_whatif_matches_a_resimulation(sample_db: Path, name: str) -> None:
    """Each what-if of the truth (the slow rank at the median speed, the fc1 GEMMs 2x,
    the TP all-reduce 2x) within 1% of the job simulated again with that change."""
    facts = truth(name)
    with stepscope.open(sample_db) as store:
        ctx = run_context(store.con, name)
        assert ctx.attribution.step_time_ms == pytest.approx(facts["step_time_ms"], rel=1e-9)
        for w in facts["whatif"]:
            opts = w["options"]
            if "rank" in opts and opts["rank"] is None:
                continue  # a healthy set: no slow rank
            spec = WhatIf(ranks=(opts["rank"],) if "rank" in opts else (), op=opts.get("op"),
                          collective=opts.get("collective"),
                          speedup=None if opts["speedup"] == "median" else opts["speedup"])
            if spec.collective and not any(
                    "TENSOR" in str(o) for o in analysis(str(sample_db), name).g.ops):
                continue  # no tensor parallelism in this set
            got = what_if(ctx, spec)
            assert got.predicted_step_time_ms == pytest.approx(w["step_time_ms"], rel=0.01), \
                w["what"]
            assert got.gain_ms > 0


def test_unchanged_durations_reproduce_every_observed_time(sample_db: Path) -> None:
    for name in SETS:
        a = analysis(str(sample_db), name)
        for step, by_rank in a.windows(None).items():
            sel = a.g.w_step == step
            observed = dict(zip(a.g.w_rank[sel].tolist(),
                                (a.g.w_we[sel] - a.g.w_ws[sel]).tolist(), strict=True))
            assert by_rank == observed, (name, step)


def test_the_report_section_and_the_advisor_use_the_whatif(sample_db: Path) -> None:
    with stepscope.open(sample_db) as store:
        report: Report = build_report(store.con, "critical_path")
        imbalance = build_report(store.con, "pipeline_imbalance")
    cp = report.critical_path
    assert cp is not None and cp.message is None
    for s in cp.steps:
        assert s.path_ms == pytest.approx(s.window_ms, rel=1e-3)
        assert sum(s.by_category_ms.values()) == pytest.approx(s.path_ms, rel=1e-9)
        assert sum(r.ms for r in s.runs) == pytest.approx(s.path_ms, rel=1e-9)
        assert s.ranks[0] == 5  # the straggler holds most of the path
    (straggler,) = [w for w in cp.whatifs if w.reason == "straggler"]
    (rec,) = [r for r in report.recommendations if r.id == "straggler"]
    assert rec.expected_gain_ms == pytest.approx(straggler.gain_ms)
    assert straggler.sentence in rec.evidence
    want = {w["what"]: w["step_time_ms"] for w in truth("pipeline_imbalance")["whatif"]}
    (stage,) = [w for w in imbalance.critical_path.whatifs if w.reason == "pipeline_stage"]
    assert stage.target == "2"
    assert stage.predicted_step_time_ms == pytest.approx(
        want["slow rank at the median speed"], rel=0.01)
    (rec,) = [r for r in imbalance.recommendations if r.id == "pipeline-imbalance"]
    assert rec.expected_gain_ms == pytest.approx(stage.gain_ms)


def test_cpu_only_runs_say_why(sample_db: Path) -> None:
    with stepscope.open(sample_db) as store:
        cp = build_report(store.con, "cpu-straggler").critical_path
    assert cp is not None and cp.message and "CPU-only" in cp.message and not cp.steps


def test_whatif_cli(sample_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["whatif", "critical_path", "--db", str(sample_db), "--rank", "5",
                 "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    median = [w for w in truth("critical_path")["whatif"] if w["options"].get("rank")][0]
    assert out["predicted_step_time_ms"] == pytest.approx(median["step_time_ms"], rel=0.01)
    assert out["what"] == "rank 5 ran at the median speed"
    assert main(["whatif", "critical_path", "--db", str(sample_db), "--collective",
                 "all_reduce:tensor", "--speedup", "2"]) == 0
    assert "all_reduce:tensor ran 2x faster, the step would be" in capsys.readouterr().out
    for bad, says in ((["--rank", "99"], "rank(s) 99"), (["--op", "nope", "--speedup", "2"],
                      "no kernel or launching op matches 'nope'"),
                      (["--op", "fc1"], "--speedup K is needed"),
                      (["--collective", "bcast", "--speedup", "2"], "have: all_reduce")):
        assert main(["whatif", "critical_path", "--db", str(sample_db), *bad]) == 2
        assert says in capsys.readouterr().err


def test_a_speedup_under_one_is_worded_as_a_slowdown(
        sample_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--speedup 0.5 divides durations by 0.5: "2x slower", a longer step, a loss."""
    assert WhatIf(ranks=(5,), speedup=0.5).label == "rank 5 ran 2x slower"
    assert WhatIf(op="fc1", speedup=0.8).label == "the kernels matching 'fc1' ran 1.25x slower"
    assert WhatIf(collective="all_reduce", speedup=1.0).label == \
        "all_reduce ran at the measured speed (1x)"
    assert main(["whatif", "critical_path", "--db", str(sample_db), "--collective",
                 "all_reduce:tensor", "--speedup", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "faster" not in out
    head, numbers = out.splitlines()[:2]
    assert head.startswith("If all_reduce:tensor ran 2x slower, the step would be ")
    assert "(+" in head and ", loss " in numbers


def test_chain_by_pointer_doubling_equals_walking() -> None:
    rng = np.random.default_rng(7)
    parent = np.full(5000, -1, dtype=np.int64)
    parent[1:] = rng.integers(0, np.arange(1, 5000))  # a random forest, parents earlier
    for start in (0, 1, 4999, 2500):
        want, at = [], start
        while at >= 0:
            want.append(at)
            at = int(parent[at])
        assert chain(parent, start).tolist() == want
        assert chain(parent, start, walk_max=0).tolist() == want  # all by doubling


def _walked(parent: np.ndarray, start: int) -> list[int]:
    """The chain from `start` one item at a time, up to -1 or the first repeat."""
    out: list[int] = []
    at = start
    while at >= 0 and at not in out:
        out.append(at)
        at = int(parent[at])
    return out


def test_chain_is_the_same_wherever_the_walk_hands_over_to_doubling() -> None:
    """A chain is followed item by item for its first walk_max items and by pointer
    doubling after: on forests and on graphs with cycles (entered before, at and after
    the hand-over) every hand-over point gives the walked chain."""
    rng = np.random.default_rng(11)
    for trial in range(40):
        n = int(rng.integers(1, 60))
        parent = rng.integers(-1, n, size=n).astype(np.int64)  # any links: cycles too
        if trial % 2:
            parent[int(rng.integers(0, n))] = -1
        for start in range(n):
            want = _walked(parent, start)
            for walk_max in (0, 1, 2, 3, 5, len(want) - 1, len(want), len(want) + 1):
                got = chain(parent, start, walk_max=max(walk_max, 0)).tolist()
                assert got == want, (trial, start, walk_max)


def test_evaluate_is_max_plus_and_breaks_cycles() -> None:
    neg = np.iinfo(np.int64).min // 4
    # 0 -> 1 -> 3, 0 -> 2 -> 3; 4 <-> 5 a cycle
    c = np.array([10, neg, neg, neg, 0, 0], dtype=np.int64)
    d = np.array([5, 1, 7, 2, 1, 1], dtype=np.int64)
    src, dst = np.array([0, 0, 1, 2, 4, 5]), np.array([1, 2, 3, 3, 5, 4])
    w = np.array([0, 3, 0, 0, 0, 0], dtype=np.int64)
    v, breaks = evaluate(6, c, d, src, dst, w)
    assert v[:4].tolist() == [15, 16, 25, 27]
    assert (v[4:] == neg).all() and breaks == 0
    # with the observed times as a hint the cycle is broken at its earliest item
    v, breaks = evaluate(6, c, d, src, dst, w, hint=np.array([0, 0, 0, 0, 5, 3]))
    assert breaks == 1 and v[5] == 1 and v[4] == 2
    assert chain(np.array([1, 2, 3, 1, -1]), 0).tolist() == [0, 1, 2, 3]


def test_a_run_without_gpu_ops_has_an_empty_analysis(sample_db: Path) -> None:
    """No node, no edge (a CPU-only trace; Flight Recorder dumps alone are the same):
    the analysis and its what-if graph build, empty, instead of failing."""
    a = analysis(str(sample_db), "cpu-ckpt")
    assert (a.g.n, a.g.n_edges, a.graph().edst.size, a.steps) == (0, 0, 0, ())


def test_causes_have_one_binding_edge_per_explained_node(sample_db: Path) -> None:
    with stepscope.open(sample_db) as store:
        g, edges = load(store.con, "critical_path")
    bound = edges.dst[edges.binding]
    assert np.unique(bound).size == bound.size
    assert g.n_edges == edges.dst.size and g.n_inferred == (edges.ekind == INFERRED).sum()
    why = causes(g, edges)
    members = g.inst >= 0
    assert (why.last[members] >= 0).all() and (why.last[~members] < 0).all()


def test_dashboard_page_shows_the_path_and_recomputes_a_whatif(
        sample_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """AppTest: the page's numbers are the report's; the what-if control gives the
    library's answer for the rank, op and collective a user picks."""
    from dashboard_helpers import app_test, no_exception, texts

    from stepscope.dashboard.render.critical_path import whatif_line

    with stepscope.open(sample_db) as store:
        rep = build_report(store.con, "critical_path")
        cp = rep.critical_path
        ctx = run_context(store.con, "critical_path")
        want_rank = what_if(ctx, WhatIf(ranks=(5,)))
        want_coll = what_if(ctx, WhatIf(collective="all_reduce", speedup=3.0))
    assert cp is not None
    at = app_test(monkeypatch, sample_db, page="critical_path", run="critical_path")
    at.run()
    no_exception(at)
    assert at.header[0].value == "Critical path"
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Path per step"] == f"{cp.path_ms:.2f} ms"
    assert metrics["Step time"] == f"{rep.step_time_ms:.2f} ms"  # issue 42 §4: both
    assert metrics["Most path time"] == "rank 5"
    page = texts(at)
    assert "reference rank's window" in page and "than the step time of" in page
    for w in cp.whatifs:
        assert whatif_line(w) in page
    at.selectbox(key="cp_rank").set_value(5).run()
    no_exception(at)
    assert [s.value for s in at.success] == [whatif_line(want_rank)]
    at.radio(key="cp_kind").set_value("collective").run()
    at.text_input(key="cp_coll").set_value("all_reduce").run()
    at.number_input(key="cp_speedup").set_value(3.0).run()
    no_exception(at)
    assert [s.value for s in at.success] == [whatif_line(want_coll)]
    at.text_input(key="cp_coll").set_value("bcast").run()
    assert any("no matched collective 'bcast'" in str(w.value) for w in at.warning)
    cpu = app_test(monkeypatch, sample_db, page="critical_path", run="cpu-straggler")
    cpu.run()
    no_exception(cpu)
    assert "CPU-only traces" in texts(cpu)


@pytest.mark.slow
def test_every_shared_trace_gets_a_path_or_says_why(
        real_report: Callable[[Path], Report]) -> None:
    """Every real Kineto trace of tests/data/traces (one rank each, the session's real
    database): a section that either tiles each complete step's window or says why there
    is none, never an error."""
    from conftest import real_trace_files

    seen = {"paths": 0, "messages": 0}
    for path in real_trace_files():
        cp = real_report(path).critical_path
        assert cp is not None, path
        if cp.message:
            seen["messages"] += 1
            continue
        seen["paths"] += 1
        assert cp.steps, path
        for s in cp.steps:
            assert s.path_ms == pytest.approx(s.window_ms, rel=1e-3), (path, s.step)
        assert any("one rank traced" in n for n in cp.notes), path
    assert seen["paths"] >= 10 and seen["messages"] >= 1
