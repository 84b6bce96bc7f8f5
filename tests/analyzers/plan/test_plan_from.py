"""`stepscope plan --from RUN` and the diff's expectation, against the simulator's pairs
where only the scale or the layout changes (sample_traces/simulate_gpu.py PLAN_PAIRS):
the prediction of B from A's calibration must land within 2 MFU points and 5% of B's
step time in B's ground truth, and where a pair also changes what the model cannot see
(diff_base -> diff_scaled: a 5x slower network and a slow rank), the diff must put the
difference in those terms.

The micro-batch pair is bundled (sample_db); the DP and TP->PP pairs are simulated and
ingested once per tree into the cached plan database (tests/sample_db.py). Each run is
calibrated once per module (a Calibration is frozen)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from functools import cache
from pathlib import Path
from typing import Any

import duckdb
import msgspec
import pytest
import sample_db as sample_db_module
from conftest import REPO, SIM

import stepscope
from stepscope.analyzers.context import ReportOptions, run_context
from stepscope.analyzers.flops.model_spec import load_spec
from stepscope.analyzers.plan.calibrate import calibrate, find_spec, term_ms, tier
from stepscope.analyzers.plan.expected import TERM_STAGE, expected_for
from stepscope.analyzers.plan.from_run import Constraints, plan_from
from stepscope.analyzers.plan.predict import predict, target_of
from stepscope.analyzers.report import report_from_context
from stepscope.analyzers.results import Calibration, Expected, MemoryCalibration
from stepscope.cli import main
from stepscope.dashboard.render.plan import plan_markdown
from stepscope.ingest import UsageError

SIMULATOR = REPO / "sample_traces" / "simulate_gpu.py"
GENERATED = ("dp2x", "tp_to_pp")
PAIRS = ("dp2x", "tp_to_pp", "microbatches")
MFU_POINTS, STEP_SHARE = 2.0, 0.05


def _simulator() -> Any:
    """sample_traces/simulate_gpu.py as a module (it imports its sibling modules, as when
    run as a script from its folder)."""
    if str(SIMULATOR.parent) not in sys.path:
        sys.path.append(str(SIMULATOR.parent))
    spec = importlib.util.spec_from_file_location("simulate_gpu", SIMULATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["simulate_gpu"] = module
    spec.loader.exec_module(module)
    return module


SIMULATED = _simulator()


@pytest.fixture(scope="module")
def pairs(sample_db: Path) -> dict[str, Any]:
    """{pair: (db, folder of A, folder of B)}: the generated pairs in the plan database
    (their folders beside it), the bundled one in the session's."""
    generated = [cfg.name for name in GENERATED for cfg in SIMULATED.PLAN_PAIRS[name]]
    assert tuple(generated) == sample_db_module.PLAN_SETS
    db = sample_db_module.cached_db("plan")
    out: dict[str, Any] = {}
    for name in GENERATED:
        a, b = SIMULATED.PLAN_PAIRS[name]
        out[name] = (db, db.parent / "sets" / a.name, db.parent / "sets" / b.name)
    a, b = SIMULATED.PLAN_PAIRS["microbatches"]
    out["microbatches"] = (sample_db, SIM / a.name, SIM / b.name)
    return out


def _truth(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "ground_truth.json").read_text())


def _calibrated(con: duckdb.DuckDBPyConnection, folder: Path) -> Calibration:
    spec = load_spec(folder / "model.json")
    ctx = run_context(con, folder.name, ReportOptions(spec=spec))
    return calibrate(ctx, report_from_context(ctx), spec, str(folder / "model.json"))


@cache
def _calibrated_in(db: Path, folder: Path) -> Calibration:
    """The calibration of run `folder.name` of `db`, once per module's process."""
    with stepscope.open(db) as store:
        return _calibrated(store.con, folder)


def _pair(pairs: dict[str, Any], name: str) -> tuple[Calibration, Calibration, Path, Path]:
    db, fa, fb = pairs[name]
    return _calibrated_in(db, fa), _calibrated_in(db, fb), fa, fb


def _expected(db: Path, a: str, b: str) -> Expected:
    with stepscope.open(db) as store:
        ctx_a, ctx_b = run_context(store.con, a), run_context(store.con, b)
        e, why_not = expected_for(ctx_a, report_from_context(ctx_a), ctx_b,
                                  report_from_context(ctx_b))
    assert e is not None, why_not
    return e


@pytest.mark.parametrize("name", PAIRS)
def test_prediction_of_b_from_a_is_within_the_bounds(pairs: dict[str, Any], name: str) -> None:
    cal_a, cal_b, _, fb = _pair(pairs, name)
    truth = _truth(fb)["mfu"]
    plan = predict(cal_a, target_of(cal_b), 80.0)
    assert (plan.tp, plan.pp, plan.dp) == tuple(_truth(fb)["config"][k] for k in ("tp", "pp", "dp"))
    assert plan.step_ms == pytest.approx(truth["step_time_ms"], rel=STEP_SHARE)
    assert 100 * plan.mfu == pytest.approx(100 * truth["mfu"], abs=MFU_POINTS)
    assert plan.step_ms == pytest.approx(sum(t.ms for t in plan.terms), rel=1e-12)
    assert all(t.uses for t in plan.terms)


@pytest.mark.parametrize("name", PAIRS)
def test_the_model_reproduces_the_calibrating_run(pairs: dict[str, Any], name: str) -> None:
    cal_a, _, fa, _ = _pair(pairs, name)
    truth = _truth(fa)["mfu"]
    assert cal_a.step_ms == pytest.approx(truth["step_time_ms"], rel=1e-3)
    assert sum(t.ms for t in cal_a.terms) == pytest.approx(cal_a.step_ms, rel=1e-9)
    own = predict(cal_a, target_of(cal_a), 80.0)
    assert own.step_ms == pytest.approx(cal_a.step_ms, rel=0.01)
    assert own.mfu == pytest.approx(truth["mfu"], abs=0.002)


@pytest.mark.parametrize("name", PAIRS)
def test_calibration_recovers_the_simulated_hardware(pairs: dict[str, Any], name: str) -> None:
    """The fitted link lines and kernel rates are the simulator's own settings."""
    cal_a, _, fa, _ = _pair(pairs, name)
    cfg = _truth(fa)["config"]
    nvlink = tier(cal_a.links, "nvlink")
    assert nvlink.source == "fit"
    assert nvlink.bus_bw_gbs == pytest.approx(cfg["nvlink_gbs"], rel=0.01)
    assert nvlink.latency_us == pytest.approx(cfg["nvlink_latency_us"], rel=0.01)
    if cfg["tp"] * cfg["dp"] > cfg["gpus_per_node"]:
        network = tier(cal_a.links, "network")
        assert network.source == "fit"
        assert network.bus_bw_gbs == pytest.approx(cfg["network_gbs"], rel=0.01)
        assert network.latency_us == pytest.approx(cfg["network_latency_us"], rel=0.01)
    rates = {k.kind: k.tflops for k in cal_a.kernels}
    for kind in ("gemm", "attention"):
        assert rates[kind] == pytest.approx(cfg["peak_tflops"] * cfg["efficiency"], rel=0.01)
    assert (cal_a.microbatches, cal_a.micro_batch) == (cfg["microbatches"], cfg["micro_batch"])


def _shape(name: str) -> str:
    return str(_truth(SIM / name)["config"].get("shape", "megatron"))


GPU_SETS = sorted(p.name for p in SIM.iterdir() if (p / "model.json").exists())
MEGATRON_SETS = [n for n in GPU_SETS if _shape(n) == "megatron"]
# moe_roofline's model.json is its own MoE layer's (sample_traces/sim_roofline.py), not
# the generic dense one: it describes the run and is not refused
DESCRIBED = frozenset({"moe_roofline"})
OTHER_SHAPES = [n for n in GPU_SETS if _shape(n) != "megatron" and n not in DESCRIBED]


@pytest.mark.parametrize("name", MEGATRON_SETS)
def test_every_simulated_set_calibrates_and_the_model_reproduces_it(sample_db: Path,
                                                                     name: str) -> None:
    """Every bundled Megatron-style set, whatever its quirks (recompute, stragglers, input
    gaps, TP across nodes, fp32 on V100): the measured terms add up to the step, and the
    model at the run's own layout gives back its step within 1%."""
    cal = _calibrated_in(sample_db, SIM / name)
    truth = _truth(SIM / name)
    assert cal.step_ms == pytest.approx(truth["mfu"]["step_time_ms"], rel=1e-3)
    assert sum(t.ms for t in cal.terms) == pytest.approx(cal.step_ms, rel=1e-9)
    assert predict(cal, target_of(cal), None).step_ms == pytest.approx(cal.step_ms, rel=0.01)
    cfg = truth["config"]
    assert (cal.tp, cal.pp, cal.dp) == (cfg["tp"], cfg["pp"], cfg["dp"])
    assert cal.model.heads == cfg["heads"]
    assert (cal.recompute_share > 0) == bool(cfg["recompute"])


@pytest.mark.parametrize("name", OTHER_SHAPES)
def test_a_spec_that_does_not_describe_the_run_is_refused(sample_db: Path, name: str) -> None:
    """The MoE and CUDA/HIP-graph sets carry the generic dense model.json, whose FLOPs
    would need more than the peak on their kernels: refused, naming the spec."""
    with stepscope.open(sample_db) as store, pytest.raises(UsageError,
                                                            match="does not describe"):
        _calibrated(store.con, SIM / name)


@pytest.mark.parametrize("name", sorted(DESCRIBED))
def test_a_spec_that_describes_a_moe_layer_calibrates(sample_db: Path, name: str) -> None:
    with stepscope.open(sample_db) as store:
        cal = _calibrated(store.con, SIM / name)
    assert cal.step_ms == pytest.approx(_truth(SIM / name)["mfu"]["step_time_ms"], rel=1e-3)
    assert sum(t.ms for t in cal.terms) == pytest.approx(cal.step_ms, rel=1e-9)


def test_dp_overlap_and_pipeline_bubble_are_calibrated(pairs: dict[str, Any]) -> None:
    cal_dp, _, _, _ = _pair(pairs, "dp2x")
    assert cal_dp.dp_buckets == 4  # one per layer
    assert cal_dp.dp_hidden_fraction is not None and 0.2 < cal_dp.dp_hidden_fraction < 0.6
    assert cal_dp.dp_overlap == pytest.approx(1.0)
    assert cal_dp.bubble is None
    cal_mb, _, _, _ = _pair(pairs, "microbatches")
    b = cal_mb.bubble
    assert b is not None and (b.stages, b.microbatches) == (4, 4)
    assert b.theory_fraction == pytest.approx(3 / 7)
    assert b.ratio == pytest.approx(1.0, abs=0.05)


@pytest.mark.parametrize("name", PAIRS)
def test_diff_expectation_adds_up_and_explains_the_clean_pairs(pairs: dict[str, Any],
                                                               name: str) -> None:
    db, fa, fb = pairs[name]
    e = _expected(db, fa.name, fb.name)
    truth_a, truth_b = _truth(fa)["mfu"], _truth(fb)["mfu"]
    assert e.mfu_delta_points is not None and e.departure_points is not None
    assert sum(c.expected_points or 0.0 for c in e.terms) == pytest.approx(
        e.mfu_delta_points, abs=1e-9)
    assert sum(c.departure_points or 0.0 for c in e.terms) == pytest.approx(
        e.departure_points, abs=1e-9)
    # expected + departure = the measured change (ground truth, 0.1 pts)
    assert e.mfu_delta_points + e.departure_points == pytest.approx(
        100 * (truth_b["mfu"] - truth_a["mfu"]), abs=0.1)
    assert abs(e.departure_points) < MFU_POINTS  # nothing the layout does not explain
    assert e.narrative.startswith("B ") and "from A at B's scale and layout" in e.narrative


def test_diff_puts_the_network_and_the_straggler_in_their_terms(sample_db: Path) -> None:
    """diff_base -> diff_scaled: DP 4 -> 8 across twice the nodes (what the model sees),
    a 5x slower network and rank 13 30% slower (what it cannot): the expected DP term is
    B's gradients at A's bandwidth, the departure is the slower network, the straggler
    wait departs by B's measured wait, and those two carry nearly all the departure."""
    e = _expected(sample_db, "diff_base", "diff_scaled")
    a, b = _truth(SIM / "diff_base")["config"], _truth(SIM / "diff_scaled")["config"]
    terms = {c.term: c for c in e.terms}
    grads = 2 * 12 * b["hidden"] ** 2 / b["tp"]   # bf16 gradients of B's one layer per rank
    ring = 2 * (b["dp"] - 1) / b["dp"] * grads
    dp = terms["dp_comm"]
    assert dp.expected_ms == pytest.approx(ring / (a["dp_bw_gbs"] * 1e9) * 1e3, rel=0.02)
    assert dp.b_ms == pytest.approx(ring / (b["dp_bw_gbs"] * 1e9) * 1e3, rel=0.02)
    assert dp.expected_points is not None and dp.expected_points < -1   # the bigger ring
    truth_b = _truth(SIM / "diff_scaled")
    waits = [sum(r["straggler_wait_ns"] for r in rows if r["has_successor"])
             / sum(r["has_successor"] for r in rows) / 1e6 for rows in truth_b["per_rank"].values()]
    wait = terms["straggler_wait"]
    assert wait.expected_ms == pytest.approx(0.0, abs=0.01)
    assert wait.b_ms == pytest.approx(sum(waits) / len(waits), rel=0.01)
    assert "rank 13" in wait.why
    departures = sorted(e.terms, key=lambda c: c.departure_points or 0.0)
    assert [c.term for c in departures[:2]] == ["dp_comm", "straggler_wait"]
    assert e.departure_points is not None
    named = (dp.departure_points or 0.0) + (wait.departure_points or 0.0)
    assert named / e.departure_points > 0.95
    assert "20 GB/s" in dp.why and "100 GB/s" in dp.why
    assert "DP communication" in e.narrative and "rank 13" in e.narrative


@pytest.mark.parametrize(("a", "b"), [("diff_base", "diff_scaled"), ("plan_mb4", "plan_mb8"),
                                      ("diff_scaled", "diff_base")])
def test_the_diffs_two_mfu_splits_agree(sample_db: Path, a: str, b: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """`stepscope diff`'s "MFU points by cause" and its "Expected" table split the same
    MFU change: grouped by waterfall stage, each term's expected + departure points are
    that stage's points by cause, and both add up to the MFU change (the identity)."""
    assert main(["diff", a, b, "--db", str(sample_db), "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    e, by_cause = d["expected"], d["mfu_points_by_category"]
    assert e is not None
    staged = dict.fromkeys(by_cause, 0.0)
    for t in e["terms"]:
        staged[TERM_STAGE[t["term"]]] += t["expected_points"] + t["departure_points"]
    assert staged == pytest.approx(by_cause, abs=1e-6)
    assert sum(by_cause.values()) == pytest.approx(d["mfu_delta_points"], abs=1e-6)
    assert e["mfu_delta_points"] + e["departure_points"] == pytest.approx(
        d["mfu_delta_points"], abs=1e-6)
    assert sum(t["expected_points"] for t in e["terms"]) == pytest.approx(
        e["mfu_delta_points"], abs=1e-6)
    assert sum(t["departure_points"] for t in e["terms"]) == pytest.approx(
        e["departure_points"], abs=1e-6)


def test_a_term_that_did_not_change_says_its_share_did(sample_db: Path) -> None:
    """diff_scaled's TP all-reduce takes the expected 0.89 ms/step, a smaller share of
    its longer step: its departure points say so, not a bandwidth it matched."""
    e = _expected(sample_db, "diff_base", "diff_scaled")
    (tp,) = [c for c in e.terms if c.term == "tp_comm"]
    assert tp.b_ms == pytest.approx(tp.expected_ms, rel=1e-6)
    assert tp.departure_points is not None and tp.departure_points > 0
    assert tp.why == "the same time, a smaller share of a longer step"


def test_plan_from_ranks_layouts_at_another_scale(pairs: dict[str, Any]) -> None:
    cal_a, cal_b, _, _ = _pair(pairs, "dp2x")
    result = plan_from(cal_a, None, Constraints(gpus=16), top=50)
    assert result.calibration == cal_a and result.baseline is not None
    assert result.job.gpus == 16 and result.feasible == len(result.plans) > 1
    assert [p.mfu for p in result.plans] == sorted((p.mfu for p in result.plans), reverse=True)
    assert all(p.tp * p.pp * p.dp == 16 for p in result.plans)
    same = next(p for p in result.plans if (p.tp, p.pp, p.dp) == (cal_b.tp, cal_b.pp, cal_b.dp))
    assert same.step_ms == pytest.approx(predict(cal_a, target_of(cal_b), None).step_ms)
    fixed = plan_from(cal_a, None, Constraints(gpus=16, tp=4, pp=1), top=5)
    assert [(p.tp, p.pp, p.dp) for p in fixed.plans] == [(4, 1, 4)]
    assert term_ms(fixed.plans[0].terms, "dp_comm") > term_ms(cal_a.terms, "dp_comm")


def test_memory_per_gpu_follows_zero(pairs: dict[str, Any]) -> None:
    cal_a, _, _, _ = _pair(pairs, "dp2x")
    params = cal_a.model.params
    by_zero = {z: plan_from(cal_a, None, Constraints(gpus=8, tp=2, pp=1, zero=z)).plans[0]
               for z in range(4)}
    shard = params / 2
    assert by_zero[0].state_gb == pytest.approx(16 * shard / 1e9)
    assert by_zero[1].state_gb == pytest.approx((4 + 12 / 4) * shard / 1e9)
    assert by_zero[3].state_gb == pytest.approx(16 / 4 * shard / 1e9)
    assert by_zero[3].dp_exposed_ms > by_zero[0].dp_exposed_ms  # ZeRO-3 moves 1.5x


def test_plan_cli_from_a_path_and_a_run(sample_db: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "plan.json"
    assert main(["plan", "--from", str(SIM / "plan_mb4"), "--micro-batches", "8",
                 "--format", "json", "--out", str(out)]) == 0
    plan = json.loads(out.read_text())
    assert plan["schema_version"] == 2
    assert plan["calibration"]["run"] == "plan_mb4"
    assert {t["name"] for t in plan["plans"][0]["terms"]} >= {"compute", "tp_comm", "bubble"}
    assert all(p["microbatches"] == 8 for p in plan["plans"])
    assert main(["plan", "--from", "plan_mb8", "--db", str(sample_db), "--gpus", "16",
                 "--top", "3"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("# stepscope plan --from plan_mb8")
    assert "## Calibration" in text and "## The run as the model sees it" in text


def test_plan_cli_refuses_with_one_line(sample_db: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--from", "cpu-ddp", "--db", str(sample_db),
                 "--model", str(SIM / "healthy" / "model.json")]) == 2
    err = capsys.readouterr().err
    assert "CPU-only run" in err and len(err.strip().splitlines()) == 1
    bare = tmp_path / "no_spec"
    shutil.copytree(SIM / "deep_pipeline", bare, ignore=shutil.ignore_patterns("model.json"))
    assert main(["plan", "--from", str(bare)]) == 2
    err = capsys.readouterr().err
    assert "no model spec" in err and len(err.strip().splitlines()) == 1
    big = tmp_path / "big.json"
    spec = json.loads((SIM / "plan_mb4" / "model.json").read_text())
    big.write_text(json.dumps({**spec, "n_params": 1000 * spec["n_params"]}))
    # the refusals after the run is read take it from the session's database (`--from
    # PATH` ingests first: test_plan_cli_from_a_path_and_a_run)
    assert main(["plan", "--from", "plan_mb4", "--db", str(sample_db), "--model",
                 str(big)]) == 2
    err = capsys.readouterr().err
    assert "does not describe this run" in err and len(err.strip().splitlines()) == 1
    assert main(["plan", "--from", str(SIM / "plan_mb4"), "--params", "7e9"]) == 2
    assert "come from the run" in capsys.readouterr().err
    assert main(["plan", "--params", "7e9", "--gpus", "8", "--gpu", "H100", "--seq", "4096",
                 "--tp", "2"]) == 2
    assert "error: plan: --tp needs --from RUN" in capsys.readouterr().err
    assert main(["plan", "--gpus", "8"]) == 2
    assert "--params, --gpu, --seq required" in capsys.readouterr().err
    assert main(["plan", "--from", "plan_mb4", "--db", str(sample_db), "--tp", "2", "--pp",
                 "4", "--dp", "2", "--gpus", "8"]) == 2
    assert "is not --gpus 8" in capsys.readouterr().err


def test_no_layout_names_the_rule_that_left_none(sample_db: Path) -> None:
    """plan_mb4: 8 sequences of 2 per micro-batch, 16 heads, 4 layers."""
    cal = _calibrated_in(sample_db, SIM / "plan_mb4")
    spec = json.loads((SIM / "plan_mb4" / "model.json").read_text())
    sequences = spec["global_batch_tokens"] / spec["seq_len"]
    seven = plan_from(cal, None, Constraints(gpus=7))
    assert seven.plans == () and seven.evaluated == 0 and seven.none_reason is not None
    assert f"global batch of {sequences:g} sequences" in seven.none_reason
    assert "micro-batches of 2" in seven.none_reason and seven.none_reason.endswith("DP 7")
    three = plan_from(cal, None, Constraints(tp=3)).none_reason
    assert three == "--tp 3 does not divide the 8 GPUs and the model's 16 attention heads"
    assert plan_from(cal, None, Constraints(gpus=16)).none_reason is None


def test_model_json_is_found_from_another_folder(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A run ingested by a relative path finds its model.json later from elsewhere: the
    sources are also looked up from the database file's folder."""
    work = tmp_path / "work"
    shutil.copytree(SIM / "plan_mb4", work / "plan_mb4")
    monkeypatch.chdir(work)
    stepscope.ingest_run("plan_mb4", db="stepscope.duckdb", run="plan_mb4")
    monkeypatch.chdir(tmp_path)
    with stepscope.open(work / "stepscope.duckdb") as store:
        found = find_spec(store.con, "plan_mb4")
    assert found is not None
    assert Path(found[1]).resolve() == (work / "plan_mb4" / "model.json").resolve()
    assert found[0] == load_spec(SIM / "plan_mb4" / "model.json")


def test_no_layout_fits_names_the_memory_it_needs(sample_db: Path) -> None:
    """plan_mb4 on GPUs of 0.1 GB: every layout is evaluated, none fits; none_reason holds
    the leanest layout's memory against the GPU's (the --from run's stderr line)."""
    cal = _calibrated_in(sample_db, SIM / "plan_mb4")
    tiny = msgspec.structs.replace(cal, memory=MemoryCalibration(
        measured_gb=1.0, measured_kind="reserved", rank=0, modelled_gb=1.0, scale=1.0,
        device_memory_gb=0.1))
    got = plan_from(tiny, None, Constraints())
    assert got.feasible == 0 and got.plans and got.none_reason is not None
    least = min(got.plans, key=lambda p: p.memory_gb)
    assert got.none_reason == (
        f"the leanest layout (TP {least.tp} x PP {least.pp} x DP {least.dp}, ZeRO "
        f"{least.zero}, {least.recompute} recompute) needs {least.memory_gb:.2g} GB per GPU; "
        "0.09 GB of the GPU's 0.1 GB are usable")
    assert "No layout fits: the leanest layout" in plan_markdown(got)


def test_an_expected_term_over_more_gpus_gives_both_times(sample_db: Path) -> None:
    """diff_base -> diff_scaled doubles the GPUs: TP's expected time halves per GPU (1.79 ->
    0.89 ms/step, the same GPU time in all). The narrative read "the same time, a smaller
    share of a longer step" of it (issue 45 point 7); it now gives both times and shares."""
    e = _expected(sample_db, "diff_base", "diff_scaled")
    (tp,) = [c for c in e.terms if c.term == "tp_comm"]
    assert tp.expected_ms == pytest.approx(tp.a_ms / 2, rel=1e-3)
    words = (f"TP communication {tp.expected_points:+.1f} (the same GPU time over 8 -> 16 GPUs: "
             f"{tp.a_ms:.2f} -> {tp.expected_ms:.2f} ms/step, ")
    assert words in e.narrative
    assert "TP communication +0.6 (the same time" not in e.narrative
