"""Shared fixtures: sample trace locations and tiny traces built in code."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_traces" / "cpu"
SHARED_TRACES = REPO.parent / "shared" / "traces"


def shared_trace_files() -> list[Path]:
    if not SHARED_TRACES.is_dir():
        return []
    return sorted(SHARED_TRACES.rglob("*.json.gz"))


@pytest.fixture
def shared_traces() -> Path:
    if not SHARED_TRACES.is_dir():
        pytest.skip("../shared/traces is not present")
    return SHARED_TRACES


def kineto_trace(rank: int | None = 0, world_size: int = 2, steps: int = 2,
                 base_ns: int | None = 1_700_000_000_000_000_000,
                 extra_events: list[dict[str, Any]] | None = None,
                 with_distributed: bool = True) -> dict[str, Any]:
    """A small but complete GPU Kineto trace: steps with a GEMM, a memcpy and an NCCL
    all-reduce launched through record_param_comms, in relative-ts form."""
    pid, tid, bwd = 100, 100, 101
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
         "args": {"name": "thread 100 (python)"}},
    ]
    ext, corr = 1, 1
    t = 1000.0
    for step in range(steps):
        s0 = t
        ops = [
            # (name, cat, ts, dur, tid, args)
            (f"ProfilerStep#{step + 1}", "user_annotation", s0, 900.0, tid, {}),
            ("aten::mm", "cpu_op", s0 + 10, 50.0, tid,
             {"Input Dims": [[64, 128], [128, 256]], "Input type": ["float", "float"]}),
            ("cudaLaunchKernel", "cuda_runtime", s0 + 20, 5.0, tid, {"cbid": 211}),
            ("aten::copy_", "cpu_op", s0 + 100, 30.0, tid, {}),
            ("cudaMemcpyAsync", "cuda_runtime", s0 + 105, 5.0, tid, {}),
            ("c10d::allreduce_", "cpu_op", s0 + 200, 100.0, bwd, {}),
            ("record_param_comms", "cpu_op", s0 + 210, 80.0, bwd, {
                "Collective name": "allreduce", "dtype": "BFloat16", "In msg nelems": 1024,
                "Out msg nelems": 1024, "Group size": world_size,
                "Process Group Name": "0", "Process Group Description": "default_pg",
                "Process Group Ranks": str(list(range(world_size)))}),
            ("nccl:all_reduce", "user_annotation", s0 + 220, 60.0, bwd, {}),
            ("cudaLaunchKernel", "cuda_runtime", s0 + 230, 5.0, bwd, {"cbid": 211}),
        ]
        mm_ext = ext + 1
        rpc_ext = ext + 4
        for name, cat, ts, dur, th, args in ops:
            a = dict(args)
            if cat in ("cpu_op", "user_annotation"):
                a["External id"] = ext
                ext += 1
            events.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": th,
                           "ts": ts, "dur": dur, "args": a})
        # runtime calls link to kernels by correlation; kernels carry the op's External id
        launches = [e for e in events
                    if e.get("cat") == "cuda_runtime" and "correlation" not in e["args"]]
        gemm_launch, copy_launch, nccl_launch = launches
        for launch in launches:
            launch["args"]["correlation"] = corr
            corr += 1
        gemm_launch["args"]["External id"] = mm_ext
        events += [
            {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16", "pid": 0, "tid": 7,
             "ts": s0 + 30, "dur": 200.0,
             "args": {"device": 0, "stream": 7, "correlation": gemm_launch["args"]["correlation"],
                      "External id": mm_ext}},
            {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0,
             "tid": 7, "ts": s0 + 240, "dur": 20.0,
             "args": {"device": 0, "stream": 7, "correlation": copy_launch["args"]["correlation"],
                      "bytes": 4096}},
            {"ph": "X", "cat": "kernel",
             "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
             "pid": 0, "tid": 20, "ts": s0 + 300, "dur": 400.0,
             "args": {"device": 0, "stream": 20,
                      "correlation": nccl_launch["args"]["correlation"],
                      "External id": rpc_ext, "Collective name": "allreduce"}},
        ]
        t += 1000.0
    events += extra_events or []
    trace: dict[str, Any] = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132}],
        "traceEvents": events,
        "traceName": "synthetic",
    }
    if with_distributed:
        info: dict[str, Any] = {"backend": "nccl", "world_size": world_size,
                                "pg_count": 1, "nccl_version": "2.21.5",
                                "pg_config": [{"pg_name": "0", "pg_desc": "default_pg",
                                               "backend_config": "cuda:nccl",
                                               "pg_size": world_size,
                                               "ranks": list(range(world_size))}]}
        if rank is not None:
            info["rank"] = rank
        trace["distributedInfo"] = info
    if base_ns is not None:
        trace["baseTimeNanoseconds"] = base_ns
    return trace


def write_trace(path: Path, trace: dict[str, Any] | str | bytes) -> Path:
    """Write a trace dict (or raw text/bytes) as .json or .json.gz depending on the name."""
    if isinstance(trace, dict):
        data = json.dumps(trace).encode()
    elif isinstance(trace, str):
        data = trace.encode()
    else:
        data = trace
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.name.endswith(".gz"):
        with gzip.GzipFile(path, "wb", mtime=0) as fh:
            fh.write(data)
    else:
        path.write_bytes(data)
    return path


@pytest.fixture
def make_run(tmp_path: Path) -> Callable[..., Path]:
    """Write one synthetic trace per rank into a fresh directory; returns the directory."""
    counter = {"n": 0}

    def _make(world_size: int = 2, **kwargs: Any) -> Path:
        counter["n"] += 1
        d = tmp_path / f"run{counter['n']}"
        for r in range(world_size):
            trace = kineto_trace(rank=r, world_size=world_size, **kwargs)
            write_trace(d / f"rank{r}.json.gz", trace)
        return d

    return _make
