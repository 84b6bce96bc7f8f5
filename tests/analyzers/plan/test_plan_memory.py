"""`plan --from` calibrates its memory model on the run's traced peak (docs/planner.md,
"Calibrated on a run"): checked against the simulator's ground truth of moe_roofline
(the set with `[memory]` events) and against the formulas computed here by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import msgspec
import pytest

import stepscope
from stepscope.analyzers.context import ReportOptions, run_context
from stepscope.analyzers.flops.model_spec import load_spec
from stepscope.analyzers.plan.calibrate import calibrate
from stepscope.analyzers.plan.layouts import MEMORY_HEADROOM
from stepscope.analyzers.plan.predict import predict, target_of
from stepscope.analyzers.report import report_from_context
from stepscope.analyzers.results import Calibration
from stepscope.dashboard.render.plan import memory_line

SIM = Path(__file__).resolve().parents[3] / "sample_traces" / "simulated"


def _calibration(db: Path, name: str) -> Calibration:
    spec = load_spec(SIM / name / "model.json")
    with stepscope.open(db) as store:
        ctx = run_context(store.con, name, ReportOptions(spec=spec))
        return calibrate(ctx, report_from_context(ctx), spec, str(SIM / name / "model.json"))


@pytest.fixture(scope="module")
def moe(sample_db: Path) -> Calibration:
    return _calibration(sample_db, "moe_roofline")


def test_the_measured_peak_is_the_largest_reserved_peak_of_the_ground_truth(
        moe: Calibration) -> None:
    truth = json.loads((SIM / "moe_roofline" / "ground_truth.json").read_text())["memory"]
    rank, top = max(truth.items(), key=lambda kv: (kv[1]["peak_reserved"], -int(kv[0])))
    mem = moe.memory
    assert mem is not None
    assert mem.measured_kind == "reserved"
    assert mem.measured_gb == top["peak_reserved"] / 1e9
    assert mem.rank == int(rank)
    assert mem.device_memory_gb == 85520809984 / 1e9   # the traces' totalGlobalMem


def test_the_modelled_memory_is_the_formulas_at_the_runs_layout(moe: Calibration) -> None:
    mem, mdl = moe.memory, moe.model
    assert mem is not None and moe.zero == 0 and not moe.recompute
    state = 16.0 * mdl.params / (moe.tp * moe.pp)
    activations = (34.0 * mdl.seq * moe.micro_batch * mdl.hidden / moe.tp
                   * min(moe.pp, moe.microbatches) * math.ceil(mdl.layers / moe.pp))
    assert mem.modelled_gb == pytest.approx((state + activations) / 1e9, rel=1e-12)
    assert mem.scale == pytest.approx(mem.measured_gb / mem.modelled_gb, rel=1e-12)


def test_the_baseline_predicts_the_measured_peak_and_fits_on_the_traced_device(
        moe: Calibration) -> None:
    base = predict(moe, target_of(moe), 80.0)
    assert moe.memory is not None
    assert base.memory_gb == pytest.approx(moe.memory.measured_gb, rel=1e-12)
    assert base.state_gb + base.activation_gb == pytest.approx(moe.memory.modelled_gb,
                                                               rel=1e-12)
    assert base.fits


def test_the_fit_check_uses_the_measured_peak_not_the_formulas(moe: Calibration) -> None:
    """A device just too small for the measured peak (but large enough for the formulas'
    smaller estimate) does not fit; one just large enough does."""
    assert moe.memory is not None and moe.memory.scale > 1
    need = moe.memory.measured_gb / MEMORY_HEADROOM
    for device_gb, fits in ((need * 0.999, False), (need * 1.001, True)):
        mem = msgspec.structs.replace(moe.memory, device_memory_gb=device_gb)
        cal = msgspec.structs.replace(moe, memory=mem)
        assert predict(cal, target_of(cal), None).fits is fits
    formulas_only = msgspec.structs.replace(moe, memory=None)
    assert predict(formulas_only, target_of(moe), need * 0.999).fits


def test_without_memory_events_the_formulas_stand_alone(sample_db: Path) -> None:
    cal = _calibration(sample_db, "healthy")
    assert cal.memory is None
    base = predict(cal, target_of(cal), 80.0)
    assert base.memory_gb == base.state_gb + base.activation_gb
    assert "traced no memory" in memory_line(cal)


def test_the_markdown_names_the_peak_and_the_scale(moe: Calibration) -> None:
    assert memory_line(moe) == (
        "- memory: measured peak 1.04 GB reserved (rank 2) of 85.5 GB on the device, the "
        "formulas give 0.95 GB at this layout: every layout's memory x 1.1")
