"""Kernels against their roofline (docs/roofline.md): shares of the compute and HBM roofs
per op kind and GEMM shape against the simulator's own kernels (moe_roofline: GEMMs,
attention and GELU at known shares), the kernel-efficiency stage split into parts that
add up to it, a GEMM held against the memory roof by hand, every real trace."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import SIM, kineto_trace, write_trace

import stepscope
from stepscope.analyzers.flops.peaks import lookup
from stepscope.analyzers.report import build_report
from stepscope.analyzers.results import Report, Roofline
from stepscope.dashboard.render.report import report_markdown


def report(db: Path, run: str) -> Report:
    with stepscope.open(db) as store:
        return build_report(store.con, run)


def truth(name: str) -> dict[str, Any]:
    return json.loads((SIM / name / "ground_truth.json").read_text())


def section(db: Path, run: str) -> Roofline:
    got = report(db, run).roofline
    assert got is not None
    return got


def test_kind_shares_match_the_simulated_kernels(sample_db: Path) -> None:
    got = {k.kind: k for k in section(sample_db, "moe_roofline").kinds}
    want = truth("moe_roofline")["roofline"]["kinds"]
    assert set(got) == set(want) == {"gemm", "attention", "elementwise"}
    for kind, t in want.items():
        row = got[kind]
        assert row.roof_share == pytest.approx(t["roof_share"], rel=0.02), kind
        assert row.gbs == pytest.approx(t["gbs"], rel=0.02), kind
        if t["tflops"]:
            assert row.tflops == pytest.approx(t["tflops"], rel=0.02), kind
    # the simulator's own efficiencies: GELU at 60% of HBM, forward attention at 35%
    assert got["elementwise"].bound == "memory"
    assert got["elementwise"].roof_share == pytest.approx(0.60, rel=0.02)
    assert got["gemm"].bound == got["attention"].bound == "compute"


def test_gemm_shapes_match_and_lose_the_most_first(sample_db: Path) -> None:
    shapes = section(sample_db, "moe_roofline").gemm_shapes
    want = truth("moe_roofline")["roofline"]["gemm_shapes"]
    assert len(shapes) == len(want) == 20
    for row in shapes:
        t = want[f"{row.m},{row.n},{row.k}"]
        assert row.roof_share == pytest.approx(t["roof_share"], rel=0.02)
        assert row.tflops == pytest.approx(t["tflops"], rel=0.02)
    lost = [r.lost_ms or 0.0 for r in shapes]
    assert lost == sorted(lost, reverse=True)
    # the simulator's efficiency by GEMM: fc1/fc2 (the experts) 41%, qkv 72%, proj 65%
    assert {round(r.roof_share or 0, 2) for r in shapes} == {0.41, 0.72, 0.65}


def test_kernel_efficiency_stage_split_into_named_ops(sample_db: Path) -> None:
    r = report(sample_db, "moe_roofline")
    assert r.roofline is not None
    parts = {p.name: p for p in r.roofline.kernel_efficiency}
    stage = next(w.points for w in r.mfu.waterfall if w.name == "kernel_efficiency")
    assert r.roofline.stage_points == stage
    assert sum(p.points for p in parts.values()) == pytest.approx(stage, abs=1e-9)
    t = truth("moe_roofline")["roofline"]
    assert stage == pytest.approx(t["stage_points"], abs=0.05)
    for kind in ("attention", "elementwise"):
        assert parts[kind].points == pytest.approx(t["kinds"][kind]["points"], abs=0.05)
    assert parts["unshaped"].points == pytest.approx(t["unshaped_points"], abs=0.05)
    # GEMM parts are weight shapes (N x K, any M): the truth's shapes grouped the same way
    by_weight: dict[str, float] = {}
    for key, row in t["gemm_shapes"].items():
        _, n, k = key.split(",")
        by_weight[f"{n}x{k}"] = by_weight.get(f"{n}x{k}", 0.0) + row["points"]
    gemm = [p for name, p in parts.items() if name.startswith("gemm:")]
    assert len(gemm) == 6
    for p in gemm:
        assert p.points == pytest.approx(by_weight[p.name.rsplit(":", 2)[1]], abs=0.05)
    named = {p.name.rsplit(":", 2)[1] for p in gemm}
    other = sum(v for w, v in by_weight.items() if w not in named)
    assert parts["gemm_other"].points == pytest.approx(other, abs=0.05)
    # the experts' fc1/fc2 lose the most, at 41% of the bf16 roof
    worst = min(gemm, key=lambda p: p.points)
    assert worst.roof_share == pytest.approx(0.41, rel=0.02)
    assert "at 41% of the bf16 roof" in worst.label
    assert "Kernel efficiency by op" in report_markdown(r)


def test_a_set_without_input_types_holds_gemms_against_their_peak(sample_db: Path) -> None:
    """healthy predates `Input type`: its GEMMs take the run's dtype (bf16, from the
    kernel names) and run at the simulator's efficiency of its own peak."""
    cfg = truth("healthy")["config"]
    got = {k.kind: k for k in section(sample_db, "healthy").kinds}
    table = lookup(cfg["device_name"]).tflops["bf16"]  # type: ignore[union-attr]
    share = cfg["efficiency"] * cfg["peak_tflops"] / table
    assert got["gemm"].dtype == "bf16"
    assert got["gemm"].roof_share == pytest.approx(share, rel=0.02)


def test_a_small_fp32_gemm_is_held_against_the_memory_roof(
        tmp_path: Path, make_run: Callable[..., Path]) -> None:
    """[64, 128] x [128, 256] fp32 in 200 us: 4.19 MFLOP over 229,376 bytes is 18.3
    FLOP/byte, under H100's fp32 ridge (66.9 TFLOP/s / 3,350 GB/s = 20)."""
    db = tmp_path / "s.duckdb"
    stepscope.ingest_run(make_run(world_size=1, steps=3), db=db, run="one")
    roof = section(db, "one")
    (gemm,) = [k for k in roof.kinds if k.kind == "gemm"]
    flops, nbytes = 2.0 * 64 * 128 * 256, 4.0 * (64 * 128 + 128 * 256 + 64 * 256)
    assert gemm.intensity == pytest.approx(flops / nbytes)
    assert gemm.bound == "memory"
    hbm = lookup("NVIDIA H100 80GB HBM3").hbm_gbs  # type: ignore[union-attr]
    assert gemm.gbs == pytest.approx(nbytes / 200e-6 / 1e9)
    assert gemm.roof_share == pytest.approx(nbytes / 200e-6 / 1e9 / hbm)


def test_without_shapes_it_says_so(tmp_path: Path) -> None:
    trace = kineto_trace(rank=0, world_size=1, steps=3)
    for e in trace["traceEvents"]:
        e.get("args", {}).pop("Input Dims", None)
    db = tmp_path / "s.duckdb"
    stepscope.ingest_run(write_trace(tmp_path / "t" / "rank0.json", trace), db=db, run="x")
    roof = section(db, "x")
    assert not roof.kinds and roof.message and "record_shapes=True" in roof.message


RESNET = Path("kineto/tb_plugin/samples/resnet50_num_workers_0")


def test_a_row_above_its_roof_is_flagged_not_shown() -> None:
    """Counted FLOPs above the peak (a Winograd convolution counted as the direct one)
    give no roof share and no lost time, never >100% or a negative loss; the claimed
    share is kept as `above_roof`. Just under the roof is an ordinary row."""
    from stepscope.analyzers.flops.roofline import Roofs, _row, _Sums, above_roof_reason

    roofs = Roofs(peaks={"fp32": 15.7e12}, default_peak=15.7e12, hbm=900e9, dtype="fp32")
    over = _row("conv", "conv", "fp32", _Sums(time_ns=1e6, flops=19.6e9, bytes=None,
                                              kernels=1), roofs, 1, 1e6)
    assert over.roof_share is None and over.lost_ms is None
    assert over.above_roof == pytest.approx(19.6 / 15.7)
    assert over.tflops == pytest.approx(19.6)
    assert above_roof_reason(over).startswith("FLOPs claimed above peak: algorithmic FLOPs, "
                                              "e.g. Winograd/FFT")
    under = _row("conv", "conv", "fp32", _Sums(time_ns=1e6, flops=15.0e9, bytes=None,
                                               kernels=1), roofs, 1, 1e6)
    assert under.above_roof is None and under.roof_share == pytest.approx(15.0 / 15.7)
    assert under.lost_ms == pytest.approx(1.0 * (1 - 15.0 / 15.7))


def test_winograd_convolutions_never_read_above_the_peak(real_traces: Path,
                                                         tmp_path: Path) -> None:
    """The 2021 V100 ResNet-50 trace: cuDNN's Winograd kernels execute fewer FLOPs than
    the direct convolution the op counts (19.6 TFLOP/s claimed against the 15.7 fp32
    peak). No row shows more than 100% or a negative lost time; the Winograd kernel and
    the convolutions are flagged with the reason, and the waterfall's parts still add up
    to the kernel-efficiency stage."""
    db = tmp_path / "r.duckdb"
    stepscope.ingest_run(real_traces / RESNET, db=db, run="resnet")
    rep = report(db, "resnet")
    roof = rep.roofline
    assert roof is not None and roof.peak_dtype == "fp32"
    rows = (*roof.kinds, *roof.kernels, *roof.gemm_shapes)
    for r in rows:
        assert r.roof_share is None or r.roof_share <= 1.0, r.name
        assert r.lost_ms is None or r.lost_ms >= 0.0, r.name
    flagged = {r.name: r for r in rows if r.above_roof is not None}
    winograd = [n for n in flagged if "winograd" in n]
    assert winograd and "convolutions (fp32)" in flagged
    assert flagged[winograd[0]].above_roof == pytest.approx(
        flagged[winograd[0]].tflops * 1e12 / roof.peak_flops_per_gpu)
    assert all(r.above_roof > 1.0 for r in flagged.values())
    assert roof.message and "algorithmic FLOPs, e.g. Winograd/FFT" in roof.message
    (conv,) = [p for p in roof.kernel_efficiency if p.name == "conv"]
    assert conv.roof_share is None and conv.above_roof and "Winograd/FFT" in conv.label
    assert sum(p.points for p in roof.kernel_efficiency) == pytest.approx(roof.stage_points,
                                                                          abs=1e-9)
    text = report_markdown(rep)
    assert "above peak (see note)" in text and "% of fp32 | -" not in text
    assert not [line for line in text.splitlines()
                if "of fp32" in line and any(f"{p}% of fp32" in line for p in range(101, 1000))]
