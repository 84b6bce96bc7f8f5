"""Devices without names, profiler settings already on (issue 40, point 5), on the real
AMD-AGI/TraceLens inference traces (tests/data/AMD-AGI_TraceLens/PROVENANCE.md) and
hand-built ones.

vLLM names every device "" in deviceProperties: the MFU said "the traces do not name the
GPU ... pass --peak-tflops" although its properties (compute capability 9.4, 304 CUs,
192 GiB) are an MI300X's. Both vLLM and SGLang traces record profile_memory=1 at their
top level, yet the report said "profile with profile_memory=True": vLLM's holds no
`[memory]` event at all, and SGLang's 1,014 were written with c10 Device Type 6 (HIP) and
ignored (the memory timeline read only type 1, CUDA)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, kineto_trace, q, write_trace

import stepscope
from stepscope.analyzers.flops.mfu import NO_FLOPS
from stepscope.analyzers.flops.peaks import lookup
from stepscope.analyzers.report import build_report
from stepscope.analyzers.results import Report
from stepscope.dashboard.render.report import report_markdown

INFERENCE = REPO / "tests" / "data" / "AMD-AGI_TraceLens" / "tests" / "traces" / "inference"
VLLM = INFERENCE / "vllm_decode_full" / "graph_execution.json.gz"
SGLANG = INFERENCE / "sglang_decode" / "capture_traces" / "bs_32_rank0.json.gz"


def _report(path: Path, db: Path, run: str = "r") -> Report:
    stepscope.ingest_run([path], db=db, run=run, jobs=1)
    with stepscope.open(db) as store:
        return build_report(store.con, run)


def _raw(path: Path) -> dict[str, Any]:
    return json.loads(gzip.decompress(path.read_bytes()))


def test_an_unnamed_gpu_is_identified_by_its_properties(tmp_path: Path) -> None:
    props = _raw(VLLM)["deviceProperties"][0]
    assert props["name"] == "" and props["numSms"] == 304
    report = _report(VLLM, tmp_path / "v.duckdb")
    assert report.mfu.device == "AMD Instinct MI300X"
    assert report.mfu.peak_flops_per_gpu == pytest.approx(1307.4e12)
    assert report.mfu.mfu is not None
    (note,) = [n for n in report.notes if "do not name the GPU" in n]
    assert "taken as AMD Instinct MI300X" in note and "compute capability 9.4" in note
    # the same architecture and CU count with 256 GiB (an MI325X) is not taken as one
    other = {**props, "totalGlobalMem": 256 * 2**30}
    assert lookup(None, props) is not None and lookup(None, other) is None


def test_profile_memory_on_without_events_gives_the_true_reason(tmp_path: Path) -> None:
    raw = _raw(VLLM)
    assert raw["profile_memory"] == 1
    assert not any(e.get("name") == "[memory]" for e in raw["traceEvents"])
    db = tmp_path / "v.duckdb"
    report = _report(VLLM, db)
    (config,), = q(db, "SELECT profiler_config FROM ranks")
    assert json.loads(config) == {"record_shapes": 1, "profile_memory": 1, "with_stack": 1,
                                  "with_flops": 1}
    assert report.memory is None
    assert report.memory_note is not None and "profile_memory=1" in report.memory_note
    text = report_markdown(report)
    assert report.memory_note in text and "profile with profile_memory=True" not in text


def test_hip_memory_events_are_read(tmp_path: Path) -> None:
    """SGLang's decode on MI300X: the peak is the largest `Total Allocated` / `Total
    Reserved` of its `[memory]` events (Device Type 6), by hand from the raw JSON."""
    raw = _raw(SGLANG)
    events = [e["args"] for e in raw["traceEvents"] if e.get("name") == "[memory]"]
    assert len(events) == 1014 and {a["Device Type"] for a in events} == {6}
    report = _report(SGLANG, tmp_path / "s.duckdb")
    assert report.memory is not None and report.memory_note is None
    (rank,) = report.memory.ranks
    assert rank.peak_allocated_bytes == max(a["Total Allocated"] for a in events)  # 151.8 GB
    assert rank.peak_reserved_bytes == max(a["Total Reserved"] for a in events)    # 152.2 GB
    assert rank.device_memory_bytes == raw["deviceProperties"][0]["totalGlobalMem"]


def _graph_trace(record_shapes: bool) -> dict[str, Any]:
    """One GPU rank whose ops have no shapes and whose step launches a HIP graph."""
    trace = kineto_trace(rank=0, world_size=1, steps=3)
    for e in trace["traceEvents"]:
        e.get("args", {}).pop("Input Dims", None)
    steps = [e for e in trace["traceEvents"] if e.get("name", "").startswith("ProfilerStep")]
    for i, step in enumerate(steps):
        trace["traceEvents"].append({
            "ph": "X", "cat": "cuda_runtime", "name": "hipGraphLaunch", "pid": 100,
            "tid": 100, "ts": step["ts"] + 60, "dur": 5.0,
            "args": {"correlation": 9000 + i, "External id": 9000 + i}})
    if record_shapes:
        trace["record_shapes"] = 1
    return trace


def test_record_shapes_on_with_graph_replays_says_so(tmp_path: Path) -> None:
    with_flag = _report(write_trace(tmp_path / "a" / "rank0.json", _graph_trace(True)),
                        tmp_path / "a.duckdb")
    message = with_flag.mfu.message or ""
    assert with_flag.mfu.mfu is None
    assert "record_shapes=1" in message and "3 CUDA/HIP graph replay(s)" in message
    assert "record_shapes=True" not in message
    without = _report(write_trace(tmp_path / "b" / "rank0.json", _graph_trace(False)),
                      tmp_path / "b.duckdb")
    assert without.mfu.message == NO_FLOPS
