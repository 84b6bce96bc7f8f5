"""One rule for a run's model spec (analyzers/flops/run_spec.py): --model, else model.json
beside the run's traces, the same for the report, diff, nightly, the dashboard and the
planner (issue 45 point 8: Overview's advice said "no model spec (--model)" while Plan
was calibrated on the model.json beside the traces)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SIM

import stepscope
from stepscope.analyzers.builders import calibrate_run
from stepscope.analyzers.context import ReportOptions, run_context
from stepscope.analyzers.flops.model_spec import load_spec
from stepscope.analyzers.report import build_report
from stepscope.analyzers.results import to_json


def _hand_flops(model: Path) -> float:
    """PaLM's model FLOPs per step from the spec file: (6 N + 12 L h s) per token (full
    attention), times the tokens of a step; healthy: 704,643,072 x 65,536 = 4.618e13."""
    spec = load_spec(model)
    per_token = 6 * spec.n_params + 12 * spec.n_layers * spec.hidden * spec.seq_len
    return per_token * spec.global_batch_tokens


def test_the_report_uses_the_model_json_beside_the_traces(sample_db: Path) -> None:
    """Without --model the report's MFU comes from healthy's model.json (it came from the
    ops' FLOPs and the advice said "no model spec (--model)"): MFU = the spec's FLOPs per
    step / (step time x GPUs x peak) = 4.618e13 / (13.69 ms x 8 x 989.4 TFLOP/s) = 42.6%."""
    model = SIM / "healthy" / "model.json"
    with stepscope.open(sample_db) as store:
        ctx = run_context(store.con, "healthy")
        report = build_report(store.con, "healthy")
        given = build_report(store.con, "healthy", load_spec(model))
    assert ctx.spec == load_spec(model) and ctx.spec_source is not None
    assert Path(ctx.spec_source).resolve() == model.resolve()
    mfu = report.mfu
    assert mfu.flops_source == "spec"
    assert mfu.model_flops_per_step == pytest.approx(_hand_flops(model), rel=1e-12)
    assert mfu.model_flops_per_step == pytest.approx(4.6179488366592e13, rel=1e-12)
    assert mfu.peak_flops_per_gpu == pytest.approx(989.4e12)
    by_hand = _hand_flops(model) / (report.step_time_ms / 1e3 * 8 * 989.4e12)
    assert mfu.mfu == pytest.approx(by_hand, rel=1e-9)
    assert mfu.mfu == pytest.approx(0.4263, abs=5e-3)  # ground_truth.json: 0.42631
    assert to_json(report) == to_json(given)  # as if --model named that file


def test_the_advice_checks_memory_with_the_spec_plan_uses(sample_db: Path) -> None:
    """dp_exposed's ZeRO advice said "Memory check: no model spec (--model) ..." beside a
    Plan calibrated on its model.json; now it sizes the training state from that spec
    (ZeRO-0: 16 B x 50.3M / 2 parameters per model shard = 0.4 GB per GPU)."""
    with stepscope.open(sample_db) as store:
        report = build_report(store.con, "dp_exposed")
    (zero,) = [r for r in report.recommendations if r.id == "exposed-dp-comm"]
    assert "no model spec" not in zero.detail
    assert "Memory check (training state per GPU, before activations of 85.5 GB): " \
           "ZeRO-0 0.4 GB" in zero.detail


def test_given_model_wins_and_is_named(sample_db: Path) -> None:
    """--model names its own spec, even where another model.json lies beside the traces."""
    other = load_spec(SIM / "straggler" / "model.json")
    with stepscope.open(sample_db) as store:
        ctx = run_context(store.con, "deep_pipeline", ReportOptions(spec=other))
    assert ctx.spec == other and ctx.spec_source == "--model"


def test_the_planner_and_the_report_share_the_spec(sample_db: Path) -> None:
    """Plan's calibration names the file the report's context found."""
    with stepscope.open(sample_db) as store:
        built = calibrate_run(store.con, "plan_mb4")
        ctx = run_context(store.con, "plan_mb4")
    assert built.spec_source == ctx.spec_source
    assert ctx.spec_source is not None and ctx.spec_source.endswith("model.json")


def test_a_run_without_model_json_has_no_spec(sample_db: Path) -> None:
    """The CPU samples have no model.json beside them: no spec, and the memory advice still
    says how to give one."""
    with stepscope.open(sample_db) as store:
        ctx = run_context(store.con, "cpu-ddp")
    assert ctx.spec is None and ctx.spec_source is None


def test_overview_and_plan_pages_read_one_spec(sample_db: Path) -> None:
    """The dashboard's data layer: Overview's report of dp_exposed has its MFU from the
    model.json that Plan's calibration names, and its advice sizes ZeRO with it."""
    from stepscope.dashboard.app import data

    report = data.report(sample_db, "dp_exposed")
    cal, source = data.calibration(sample_db, "dp_exposed")
    assert cal is not None and source.endswith("model.json")
    assert report.mfu.flops_source == "spec"
    assert report.mfu.flops_from_spec == pytest.approx(
        _hand_flops(SIM / "dp_exposed" / "model.json"), rel=1e-12)
    assert not any("no model spec" in r.detail for r in report.recommendations)
