"""MFU / HFU: formulas, peak table, trace FLOPs, waterfall, against simulated truth."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from conftest import REPO, real_trace_files

import stepscope
from stepscope.analyzers.flops.mfu import flops_per_token, waterfall
from stepscope.analyzers.flops.model_spec import load_spec, spec_from_mapping
from stepscope.analyzers.flops.peaks import lookup, table
from stepscope.analyzers.report import build_report
from stepscope.analyzers.results import Breakdown, to_builtins
from stepscope.cli import main
from stepscope.ingest import UsageError

SIM = REPO / "sample_traces" / "simulated"


@pytest.fixture
def db(sample_db: Path) -> Path:
    """The session's database of every bundled run (conftest.sample_db)."""
    return sample_db


def mfu(db: Path, run: str, **kwargs: object) -> dict:
    with stepscope.open(db) as store:
        return to_builtins(build_report(store.con, run, **kwargs))["mfu"]  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["healthy", "recompute", "recompute_reentrant",
                                  "deep_pipeline", "straggler"])
def test_mfu_and_hfu_match_simulated_truth(db: Path, name: str) -> None:
    truth = json.loads((SIM / name / "ground_truth.json").read_text())["mfu"]
    got = mfu(db, name)  # the set's model.json is found beside its traces
    assert got["flops_source"] == "spec" and got["device"] == "NVIDIA H100 SXM5"
    assert got["mfu"] == pytest.approx(truth["mfu"], rel=0.01)
    assert got["hfu"] == pytest.approx(truth["hfu"], rel=0.01)
    assert got["model_flops_per_step"] == pytest.approx(truth["model_flops_per_step"], rel=1e-9)
    # the FLOPs counted on the traced ops are the simulator's too
    assert got["flops_from_trace"] == pytest.approx(truth["model_flops_per_step"], rel=1e-9)
    assert got["flops_sources_ratio"] == pytest.approx(1.0, rel=1e-9)
    assert mfu(db, name, spec=load_spec(SIM / name / "model.json")) == got


@pytest.mark.parametrize("name,ranks,traced", [("healthy", "0-1", 2), ("recompute", "3", 1)])
def test_mfu_of_some_ranks_is_that_of_the_traced_gpus(tmp_path: Path, name: str,
                                                      ranks: str, traced: int) -> None:
    """With only some of the job's ranks ingested (--ranks; one rank's trace; files that
    could not be read) the FLOPs counted on them are scaled to the world size, so MFU is
    the traced GPUs' own (it was divided by every rank of the job: 2 of 8 read 10.5%
    for 42.6%), the FLOPs per step the job's, and a note says so."""
    truth = json.loads((SIM / name / "ground_truth.json").read_text())["mfu"]
    db = tmp_path / "some.duckdb"
    traces = tmp_path / name  # without model.json beside them: the FLOPs are counted
    shutil.copytree(SIM / name, traces, ignore=shutil.ignore_patterns("model.json"))
    stepscope.ingest_run([traces], db=db, run="some", ranks=ranks)
    got = mfu(db, "some")
    assert got["mfu"] == pytest.approx(truth["mfu"], rel=0.03)
    assert got["hfu"] == pytest.approx(truth["hfu"], rel=0.03)
    assert got["model_flops_per_step"] == pytest.approx(truth["model_flops_per_step"],
                                                        rel=1e-9)
    assert f"counted on the {traced} traced rank(s) of 8 and scaled" in got["message"]
    with_spec = mfu(db, "some", spec=load_spec(SIM / name / "model.json"))
    assert with_spec["flops_sources_ratio"] == pytest.approx(1.0, rel=1e-9)


def test_recompute_counts_for_hfu_only(db: Path) -> None:
    got = mfu(db, "recompute")
    assert got["hfu"] > got["mfu"] * 1.2
    assert got["recompute_flops_per_step"] > 0
    plain = mfu(db, "healthy")
    assert plain["recompute_flops_per_step"] == 0


@pytest.mark.parametrize("run", ["healthy", "recompute", "straggler"])
def test_waterfall_adds_up_to_mfu(db: Path, run: str) -> None:
    got = mfu(db, run)
    names = [w["name"] for w in got["waterfall"]]
    assert names == ["kernel_efficiency", "recompute", "exposed_comm", "straggler_wait",
                     "bubble", "memory", "idle"]
    assert 100 + sum(w["points"] for w in got["waterfall"]) == pytest.approx(
        100 * got["mfu"], abs=1e-9)
    assert all(w["points"] <= 0 for w in got["waterfall"])


def test_waterfall_by_hand() -> None:
    # F/(P*T_c) = 0.5; compute 6 of a 10 ms step: MFU = 0.5 * 0.6 = 0.3
    breakdown = Breakdown(compute=6.0, recompute=1.0, exposed_comm=2.0, straggler_wait=0.0,
                          bubble=0.5, memory=0.0, idle=0.5)
    steps = {w.name: w.points for w in waterfall(0.5, breakdown, 10.0)}
    assert steps["kernel_efficiency"] == pytest.approx(-50.0)
    assert steps["exposed_comm"] == pytest.approx(-10.0)
    assert steps["recompute"] == pytest.approx(-5.0)
    assert 100 + sum(steps.values()) == pytest.approx(30.0)


def test_palm_540b_formula() -> None:
    # PaLM App. B: 6N + 12 L H Q T with L=118, H=48, Q=256, T=2048
    spec = spec_from_mapping({"n_params": 540e9, "n_layers": 118, "hidden": 48 * 256,
                              "seq_len": 2048, "global_batch_tokens": 1})
    assert flops_per_token(spec) == pytest.approx(6 * 540e9 + 12 * 118 * 48 * 256 * 2048)
    causal = spec_from_mapping({**spec.__dict__, "attention": "causal"})
    assert flops_per_token(causal) == pytest.approx(6 * 540e9 + 6 * 118 * 48 * 256 * 2048)


def test_megatron_and_torchtitan_and_moe() -> None:
    base = {"n_params": 1e9, "n_layers": 24, "hidden": 2048, "seq_len": 4096,
            "global_batch_tokens": 1e6}
    mega = spec_from_mapping({**base, "convention": "megatron", "vocab": 50304})
    L, h, s, V = 24, 2048, 4096, 50304
    assert flops_per_token(mega) == pytest.approx(
        72 * L * h * h * (1 + s / (6 * h) + V / (12 * L * h)))
    titan = spec_from_mapping({**base, "convention": "torchtitan", "attention": "causal"})
    assert flops_per_token(titan) == pytest.approx(6e9 + 12 * L * h * s)  # never halved
    moe = spec_from_mapping({**base, "n_params": 671e9, "n_active_params": 37e9})
    assert flops_per_token(moe) == pytest.approx(6 * 37e9 + 12 * L * h * s)


def test_spec_errors_name_the_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "m.json"
    bad.write_text(json.dumps({"n_params": 1}))
    with pytest.raises(UsageError, match=r"m.json: missing field\(s\) n_layers, hidden"):
        load_spec(bad)
    bad.write_text("{not json")
    with pytest.raises(UsageError, match="m.json: not valid JSON"):
        load_spec(bad)
    yml = tmp_path / "m.yaml"
    yml.write_text("n_params: 7e9\nn_layers: 32\nhidden: 4096\nseq_len: 4096\n"
                   "global_batch_tokens: 4194304\nconvention: nope\n")
    with pytest.raises(UsageError, match="convention must be one of palm, megatron"):
        load_spec(yml)


EXPECTED_DEVICES = {
    "NVIDIA A100-PG509-200": "A100-SXM", "NVIDIA A100-SXM4-80GB": "A100-SXM",
    "NVIDIA B200": "B200", "AMD Instinct MI300X": "MI300X",
    "Tesla V100-SXM2-32GB": "V100-SXM2", "Tesla V100-SXM2-16GB": "V100-SXM2",
    "Tesla V100-DGXS-32GB": "V100-SXM2", "AMD Radeon Graphics": "MI250-GCD",
    "NVIDIA H100 80GB HBM3": "H100-SXM",
}


@pytest.mark.slow
def test_every_device_in_the_bundled_and_shared_traces_is_known() -> None:
    names: dict[str, dict] = {}
    files = real_trace_files() + sorted((SIM).rglob("rank0.json.gz"))
    for f in files:
        doc = json.loads(gzip.open(f).read())
        for props in doc.get("deviceProperties", []):
            names[props["name"]] = props
    for name, props in names.items():
        entry = lookup(name, props)
        assert entry is not None, name
        assert entry.id == EXPECTED_DEVICES[name], name


@pytest.mark.parametrize("name,device_id", [
    ("NVIDIA H100 PCIe", "H100-PCIe"), ("NVIDIA H100 NVL", "H100-NVL"),
    ("NVIDIA H200", "H200-SXM"), ("NVIDIA H200 NVL", "H200-NVL"), ("NVIDIA H800", "H800"),
    ("NVIDIA H20", "H20"), ("NVIDIA GB200", "GB200"), ("NVIDIA B300 SXM6 AC", "B300"),
    ("NVIDIA L40S", "L40S"), ("NVIDIA L4", "L4"), ("NVIDIA A100-PCIE-40GB", "A100-PCIe"),
    ("AMD Instinct MI250X", "MI250X-GCD"), ("AMD Instinct MI325X", "MI325X"),
    ("AMD Instinct MI355X", "MI355X"),
])
def test_variants_are_told_apart(name: str, device_id: str) -> None:
    entry = lookup(name)
    assert entry is not None and entry.id == device_id


def test_table_has_provenance_and_dense_peaks() -> None:
    t = table()
    assert t.version
    for d in t.devices:
        assert d.source and d.confidence in ("H", "M", "L")
    h100 = lookup("NVIDIA H100 80GB HBM3")
    assert h100 is not None and h100.flops("bf16") == 989.4e12  # dense, not 1979 (sparse)
    assert h100.flops("tf32") == 494.7e12


def test_unknown_device_gives_no_mfu(db: Path) -> None:
    got = mfu(db, "cpu-ddp")
    assert got["mfu"] is None
    assert "unknown device 'CPU only'" in got["message"] and "--peak-tflops" in got["message"]
    forced = mfu(db, "cpu-ddp", peak_tflops=1.0)
    assert forced["mfu"] is not None and 0 < forced["mfu"] < 1
    assert forced["flops_source"] == "trace"


def test_dtype_without_peak_asks_for_another(db: Path) -> None:
    got = mfu(db, "healthy", dtype="fp8")
    assert got["peak_flops_per_gpu"] == 1978.9e12
    assert lookup("Tesla V100-SXM2-32GB").flops("bf16") is None  # type: ignore[union-attr]
    # a V100 has no bf16 peak: no MFU, and the message names the peak, why, and the fix
    v100 = mfu(db, "fp32_v100", dtype="bf16")
    assert v100["mfu"] is None and v100["peak_flops_per_gpu"] is None
    assert v100["message"] == ("NVIDIA V100 SXM2 has no bf16 peak (bf16 from --dtype: bf16 "
                               "peak); pass --dtype (e.g. fp16) or --peak-tflops")
    fixed = mfu(db, "fp32_v100", dtype="fp16")
    assert fixed["mfu"] is not None and fixed["message"] is None


@pytest.mark.slow
def test_cli_report_with_yaml_spec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = json.loads((SIM / "healthy" / "model.json").read_text())
    yml = tmp_path / "model.yaml"
    yml.write_text("".join(f"{k}: {v}\n" for k, v in spec.items()))
    assert main(["report", str(SIM / "healthy"), "--model", str(yml), "--format", "json"]) == 0
    got = json.loads(capsys.readouterr().out)["mfu"]
    assert got["flops_source"] == "spec" and got["flops_sources_ratio"] == pytest.approx(1.0)
    assert main(["report", str(SIM / "healthy"), "--model", str(tmp_path / "none.json")]) == 2
    assert "none.json: --model: no such file" in capsys.readouterr().err


NQL = Path("HolisticTraceAnalysis/tests/data/negative_queue_length_values_check")


def test_mfu_and_roofline_name_the_same_peak(real_traces: Path, tmp_path: Path) -> None:
    """An A100 trace of fp32 ops whose GEMMs ran TF32 kernels: MFU uses the TF32 peak,
    and both its headline and the roofline's say "156.0 TFLOP/s tf32" (the MFU headline
    said fp32), in Markdown and HTML."""
    from stepscope.dashboard.render.html_report import report_html
    from stepscope.dashboard.render.report import report_markdown

    db = tmp_path / "q.duckdb"
    stepscope.ingest_run(real_traces / NQL, db=db, run="nql")
    with stepscope.open(db) as store:
        rep = build_report(store.con, "nql")
    assert (rep.mfu.dtype, rep.mfu.peak_dtype) == ("fp32", "tf32")
    assert rep.roofline is not None and rep.roofline.peak_dtype == "tf32"
    peak = f"{rep.mfu.peak_flops_per_gpu / 1e12:.1f} TFLOP/s"
    md, html = report_markdown(rep), report_html(rep)
    for text in (md, html):
        assert f"{peak} tf32 per GPU" in text
        assert f"{peak} tf32, HBM" in text
        assert f"{peak} fp32" not in text


def test_fp32_rows_of_a_tf32_run_are_held_against_tf32() -> None:
    """The roofline's fp32 rows take the TF32 peak when the MFU's is TF32, and say so."""
    from stepscope.analyzers.flops.peaks import peak_label, roof_dtype
    from stepscope.analyzers.results import Roofline, RoofRow
    from stepscope.dashboard.render.blocks import markdown
    from stepscope.dashboard.render.roofline import roofline_block

    assert roof_dtype("fp32", "tf32") == "tf32" and roof_dtype("bf16", "tf32") == "bf16"
    assert roof_dtype("fp32", "fp32") == "fp32" and peak_label(None, "fp32") == "fp32"
    row = RoofRow(name="GEMMs (fp32)", kind="gemm", dtype="fp32", time_ms=1.0,
                  time_share=1.0, kernels_per_step=1.0, tflops=78.0, gbs=None,
                  intensity=None, bound="compute", roof_share=0.5, lost_ms=0.5)
    section = Roofline(device="NVIDIA A100 SXM4", peak_table_version="x",
                       peak_flops_per_gpu=156e12, peak_dtype="tf32", kinds=(row,))
    text = "\n".join(markdown(roofline_block(section)))
    assert "| 50% of tf32 |" in text and "of fp32" not in text
    assert "156.0 TFLOP/s tf32" in text
