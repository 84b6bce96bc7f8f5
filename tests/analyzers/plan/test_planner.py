"""Planner: the standard formulas, and the published layouts among the top predictions."""

from __future__ import annotations

import json

import pytest

from stepscope.analyzers.flops.peaks import lookup
from stepscope.analyzers.plan.layouts import Job, bubble_theory, evaluate, plan, rank_of
from stepscope.cli import main
from stepscope.ingest.exit_codes import EXIT_NOTHING

H100 = lookup("NVIDIA H100 80GB HBM3")
LLAMA_405B = dict(params=405e9, gpus_per_node=8, seq=8192, global_batch_tokens=16 * 2**20,
                  layers=126, hidden=16384, heads=128)
LLAMA_70B = dict(params=70e9, gpus=1024, gpus_per_node=8, seq=8192,
                 global_batch_tokens=4 * 2**20, layers=80, hidden=8192, heads=64)


def test_bubble_formula() -> None:
    assert bubble_theory(4, 4) == pytest.approx(3 / 7)
    assert bubble_theory(1, 8) == 0
    assert bubble_theory(2, 19) == pytest.approx(0.05)


def test_memory_formulas() -> None:
    job = Job(**LLAMA_70B)
    assert H100 is not None
    z0 = evaluate(job, H100, tp=8, pp=4, zero=0)
    z1 = evaluate(job, H100, tp=8, pp=4, zero=1)
    assert z0 is not None and z1 is not None
    shard = 70e9 / 32
    assert z0.state_gb == pytest.approx(16 * shard / 1e9)
    assert z1.state_gb == pytest.approx((4 + 12 / 32) * shard / 1e9)
    # activations: 34*s*b*h/TP per layer, L/PP layers, PP microbatches in flight (1F1B)
    assert z0.activation_gb == pytest.approx(34 * 8192 * 8192 / 8 * 20 * 4 / 1e9)
    z3 = evaluate(job, H100, tp=8, pp=4, zero=3)
    assert z3 is not None and z3.dp_comm_ms == pytest.approx(1.5 * z0.dp_comm_ms)
    # ring all-reduce of the bf16 gradients: 2(N-1)/N * bytes over the network
    assert z0.dp_comm_ms == pytest.approx(2 * 31 / 32 * 2 * shard / 50e9 * 1e3)
    assert z0.dp_link == "network" and z0.tp_link == "nvlink"


def test_tp_beyond_the_node_uses_the_network() -> None:
    job = Job(**LLAMA_70B)
    assert H100 is not None
    inside = evaluate(job, H100, tp=8, pp=4, zero=1)
    across = evaluate(job, H100, tp=16, pp=2, zero=1)
    assert inside is not None and across is not None
    assert across.tp_link == "network" and across.tp_comm_ms > 5 * inside.tp_comm_ms


@pytest.mark.parametrize("gpus,layout", [(16384, (8, 16, 128)), (8192, (8, 16, 64))])
def test_llama3_405b_layout_is_near_the_top(gpus: int, layout: tuple[int, int, int]) -> None:
    assert H100 is not None
    plans = plan(Job(gpus=gpus, **LLAMA_405B), H100)
    rank = rank_of(plans, *layout)
    assert rank is not None and rank <= 5
    best = plans[0].mfu
    ref = next(p for p in plans if (p.tp, p.pp, p.dp) == layout)
    assert best - ref.mfu < 0.03  # within 3 MFU points of the best prediction
    assert all(p.tp <= 8 for p in plans[:5])  # TP stays inside the NVLink domain


def test_llama3_70b_layout_is_near_the_top() -> None:
    assert H100 is not None
    plans = plan(Job(**LLAMA_70B), H100)
    rank = rank_of(plans, 8, 4, 32)
    assert rank is not None and rank <= 8
    ref = next(p for p in plans if (p.tp, p.pp, p.dp) == (8, 4, 32))
    assert ref.fits and plans[0].mfu - ref.mfu < 0.03


def test_plan_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--params", "70e9", "--gpus", "1024", "--gpu", "H100",
                 "--gpus-per-node", "8", "--seq", "8192", "--format", "json", "--top", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["device"] == "NVIDIA H100 SXM5" and len(out["plans"]) == 3
    assert out["plans"][0]["mfu"] >= out["plans"][1]["mfu"] >= out["plans"][2]["mfu"]
    assert main(["plan", "--params", "7e9", "--gpus", "8", "--gpu", "TPU9000",
                 "--seq", "4096"]) == 2
    assert "--gpu TPU9000: not in the peak table" in capsys.readouterr().err


def test_plan_uses_the_dtype_the_device_has(capsys: pytest.CaptureFixture[str]) -> None:
    """V100 has no bf16 peak: the plan uses fp16 and says so; asking for bf16 is one line."""
    args = ["plan", "--params", "1e9", "--gpus", "8", "--gpu", "V100-SXM2", "--seq", "2048"]
    assert main([*args, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["dtype"] == "fp16" and "no bf16 peak" in out["dtype_reason"]
    assert out["plans"] and all(0 < p["mfu"] < 1 for p in out["plans"])
    assert main([*args, "--dtype", "fp32", "--format", "json"]) == 0
    fp32 = json.loads(capsys.readouterr().out)
    assert fp32["dtype"] == "fp32" and fp32["dtype_reason"] is None
    # the same work at the 8x lower fp32 peak takes longer
    assert fp32["plans"][0]["step_ms"] > out["plans"][0]["step_ms"]
    assert main([*args, "--dtype", "bf16"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no bf16 peak" in err and "--dtype fp16 or fp32" in err


def test_no_layout_fits_says_why_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """400B parameters on 8 H100s: 16 bytes of training state per parameter over 8 GPUs is
    800 GB per GPU whatever the layout. The plan exits 1 (EXIT_NOTHING) with one line: the
    leanest layout's memory against the GPU's, and the GPU count (doubling) that fits."""
    args = ["plan", "--params", "400e9", "--gpu", "H100", "--seq", "4096"]
    assert main([*args, "--gpus", "8"]) == EXIT_NOTHING
    captured = capsys.readouterr()
    assert captured.err == (
        "error: plan: no layout fits on 8 NVIDIA H100 SXM5: the leanest layout (TP 8 x PP 1 "
        "x DP 1, ZeRO 3, full recompute) needs 802 GB per GPU; 72 GB of the GPU's 80 GB are "
        "usable; 128 GPUs would fit (TP 2 x PP 32 x DP 2, ZeRO 2, full recompute), or a GPU "
        "with more memory\n")
    assert "- no layout fits: the leanest layout (TP 8 x PP 1 x DP 1" in captured.out
    # the GPU count named is the first doubling that fits
    assert main([*args, "--gpus", "64", "--format", "json"]) == EXIT_NOTHING
    assert json.loads(capsys.readouterr().out)["feasible"] == 0
    assert main([*args, "--gpus", "128", "--format", "json"]) == 0
    best = json.loads(capsys.readouterr().out)["plans"][0]
    assert (best["tp"], best["pp"], best["dp"], best["zero"]) == (2, 32, 2, 2)


def test_the_readme_example_derives_64_heads_and_keeps_tp8(
        capsys: pytest.CaptureFixture[str]) -> None:
    """`plan --params 70e9 --gpus 1024 --gpu H100 --gpus-per-node 8 --seq 8192` derived
    68 heads (hidden 8704) and silently left out every TP 8 layout; Llama 2 70B has
    hidden 8192 and 64 heads. And no layout has more pipeline chunks than layers (PP 32 x
    v 3 = 96 chunks for 78 layers was ranked)."""
    assert main(["plan", "--params", "70e9", "--gpus", "1024", "--gpu", "H100",
                 "--gpus-per-node", "8", "--seq", "8192", "--format", "json",
                 "--top", "1000"]) == 0
    out = json.loads(capsys.readouterr().out)
    model = out["job"]
    assert (model["layers"], model["hidden"], model["heads"]) == (78, 8192, 64)
    assert 12 * 78 * 8192**2 == pytest.approx(70e9, rel=0.12)
    assert any(p["tp"] == 8 for p in out["plans"])
    assert all(p["pp"] * p["interleave"] <= 78 for p in out["plans"])
