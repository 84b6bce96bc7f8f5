"""The roofline on real jobs (issue 40, point 6).

The 8-rank V100 DLRM job of facebookresearch/param (tests/data/facebookresearch_param)
links its kernels only by correlation to their launch call: a kernel's `External id` is
its correlation id, which no CPU op carries, so gpu_ops.cpu_op_id is NULL for all 2,040
compute kernels. The roofline then found no shaped op and said "the traces have no
`Input Dims`" beside an MFU computed from the `aten::mm` shapes; its GEMM numbers are
checked here against a walk over the raw JSON (launch call -> innermost enclosing CPU op
on its thread -> that op's `Input Dims`) that shares no code with stepscope. The same job
has runs of zero-length runtime calls at one microsecond inside `aten::bmm`: nesting
counted them by row number, so one enclosed the next and 7 of the 24 bmm kernels lost
their op (244 depths and 1,647 parents differed from a stack walk).

The simulated H100 sets write no `Input type`: their GEMM and attention rows had no bytes,
so every GB/s and FLOP/byte read "-" and the chart drew only the roofs."""

from __future__ import annotations

import gzip
import json
import math
import tarfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import duckdb
import pytest
from conftest import REPO, SIM

import stepscope
from stepscope.analyzers.flops.roofline import chart_note, shares_note
from stepscope.analyzers.report import build_report
from stepscope.analyzers.results import Report, Roofline, RoofRow

DLRM = (REPO / "tests" / "data" / "facebookresearch_param" / "et_replay" / "tests" / "inputs"
        / "dlrm_kineto.tar.gz")


@pytest.fixture(scope="module")
def dlrm_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("dlrm") / "dlrm.duckdb"
    stepscope.ingest_run([DLRM], db=db, run="dlrm", jobs=1)
    return db


@pytest.fixture(scope="module")
def dlrm_report(dlrm_db: Path) -> Report:
    with stepscope.open(dlrm_db) as store:
        return build_report(store.con, "dlrm")


def _dlrm_traces() -> list[dict[str, Any]]:
    with tarfile.open(DLRM) as tar:
        return [json.load(tar.extractfile(m))  # type: ignore[arg-type]
                for m in sorted(tar.getmembers(), key=lambda m: m.name)
                if m.name.endswith(".json")]


def _hand_gemms() -> tuple[dict[tuple[str, int, int, int, int], list[float]], int]:
    """Per (op, B, M, N, K): [kernel ns, FLOPs, fp32 bytes] over the ranks' ProfilerStep,
    from the raw events: each kernel launched in the step belongs to the innermost CPU op
    enclosing its launch call; an op's FLOPs and bytes count once however many kernels it
    launched (inputs read once, the output written once)."""
    acc: dict[tuple[str, int, int, int, int], list[float]] = defaultdict(lambda: [0.0] * 3)
    traces = _dlrm_traces()
    for trace in traces:
        events = trace["traceEvents"]
        step = next(e for e in events if e.get("name", "").startswith("ProfilerStep#"))
        kernels = {e["args"]["correlation"]: e for e in events if e.get("cat") == "kernel"}
        ops_by_tid: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for e in events:
            if e.get("cat") == "cpu_op":
                ops_by_tid[e["tid"]].append(e)
        seen: set[tuple[int, int]] = set()
        for launch in events:
            if launch.get("cat") != "cuda_runtime" or "Launch" not in launch["name"]:
                continue
            if not step["ts"] <= launch["ts"] <= step["ts"] + step["dur"]:
                continue
            kernel = kernels.get(launch["args"]["correlation"])
            enclosing = [o for o in ops_by_tid[launch["tid"]] if o["ts"] <= launch["ts"]
                         and o["ts"] + o["dur"] >= launch["ts"] + launch["dur"]]
            if kernel is None or not kernel["dur"] or not enclosing:
                continue
            op = min(enclosing, key=lambda o: o["dur"])
            if op["name"] not in ("aten::mm", "aten::addmm", "aten::bmm"):
                continue
            dims = op["args"]["Input Dims"]
            if op["name"] == "aten::mm":
                (m, k), (_, n), b, extra = dims[0], dims[1], 1, 0
            elif op["name"] == "aten::addmm":
                (m, k), (_, n), b, extra = dims[1], dims[2], 1, math.prod(dims[0])
            else:
                (b, m, k), (_, _, n), extra = dims[0], dims[1], 0
            row = acc[(op["name"], b, m, n, k)]
            row[0] += kernel["dur"] * 1e3
            if (op["tid"], op["ts"]) not in seen:
                seen.add((op["tid"], op["ts"]))
                row[1] += 2.0 * b * m * n * k
                row[2] += 4.0 * (extra + b * m * k + b * k * n + b * m * n)
    return acc, len(traces)


def test_dlrm_kernels_find_their_op_through_the_launch_call(dlrm_report: Report) -> None:
    roof = dlrm_report.roofline
    assert roof is not None
    assert "Input Dims" not in (roof.message or "")
    assert roof.coverage == pytest.approx(0.62, abs=0.01)
    hand, ranks = _hand_gemms()
    assert ranks == 8
    ns, flops, nbytes = (sum(r[i] for r in hand.values()) for i in range(3))
    (gemm,) = [k for k in roof.kinds if k.kind == "gemm"]
    assert gemm.time_ms == pytest.approx(ns / ranks / 1e6, rel=1e-9)   # 0.2026 ms
    assert gemm.tflops == pytest.approx(flops / ns / 1e3, rel=1e-9)    # 0.30 TFLOP/s
    assert gemm.gbs == pytest.approx(nbytes / ns, rel=1e-9)            # 41.6 GB/s
    assert gemm.intensity == pytest.approx(flops / nbytes, rel=1e-9)   # 7.17 FLOP/byte
    assert gemm.bound == "memory"  # under the V100's fp32 ridge, 15.7e12 / 900e9 = 17
    shapes = {(r.op, r.b, r.m, r.n, r.k): r for r in roof.gemm_shapes}
    assert len(shapes) == 20
    for key, row in shapes.items():
        t_ns, f, q = hand[key]  # type: ignore[index]
        assert row.time_ms == pytest.approx(t_ns / ranks / 1e6, rel=1e-9), key
        assert row.gbs == pytest.approx(q / t_ns, rel=1e-9), key
    # MFU's coverage from the same kernels: the headline no longer says 0% had shapes
    assert dlrm_report.mfu.shaped_share == pytest.approx(roof.coverage)


def test_dlrm_nesting_is_a_stack_walk(dlrm_db: Path) -> None:
    """Depth and parent of every CPU op equal a stack walk over its thread (an op encloses
    the ops that start before it ends; one that ends at or before a start is closed)."""
    con = duckdb.connect(str(dlrm_db), read_only=True)
    rows = con.execute("SELECT rank, pid, tid, op_id, start_ns, end_ns, depth, parent_id "
                       "FROM cpu_ops ORDER BY rank, pid, tid, start_ns, end_ns DESC, "
                       "op_id").fetchall()
    con.close()
    wrong, thread, stack = [], None, []
    for rank, pid, tid, op_id, start, end, depth, parent in rows:
        if (rank, pid, tid) != thread:
            thread, stack = (rank, pid, tid), []
        while stack and stack[-1][1] <= start:
            stack.pop()
        if depth != len(stack) or parent != (stack[-1][0] if stack else None):
            wrong.append((rank, op_id))
        stack.append((op_id, end))
    assert len(rows) == 17537
    assert not wrong, f"{len(wrong)} ops nested differently, e.g. {wrong[:3]}"


def _truth(name: str) -> dict[str, Any]:
    return json.loads((SIM / name / "ground_truth.json").read_text())


def test_untyped_attention_has_bytes_at_the_runs_dtype(sample_db: Path) -> None:
    """healthy writes no `Input type`: its attention kernels' FLOP/byte at bf16 (the run's
    dtype, from its kernel names), from the raw trace's `Input Dims`: the forward reads
    q, k, v and writes the output (4 x B*S*H*D elements) for 4*B*H*S^2*D FLOPs, the
    backward reads 4 and writes 3 tensors for 2.5x that (FlashAttention's recompute)."""
    trace = json.loads(gzip.decompress((SIM / "healthy" / "rank0.json.gz").read_bytes()))
    forward = next(e for e in trace["traceEvents"]
                   if e.get("name") == "aten::_flash_attention_forward")
    assert "Input type" not in forward["args"]
    b, s, h, d = forward["args"]["Input Dims"][0]
    numel, flops = b * s * h * d, 4.0 * b * h * s * s * d
    with stepscope.open(sample_db) as store:
        roof = build_report(store.con, "healthy").roofline
    assert roof is not None
    kernels = {k.name: k for k in roof.kernels}
    assert kernels["flash_fwd_kernel"].intensity == pytest.approx(flops / (2 * 4 * numel))
    assert kernels["flash_fwd_kernel_bwd"].intensity == pytest.approx(
        2.5 * flops / (2 * 7 * numel))
    assert all(k.gbs is not None and k.intensity for k in roof.kinds)
    assert chart_note(roof) is None and shares_note(roof) is None
    assert _truth("healthy")["config"]["dtype"] == "bf16"


def _row(name: str, kind: str, tflops: float | None, gbs: float | None,
         intensity: float | None, share: float | None = None) -> RoofRow:
    return RoofRow(name=name, kind=kind, dtype=None, time_ms=1.0, time_share=0.5,
                   kernels_per_step=1.0, tflops=tflops, gbs=gbs, intensity=intensity,
                   bound="unknown" if share is None else "memory", roof_share=share,
                   lost_ms=None)


def test_an_empty_chart_says_why() -> None:
    base = Roofline(peak_table_version="t", peak_flops_per_gpu=1e15, hbm_gbs=3350.0)
    unsized = Roofline(peak_table_version="t", peak_flops_per_gpu=1e15, hbm_gbs=3350.0,
                       kernels=(_row("gemm_kernel", "gemm", 500.0, None, None),))
    note = chart_note(unsized)
    assert note is not None and "FLOP/byte" in note and "not known" in note
    flopless = Roofline(peak_table_version="t", peak_flops_per_gpu=1e15, hbm_gbs=3350.0,
                        kernels=(_row("add", "elementwise", None, 900.0, 0.0, 0.27),))
    note = chart_note(flopless)
    assert note is not None and "count no FLOPs" in note
    assert shares_note(flopless) is None
    assert chart_note(base) is not None and shares_note(base) is not None
    no_roofs = Roofline(peak_table_version="t",
                        kernels=(_row("gemm_kernel", "gemm", 500.0, None, None),))
    assert "neither roof" in (shares_note(no_roofs) or "")


def test_dlrm_planner_calibration_sees_its_gemms(dlrm_db: Path) -> None:
    """The planner's kernel kinds (planner/compute_kinds.sql) find the kernels' op the same
    way: before, every DLRM GEMM kernel was 'other' and the calibration had no FLOP rate;
    now its GEMMs carry the model FLOPs of the hand walk per rank and step."""
    from stepscope.analyzers.context import run_context
    from stepscope.analyzers.plan.calibrate import kernel_rates
    from stepscope.analyzers.report import report_from_context

    hand, ranks = _hand_gemms()
    with stepscope.open(dlrm_db) as store:
        ctx = run_context(store.con, "dlrm")
        rates = {r.kind: r for r in kernel_rates(ctx, report_from_context(ctx))}
    assert rates["gemm"].flops == pytest.approx(sum(r[1] for r in hand.values()) / ranks,
                                                rel=1e-9)   # 6.05e7 per rank and step
    assert rates["gemm"].tflops is not None and rates["gemm"].tflops > 0
