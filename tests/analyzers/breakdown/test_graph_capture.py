"""Steps that capture a CUDA/HIP graph (issue 40, point 4; docs/attribution.md, "Graph
captures"): between a stream begin-capture and end-capture call, kernel launches are
recorded into the graph, not run. Such a step is timed on the host (its CPU step,
window_source 'capture'), says so in a note with the launches recorded, is left out of
the means where its rank has other complete steps, and its ops give no FLOPs.

Checked on AMD-AGI/TraceLens's real SGLang decode capture (tests/data/AMD-AGI_TraceLens,
MI300X: before, "a 0.011 ms step, 100% compute" and an MFU check refusing 3.36e+03%)
against the raw events read here, and on a hand-built trace whose expected values are
written out below."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, kineto_trace, q, write_trace

import stepscope
from stepscope.analyzers.report import build_report

SGLANG = (REPO / "tests/data/AMD-AGI_TraceLens/tests/traces/inference/sglang_decode"
          / "capture_traces/bs_32_rank0.json.gz")


def _raw(path: Path) -> dict[str, Any]:
    """The raw facts of the capture trace: the step's duration, the kernels that ran and
    the launch calls inside the capture with no kernel (µs)."""
    events = json.load(gzip.open(path))["traceEvents"]
    step = next(e for e in events if str(e.get("name", "")).startswith("ProfilerStep#"))
    runtime = [e for e in events if e.get("cat") == "cuda_runtime"]
    begin = next(e for e in runtime if e["name"] == "hipStreamBeginCapture")
    end = next(e for e in runtime if e["name"] == "hipStreamEndCapture")
    kernels = [e for e in events if e.get("cat") == "kernel"]
    ran = {k["args"]["correlation"] for k in kernels}
    recorded = [e for e in runtime if "LaunchKernel" in e["name"]
                and begin["ts"] <= e["ts"] <= end["ts"] + end["dur"]
                and e["args"].get("correlation") not in ran]
    return {"step_us": step["dur"], "kernel_us": sum(k["dur"] for k in kernels),
            "recorded": len(recorded)}


@pytest.fixture(scope="module")
def sglang_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("sglang")
    (folder / "t").mkdir()
    (folder / "t" / SGLANG.name).write_bytes(SGLANG.read_bytes())
    db = folder / "sg.duckdb"
    stepscope.ingest_run(folder / "t", db=db, run="sg")
    return db


def test_real_capture_step_is_timed_on_the_host(sglang_db: Path) -> None:
    raw = _raw(SGLANG)
    assert raw["recorded"] == 544 and raw["kernel_us"] == pytest.approx(11.015)
    with stepscope.open(sglang_db) as store:
        report = build_report(store.con, "sg")
    (source, step_ns, compute_ns), = q(sglang_db, "SELECT window_source, step_ns, compute_ns "
                                                  "FROM step_attribution WHERE run = 'sg'")
    assert source == "capture"
    # before: 0.011 ms, 100% compute (the window of the two fill kernels)
    assert report.step_time_ms == pytest.approx(raw["step_us"] / 1e3, abs=1e-6)  # 33.717
    assert step_ns / 1e3 == pytest.approx(raw["step_us"], abs=1e-3)
    assert report.breakdown_ms.compute == pytest.approx(raw["kernel_us"] / 1e3, abs=1e-6)
    assert compute_ns / step_ns < 0.001
    note = next(n for n in report.notes if "capture a CUDA/HIP graph" in n)
    assert f"{raw['recorded']} kernel launches were recorded into the graph, not run" in note
    # before: "MFU would be 3.36e+03% ... above 100% of the peak"
    assert report.mfu.mfu is None and report.mfu.message is not None
    assert "ran inside CUDA/HIP graph captures" in report.mfu.message
    assert "above 100%" not in report.mfu.message


# ------------------------------------------------------------------ hand-built: capture, replays
CAPTURED_MM = 2.0 * 1024 * 1024 * 1024   # the op recorded into the graph
STEP_MM = 2.0 * 64 * 128 * 256           # kineto_trace's own aten::mm in every step


def _capture_events() -> list[dict[str, Any]]:
    """In step 1 (1000-1900 µs of kineto_trace's steps): a capture from 1400 to 1470 µs on
    thread 100 holding an aten::mm with shapes and one launch that runs nothing."""
    def rt(name: str, ts: float, corr: int) -> dict[str, Any]:
        return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 100, "tid": 100,
                "ts": ts, "dur": 5.0, "args": {"correlation": corr}}
    return [
        rt("cudaStreamBeginCapture", 1400.0, 9001),
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 100, "tid": 100,
         "ts": 1410.0, "dur": 40.0,
         "args": {"External id": 9000, "Input Dims": [[1024, 1024], [1024, 1024]],
                  "Input type": ["c10::BFloat16", "c10::BFloat16"]}},
        rt("cudaLaunchKernel", 1420.0, 9002),
        rt("cudaStreamEndCapture", 1465.0, 9003),
        rt("cudaGraphInstantiate", 1480.0, 9004),
    ]


def test_capture_step_is_not_a_step_of_the_work(tmp_path: Path) -> None:
    trace = kineto_trace(rank=0, world_size=1, steps=4, extra_events=_capture_events())
    write_trace(tmp_path / "t" / "rank0.json.gz", trace)
    db = tmp_path / "t.duckdb"
    stepscope.ingest_run(tmp_path / "t", db=db, run="r")
    rows = q(db, "SELECT step, window_source, window_start_ns, window_end_ns "
                 "FROM step_attribution WHERE run = 'r' ORDER BY step")
    base = rows[1][2] - 2_030_000   # the trace's origin: step 2's first kernel is at 2030 µs
    assert rows[0][1] == "capture"
    assert (rows[0][2] - base, rows[0][3] - base) == (1_000_000, 1_900_000)  # the CPU step
    assert [r[1] for r in rows[1:]] == ["gpu"] * 3
    # before: steps 1, 2, 3 (the capture step had a successor)
    assert q(db, "SELECT list(step ORDER BY step) FROM complete_steps WHERE run = 'r'") \
        == [([2, 3],)]
    with stepscope.open(db) as store:
        report = build_report(store.con, "r")
    assert report.step_time_ms == pytest.approx(1.0)      # 2030 -> 3030 -> 4030 µs
    # before: the captured mm counted (2.1e9 FLOPs in step 1)
    assert report.mfu.flops_from_trace == pytest.approx(STEP_MM)
    note = next(n for n in report.notes if "capture a CUDA/HIP graph" in n)
    assert note.startswith("1 rank step(s) capture") and "1 kernel launches were recorded" \
        in note


VLLM_CAPTURE = (REPO / "tests/data/AMD-AGI_TraceLens/tests/traces/inference/vllm_decode_full"
                / "capture_traces/graph_capture_rank_0.1773709742341309550.pt.trace.json.gz")


def test_real_vllm_capture_without_steps(tmp_path: Path) -> None:
    """vLLM capturing its full decode graph on MI300X (AMD-AGI/TraceLens): no ProfilerStep,
    so the whole window is the one step; 421 kernel launches between hipStreamBeginCapture
    and hipStreamEndCapture with no kernel (by hand from the raw events), 7 kernels that
    ran. The window is timed on the host, the note counts the launches recorded, the MFU
    names the captured ops, and the unnamed GPU ("" in deviceProperties) is the MI300X."""
    events = json.load(gzip.open(VLLM_CAPTURE))["traceEvents"]
    runtime = [e for e in events if e.get("cat") == "cuda_runtime"]
    begin = next(e for e in runtime if e["name"] == "hipStreamBeginCapture")
    end = next(e for e in runtime if e["name"] == "hipStreamEndCapture")
    ran = {k["args"]["correlation"] for k in events if k.get("cat") == "kernel"}
    recorded = [e for e in runtime if "LaunchKernel" in e["name"] and e["tid"] == begin["tid"]
                and begin["ts"] <= e["ts"] <= end["ts"] + end["dur"]
                and e["args"].get("correlation") not in ran]
    assert len(recorded) == 421 and len(ran) == 7
    db = tmp_path / "v.duckdb"
    stepscope.ingest_run([VLLM_CAPTURE], db=db, run="v")
    with stepscope.open(db) as store:
        report = build_report(store.con, "v")
    assert q(db, "SELECT step_source FROM ranks") == [("whole_window",)]
    assert q(db, "SELECT window_source FROM step_attribution") == [("capture",)]
    note = next(n for n in report.notes if "capture a CUDA/HIP graph" in n)
    assert "421 kernel launches were recorded into the graph, not run" in note
    assert report.mfu.mfu is None and "ran inside CUDA/HIP graph captures" in (
        report.mfu.message or "")
    assert report.mfu.device == "AMD Instinct MI300X"


def test_replays_of_a_capture_are_named_not_linked(tmp_path: Path) -> None:
    """A capture (step 1) and a cudaGraphLaunch (step 2) in one trace, neither naming a graph
    id: the replay's ops are not guessed from the capture (issue 40, point 2), and the MFU
    headline says so. Before: "MFU x%" bare, as if the step's FLOPs were all counted."""
    launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": 100,
              "tid": 100, "ts": 2500.0, "dur": 5.0, "args": {"correlation": 9010}}
    trace = kineto_trace(rank=0, world_size=1, steps=4,
                         extra_events=[*_capture_events(), launch])
    write_trace(tmp_path / "t" / "rank0.json.gz", trace)
    db = tmp_path / "t.duckdb"
    stepscope.ingest_run(tmp_path / "t", db=db, run="r")
    with stepscope.open(db) as store:
        mfu = build_report(store.con, "r").mfu
    assert mfu.flops_from_trace == pytest.approx(STEP_MM)  # the captured mm is not counted
    assert mfu.headline is not None and mfu.headline.endswith(
        "; replays of a captured graph: shapes not linked (1 CUDA/HIP graph launch(es) ran "
        "ops the profiler records only at capture; the trace's 1 graph capture(s) name no "
        "graph id to match a replay to)")
