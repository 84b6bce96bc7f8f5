"""Memory per rank (docs/memory.md): the peak allocated and reserved bytes per rank and
step, the ops live at the peak, against the simulator's own allocator (moe_roofline) and
the real traces' own events (current and 2021 format); the advisor's memory checks."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import REAL_TRACES, SIM

import stepscope
from stepscope.analyzers.advice.memory import recompute_memory_note, zero_memory_note
from stepscope.analyzers.advice.recommend import gather
from stepscope.analyzers.context import ReportOptions, run_context
from stepscope.analyzers.flops.mfu import ModelSpec
from stepscope.analyzers.report import build_report
from stepscope.analyzers.results import MemorySection, MemoryStep, RankMemory, Report
from stepscope.dashboard.render.report import report_markdown

pytestmark = pytest.mark.slow  # ingests real and simulated memory traces

DF = REAL_TRACES / "HolisticTraceAnalysis/tests/data/df_index_resolver/df_index_resolver.json.gz"
KINETO = (REAL_TRACES / "kineto/tb_plugin/samples/resnet50_num_workers_0/"
          "worker0.1623143089861.pt.trace.json.gz")


def report(db: Path, run: str) -> Report:
    with stepscope.open(db) as store:
        return build_report(store.con, run)


def test_peaks_per_rank_and_step_are_the_simulators(sample_db: Path) -> None:
    mem = report(sample_db, "moe_roofline").memory
    assert mem is not None and mem.source == "totals"
    truth = json.loads((SIM / "moe_roofline" / "ground_truth.json").read_text())["memory"]
    assert len(mem.ranks) == len(truth) == 4
    for row in mem.ranks:
        t = truth[str(row.rank)]
        assert row.peak_allocated_bytes == t["peak_allocated"]
        assert row.peak_reserved_bytes == t["peak_reserved"]
        assert row.peak_step == t["peak_step"]
        assert {s.step: (s.peak_allocated_bytes, s.peak_reserved_bytes) for s in row.steps} == {
            int(k): (v["peak_allocated"], v["peak_reserved"]) for k, v in t["steps"].items()}
        live = sorted(t["live_at_peak"].items(), key=lambda kv: (-kv[1], kv[0]))[:5]
        assert [(o.op, o.bytes) for o in row.ops_at_peak] == live
        assert row.device_memory_bytes == 85520809984
        assert row.reserved_share == pytest.approx(t["peak_reserved"] / 85520809984)
    hot = max(truth, key=lambda r: truth[r]["peak_allocated"])
    assert mem.peak_rank == int(hot) == 2  # the rank whose experts receive the most
    assert mem.peak_allocated_bytes == truth[hot]["peak_allocated"]


def _events(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    with gzip.open(path, "rt") as fh:
        doc = json.load(fh)
    return [e for e in doc["traceEvents"] if e.get("name") == "[memory]"], doc


def test_real_trace_peak_is_its_own_total_allocated(tmp_path: Path) -> None:
    events, doc = _events(DF)
    gpu = [e["args"] for e in events if e["args"]["Device Type"] == 1]
    db = tmp_path / "s.duckdb"
    stepscope.ingest_run(DF, db=db, run="df")
    mem = report(db, "df").memory
    assert mem is not None and mem.source == "totals"
    (row,) = mem.ranks
    assert row.peak_allocated_bytes == max(a["Total Allocated"] for a in gpu)
    assert row.peak_reserved_bytes == max(a["Total Reserved"] for a in gpu)
    device = gpu[0]["Device Id"]
    (props,) = [p for p in doc["deviceProperties"] if p["id"] == device]
    assert row.device_memory_bytes == props["totalGlobalMem"]
    assert row.ops_at_peak and row.op_at_peak and row.op_at_peak != "aten::empty"
    assert sum(o.bytes for o in row.ops_at_peak) <= row.peak_allocated_bytes


def test_2021_trace_counts_bytes_from_its_start(tmp_path: Path) -> None:
    """torch 1.9 wrote Bytes only: the peak is the largest rise of their running sum."""
    events, _ = _events(KINETO)
    gpu = sorted((e for e in events if e["args"]["Device Type"] == 1), key=lambda e: e["ts"])
    running, top = 0, 0
    for e in gpu:
        running += e["args"]["Bytes"]
        top = max(top, running)
    db = tmp_path / "s.duckdb"
    stepscope.ingest_run(KINETO, db=db, run="kin")
    r = report(db, "kin")
    assert r.memory is not None and r.memory.source == "bytes_delta"
    assert r.memory.peak_allocated_bytes == top
    assert r.memory.peak_reserved_bytes is None and "2021 format" in (r.memory.message or "")


def test_runs_without_events_say_so(sample_db: Path) -> None:
    r = report(sample_db, "straggler")
    assert r.memory is None
    assert "no memory events in the traces (profile with profile_memory=True)" in \
        report_markdown(r)


def _evidence(sample_db: Path, spec: ModelSpec | None, memory: MemorySection):
    with stepscope.open(sample_db) as store:
        ctx = run_context(store.con, "moe_roofline", ReportOptions(spec=spec))
        r = build_report(store.con, "moe_roofline")
        ev = gather(ctx, r.pipeline, r.stragglers, r.mfu, r.collectives, r.idle_split,
                    memory=memory)
        return ev, ctx


def _memory(reserved: float, device: float) -> MemorySection:
    row = RankMemory(rank=0, host="h", device_memory_bytes=int(device),
                     peak_allocated_bytes=int(reserved * 0.9), peak_reserved_bytes=int(reserved),
                     peak_step=2, steps=(MemoryStep(step=2, peak_allocated_bytes=1,
                                                    peak_reserved_bytes=1),))
    return MemorySection(source="totals", peak_allocated_bytes=row.peak_allocated_bytes,
                         peak_reserved_bytes=row.peak_reserved_bytes, peak_rank=0,
                         device_memory_bytes=int(device), ranks=(row,))


def test_zero_advice_names_the_first_stage_that_fits(sample_db: Path) -> None:
    """78 GB reserved of 80 GB with 4e9 parameters (64 GB of state under ZeRO-0): the rest
    is 14 GB, ZeRO-1 shards 12 of the 16 bytes over DP; the planner's rule is 90%."""
    spec = ModelSpec(n_params=4e9, n_layers=32, hidden=4096, seq_len=4096,
                     global_batch_tokens=4 * 4096)
    ev, ctx = _evidence(sample_db, spec, _memory(78e9, 80e9))
    dp = ctx.layout.dp * 1.0
    note = zero_memory_note(ev, 0)
    rest = 78e9 - 16 * 4e9 / (ctx.layout.tp * ctx.layout.pp)
    first = next(s for s, b in enumerate((16, 4 + 12 / dp, 2 + 14 / dp, 16 / dp))
                 if rest + b * 4e9 <= 0.9 * 80e9)
    assert f"ZeRO-{first} is the first stage that fits" in note
    assert "measured peak reserved 78.0 GB of 80.0 GB on rank 0" in note
    # moe_roofline has a model.json beside its traces, which run_context now finds (issue
    # 45 point 8): the run without a spec is that context with neither
    bare = dataclasses.replace(ctx, options=dataclasses.replace(ctx.options, spec=None),
                               spec_source=None)
    assert "without a model spec" in zero_memory_note(dataclasses.replace(ev, ctx=bare), 0)


def test_recompute_advice_sizes_selective_recompute(sample_db: Path) -> None:
    spec = ModelSpec(n_params=4e9, n_layers=32, hidden=4096, seq_len=4096,
                     global_batch_tokens=4 * 4096)
    ev, ctx = _evidence(sample_db, spec, _memory(60e9, 80e9))
    lay = ctx.layout
    samples = spec.global_batch_tokens / (spec.seq_len * lay.dp)
    extra = 32 * spec.seq_len * samples * spec.hidden / lay.tp * spec.n_layers / lay.pp
    note = recompute_memory_note(ev)
    assert f"adds about {extra / 1e9:.1f} GB" in note
    fits = 60e9 + extra <= 0.9 * 80e9
    assert ("which fits" if fits else "does not fit") in note
    ev2 = dataclasses.replace(ev, memory=None)
    assert "no memory events" in recompute_memory_note(ev2)
