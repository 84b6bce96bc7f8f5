"""The what-if's accuracy matrix (issue 42): every what-if kind on structurally different
jobs of an independent re-simulator (resim.py beside this file: a CPU thread per rank
with a bounded launch queue and syncs, GPU streams, collectives that end together once
their last member arrives, node clocks hundreds of microseconds apart, CUDA graph
replays), predicted step
against the job simulated again with the change. Target: every case within 5%; the table
is published in docs/critical_path.md ("Accuracy against an independent re-simulation").
Also the replay self-check: the unchanged graph gives back every window, and where it
does not the report says so and gives no what-if.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import resim

import stepscope
from stepscope.analyzers.context import run_context
from stepscope.analyzers.critical_path import analysis as cp_analysis
from stepscope.analyzers.critical_path.analysis import Analysis, check
from stepscope.analyzers.critical_path.whatif import WhatIf
from stepscope.analyzers.parallel.pipeline import topology
from stepscope.analyzers.report import build_report
from stepscope.analyzers.results import Report

pytestmark = pytest.mark.slow

DOCS = Path(__file__).resolve().parents[3] / "docs" / "critical_path.md"
TARGET = 0.05

# Small jobs (4 to 16 ranks, 4 profiled steps after one not written), each a shape the
# what-if must handle; node clocks differ by hundreds of us in every job of more than
# one node (resim.Job.node_offsets_us).
JOBS: dict[str, resim.Job] = {
    # the job of issue 42: TP4 x PP2 x DP2 on two 8-GPU nodes, 4 microbatches of 1F1B,
    # rank 5's GEMMs and attention 1.3x slower, the CPU running ahead within the step
    # until the launch queue (24 ops) is full and synchronizing at the step's end
    "tp4_pp2_dp2_queue24_sync": resim.Job(slow_rank=5, slow_factor=1.3, queue_depth=24),
    # TP/PP/DP with 1F1B and P2P over four 2-GPU nodes, the CPU far ahead (a sync at the
    # step's end only)
    "tp2_pp2_dp2_far_ahead": resim.Job(tp=2, pp=2, dp=2, layers=1, gpus_per_node=2,
                                       slow_rank=2, slow_factor=1.3),
    # DP buckets: one all-reduce per layer overlapped with the backward of the layers
    # before it, the last one exposed
    "dp4_buckets": resim.Job(tp=1, pp=1, dp=4, layers=4, microbatches=2, gpus_per_node=2,
                             dp_us=250.0, slow_rank=1, slow_factor=1.25),
    # paced by syncs: a .item() after every forward as well
    "pp4_dp2_item_syncs": resim.Job(tp=1, pp=4, dp=2, layers=1, gpus_per_node=4,
                                    sync="item", slow_rank=6, slow_factor=1.3),
    # paced by a full launch queue (12 ops), never synchronizing: the first profiled
    # step starts with the GPU still running the step before
    "tp2_dp2_queue12_nosync": resim.Job(tp=2, pp=1, dp=2, layers=2, gpus_per_node=2,
                                        sync="none", queue_depth=12, slow_rank=3,
                                        slow_factor=1.3),
    # stages of other widths: stage 1's GEMMs and attention 1.5x longer under the same
    # kernel names; the slow rank is compared with the ranks of its own stage
    "tp2_pp2_dp2_wide_stage": resim.Job(tp=2, pp=2, dp=2, layers=1, gpus_per_node=2,
                                        stage_scale=(1.0, 1.5), slow_rank=2,
                                        slow_factor=1.3),
    # host-bound: 60 us of CPU work per op, the GPU waits for the launches
    "tp2_pp2_host_bound": resim.Job(tp=2, pp=2, dp=1, layers=1, gpus_per_node=2,
                                    host_op_us=60.0, step_host_us=1500.0, slow_rank=1,
                                    slow_factor=1.3),
    # CUDA graphs, one launch and many kernels on two streams: an inference decode step
    # (TP4, 8 layers, custom all-reduces) replayed as one graph whose side branch the
    # trace shows on the launch stream, the CPU reading the tokens back every step
    "tp4_decode_graph": resim.Job(tp=4, pp=1, dp=1, layers=8, gpus_per_node=4,
                                  graphs="step", side_us=40.0, graph_trace_stream="launch",
                                  gemm_us=40.0, attn_us=30.0, tp_us=12.0,
                                  step_host_us=200.0, slow_rank=1, slow_factor=1.3),
    # ... with the CPU far ahead, never reading back, paced by a launch queue of 3
    # entries (a graph launch is one entry)
    "tp2_decode_graph_queue3": resim.Job(tp=2, pp=1, dp=1, layers=4, gpus_per_node=2,
                                         graphs="step", side_us=40.0, gemm_us=40.0,
                                         attn_us=30.0, tp_us=12.0, sync="none",
                                         queue_depth=3, host_op_us=20.0,
                                         step_host_us=100.0, slow_rank=0,
                                         slow_factor=1.3),
    # ... and training with each layer's forward and backward a graph (side branch on
    # its own stream), P2P and the DP buckets launched eagerly between the replays
    "pp2_dp2_layer_graphs": resim.Job(tp=1, pp=2, dp=2, layers=2, gpus_per_node=2,
                                      graphs="layer", side_us=30.0, slow_rank=2,
                                      slow_factor=1.3),
}
GROUP_KIND = {"TENSOR_MODEL_PARALLEL_GROUP": "tp", "DATA_PARALLEL_GROUP": "dp",
              "PIPELINE_MODEL_PARALLEL_GROUP": "pp"}


@dataclass(frozen=True)
class Row:
    job: str
    what: str
    predicted_ms: float
    resimulated_ms: float

    @property
    def error(self) -> float:
        return self.predicted_ms / self.resimulated_ms - 1.0


def _cases(job: resim.Job) -> Iterator[tuple[str, WhatIf, dict[str, Any]]]:
    """(what, the what-if, the re-simulator's change) of every kind the job has."""
    if job.slow_rank is not None:
        yield (f"rank {job.slow_rank} at the median speed", WhatIf(ranks=(job.slow_rank,)),
               {"slow_rank": None})
    yield ("fc1 GEMMs 2x", WhatIf(op="fc1", speedup=2.0),
           {"kernel_speedups": (("fc1", 2.0),)})
    if job.graphs != "none" and job.side_us > 0:
        # the graphs' side branch 5x slower: it outlasts the main branch it overlapped
        yield ("side branch 5x slower", WhatIf(op="rotary", speedup=0.2),
               {"kernel_speedups": (("rotary", 0.2),)})
    # a decode graph's all-reduces are custom kernels, named by the kernel alone: the
    # trace gives them no process group to pick
    tp_spec = "all_reduce" if job.graphs == "step" else "all_reduce:TENSOR"
    for kind, size, spec in (("tp", job.tp, tp_spec), ("dp", job.dp,
                             "all_reduce:DATA"), ("pp", job.pp, "send")):
        if size > 1:
            yield (f"{kind.upper()} {spec.partition(':')[0]} 2x",
                   WhatIf(collective=spec, speedup=2.0), {"comm_speedups": ((kind, 2.0),)})


def _advisor_change(w: Any) -> dict[str, Any]:
    """The re-simulator's change for one of the report's own what-ifs."""
    if w.reason == "straggler":
        return {"slow_rank": None}
    if w.reason == "top_op":
        return {"kernel_speedups": ((w.target, w.speedup),)}
    if w.reason == "top_collective":
        name, _, group = w.target.partition(":")
        kind = (GROUP_KIND[group] if group in GROUP_KIND else "pp" if name in ("send", "recv")
                else "tp")  # "?": a custom all-reduce, of no process group
        return {"comm_speedups": ((kind, w.speedup),)}
    assert w.reason == "pipeline_stage"
    return {"rank_speedups": tuple((int(r), w.speedup) for r in w.target.split(","))}


@dataclass
class Matrix:
    rows: list[Row]
    reports: dict[str, Report]
    replay: dict[str, str | None]
    measured: dict[str, tuple[float, float]]  # (report's step time, re-simulator's)
    dbs: dict[str, Path]


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> Matrix:
    root = tmp_path_factory.mktemp("resim")
    out = Matrix([], {}, {}, {}, {})
    for name, job in JOBS.items():
        job = resim.changed(job, name=name)
        resim.write_traces(resim.simulate(job), root / name)
        db = root / f"{name}.duckdb"
        stepscope.ingest_run([root / name], db=db, run=name, jobs=1)
        out.dbs[name] = db
        with stepscope.open(db) as store:
            ctx = run_context(store.con, name)
            measured = ctx.attribution.step_time_ms
            out.measured[name] = (measured, resim.step_time_ms(job))
            topo = topology(store.con, name)  # as `stepscope whatif` does
            a = Analysis(store.con, name, topo.stage_of if topo is not None else None)
            out.replay[name] = a.replay_note()
            for what, spec, change in _cases(job):
                check(a, spec)
                got = a.whatif(spec, measured)
                out.rows.append(Row(name, what, got.predicted_step_time_ms,
                                    resim.step_time_ms(resim.changed(job, **change))))
            report = build_report(store.con, name)
        out.reports[name] = report
        assert report.critical_path is not None
        for w in report.critical_path.whatifs:
            out.rows.append(Row(name, f"advisor: {w.what}", w.predicted_step_time_ms,
                                resim.step_time_ms(resim.changed(job,
                                                                 **_advisor_change(w)))))
    return out


def test_the_traces_carry_the_simulated_step(matrix: Matrix) -> None:
    """The re-simulator's traces and its own step time agree (its writer and its windows
    are what stepscope reads)."""
    for name, (measured, simulated) in matrix.measured.items():
        assert measured == pytest.approx(simulated, rel=1e-9), name


def test_every_whatif_is_within_five_percent_of_the_resimulation(matrix: Matrix) -> None:
    kinds = {r.what.split(" ")[0] for r in matrix.rows}
    assert {"rank", "fc1", "side", "TP", "DP", "PP", "advisor:"} <= kinds
    assert {r.job for r in matrix.rows if r.what.startswith("advisor: ")} == set(JOBS)
    bad = [(r.job, r.what, r.predicted_ms, r.resimulated_ms) for r in matrix.rows
           if abs(r.error) > TARGET]
    assert not bad, bad


@pytest.mark.parametrize("name", ["tp4_pp2_dp2_queue24_sync", "tp2_dp2_queue12_nosync",
                                  "tp4_decode_graph", "pp2_dp2_layer_graphs"])
def test_the_straggler_advice_fires_with_the_resimulated_gain(matrix: Matrix,
                                                              name: str) -> None:
    """The slow rank costs 13% (issue 42's job), 21%, 17% (a CUDA-graph decode step) and
    18% (layer graphs) of the step; the straggler recommendation is made with that gain.
    Before the host chain the what-if gave 1.18 of 3.07 ms (5.1% of the step: at the
    advice's 5% threshold) and -0.01 of 4.21 ms (no advice)."""
    job = JOBS[name]
    truth = matrix.measured[name][1] - resim.step_time_ms(resim.changed(job, slow_rank=None))
    (rec,) = [r for r in matrix.reports[name].recommendations if r.id == "straggler"]
    assert f"rank {job.slow_rank} " in rec.title
    assert rec.expected_gain_ms == pytest.approx(truth, rel=TARGET)


def test_the_unchanged_graph_gives_back_every_window(matrix: Matrix) -> None:
    assert matrix.replay == dict.fromkeys(JOBS)


def test_a_graph_that_does_not_replay_gives_no_whatif(
        matrix: Matrix, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the unchanged graph does not give the windows back, the section says so and
    has no what-if, the advice falls back to the waiting ranks' loss, and `whatif`
    refuses in one line."""
    name = "tp2_pp2_dp2_far_ahead"
    real = cp_analysis.run_step

    def shifted(sg: Any, scale: Any) -> Any:
        values, breaks = real(sg, scale)
        values = values.copy()
        values[:sg.nodes.size] += 5_000  # every start 5 us late: the windows hold,
        values[sg.n_own] += 250_000      # but one end probe is 0.25 ms later
        return values, breaks

    monkeypatch.setattr(cp_analysis, "run_step", shifted)
    with stepscope.open(matrix.dbs[name]) as store:
        report = build_report(store.con, name)
        ctx = run_context(store.con, name)
        with pytest.raises(stepscope.UsageError, match="does not reproduce 1 of"):
            cp_analysis.what_if(ctx, WhatIf(ranks=(2,)))
    cp = report.critical_path
    assert cp is not None and cp.whatifs == ()
    (note,) = [n for n in cp.notes if "does not reproduce" in n]
    assert "(worst 0.250 ms off): no what-if is computed on it" in note
    for rec in report.recommendations:
        assert "critical path:" not in rec.evidence


def table(rows: list[Row]) -> str:
    """The Markdown table of docs/critical_path.md."""
    lines = ["| job | what-if | predicted (ms) | re-simulated (ms) | error |",
             "|---|---|---:|---:|---:|"]
    lines += [f"| `{r.job}` | {r.what} | {r.predicted_ms:.3f} | {r.resimulated_ms:.3f} | "
              f"{100 * r.error:+.2f}% |" for r in rows]
    errors = [abs(r.error) for r in rows]
    worst = max(rows, key=lambda r: abs(r.error))
    lines.append("")
    lines.append(f"{len(rows)} cases: mean |error| {100 * sum(errors) / len(errors):.2f}%, "
                 f"worst {100 * abs(worst.error):.2f}% (`{worst.job}`, {worst.what}).")
    return "\n".join(lines)


def test_the_docs_publish_this_table(matrix: Matrix) -> None:
    want = table(matrix.rows)
    assert want in DOCS.read_text(), f"docs/critical_path.md should hold:\n{want}"
