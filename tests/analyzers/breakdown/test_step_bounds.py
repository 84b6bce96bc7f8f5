"""A step needs both ends (issue 40, point 3; the view complete_steps, docs/attribution.md
"Complete steps"): with `Optimizer.step#` as the step source, step 1 runs from the start
of the trace (the first DataLoader fetch, warm-up) and has no start boundary, so it is not
complete, like the last step without an end. Ground truth from the hand-built trace: four
iterations, each ending in an optimizer step, the first preceded by a DataLoader fetch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import kineto_trace, q, write_trace

import stepscope


def _optimizer_steps(doc: dict[str, Any]) -> dict[str, Any]:
    """kineto_trace with each ProfilerStep#k turned into the iteration's Optimizer.step#
    at its end, and a 900 us DataLoader fetch before the first iteration."""
    for e in doc["traceEvents"]:
        if e.get("name", "").startswith("ProfilerStep#"):
            e["name"] = "Optimizer.step#SGD.step"
            e["ts"] += 800.0
            e["dur"] = 50.0
    doc["traceEvents"].append(
        {"ph": "X", "cat": "user_annotation",
         "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
         "pid": 100, "tid": 100, "ts": 10.0, "dur": 900.0, "args": {"External id": 9999}})
    return doc


def test_the_first_optimizer_step_has_no_start_and_is_not_complete(tmp_path: Path) -> None:
    for r in range(2):
        write_trace(tmp_path / "t" / f"rank{r}.json.gz",
                    _optimizer_steps(kineto_trace(rank=r, world_size=2, steps=4)))
    db = tmp_path / "t.duckdb"
    stepscope.ingest_run(tmp_path / "t", db=db, run="opt")
    assert q(db, "SELECT DISTINCT step_source FROM ranks") == [("optimizer_step",)]
    assert q(db, "SELECT rank, step FROM steps ORDER BY rank, step") == [
        (r, s) for r in range(2) for s in range(1, 5)]
    # step 1 has no start boundary, step 4 no end: 2 and 3 are complete (were 1, 2, 3)
    assert q(db, "SELECT rank, step FROM complete_steps ORDER BY rank, step") == [
        (r, s) for r in range(2) for s in (2, 3)]


def test_profiler_steps_keep_their_first_step(make_run: Any, tmp_path: Path) -> None:
    """ProfilerStep#N has both ends from the first step on: nothing changes there."""
    db = tmp_path / "p.duckdb"
    stepscope.ingest_run(make_run(world_size=2, steps=3), db=db, run="ps")
    assert q(db, "SELECT rank, step FROM complete_steps ORDER BY rank, step") == [
        (r, s) for r in range(2) for s in (1, 2)]


def test_report_of_a_path_says_db_is_unused(make_run: Any, tmp_path: Path,
                                            capsys: Any) -> None:
    """`stepscope report PATH --db FILE` ingests into a temporary database (issue 40,
    point 5): FILE stays unwritten, and the command says so instead of nothing."""
    from stepscope.cli import main

    db = tmp_path / "kept.duckdb"
    assert main(["report", str(make_run(world_size=2, steps=3)), "--db", str(db)]) == 0
    err = capsys.readouterr().err
    assert f"--db {db} is unused" in err and not db.exists()


def test_a_gpu_with_an_empty_name_is_an_unnamed_gpu(tmp_path: Path) -> None:
    """vLLM writes `"name": ""` in deviceProperties (issue 40, point 5): the device was ''
    and MFU said "unknown device 'CPU only'" on a GPU trace."""
    from stepscope.analyzers.context import ReportOptions
    from stepscope.targets import report

    for r in range(2):
        doc = kineto_trace(rank=r, world_size=2, steps=3)
        doc["deviceProperties"] = [{"id": 0, "name": "", "numSms": 132,
                                    "computeMajor": 9, "computeMinor": 0}]
        write_trace(tmp_path / "t" / f"rank{r}.json.gz", doc)
    rep = report(tmp_path / "t", tmp_path / "unused.duckdb", ReportOptions()).report
    assert rep.run.device == "GPU (unnamed)"
    assert rep.mfu.mfu is None and rep.mfu.message is not None
    assert "do not name the GPU" in rep.mfu.message and "--peak-tflops" in rep.mfu.message
    forced = report(tmp_path / "t", tmp_path / "unused.duckdb",
                    ReportOptions(peak_tflops=989.0)).report
    assert forced.mfu.mfu is not None and forced.mfu.mfu > 0


RESNET = (Path(__file__).parents[2] / "data" / "traces" / "kineto" / "tb_plugin" / "samples"
          / "resnet50_num_workers_0" / "worker0.1623143089861.pt.trace.json.gz")


def test_a_real_trace_delimited_by_optimizer_steps(tmp_path: Path) -> None:
    """kineto's real 2021 ResNet-50 trace with its ProfilerStep#N annotations taken out,
    so its six `Optimizer.step#SGD.step` calls delimit the steps (the shape of a training
    loop profiled without a schedule): step 1 runs from the first CPU op to the end
    of the first optimizer step and is not complete; steps 2-5 are, each from one optimizer
    step's end to the next one's, by hand from the raw events (the last, 6, has no
    successor, as with every step source)."""
    import gzip
    import json

    doc = json.loads(gzip.decompress(RESNET.read_bytes()))
    doc["traceEvents"] = [e for e in doc["traceEvents"]
                          if not str(e.get("name", "")).startswith("ProfilerStep#")]
    ends = sorted(1000 * (e["ts"] + e["dur"]) for e in doc["traceEvents"]
                  if str(e.get("name", "")).startswith("Optimizer.step#"))
    assert len(ends) == 6
    db = tmp_path / "r.duckdb"
    stepscope.ingest_run(write_trace(tmp_path / "t" / "worker0.json", doc), db=db, run="r")
    assert q(db, "SELECT step_source FROM ranks") == [("optimizer_step",)]
    steps = q(db, "SELECT step, start_ns, end_ns FROM steps ORDER BY step")
    assert [s for s, _, _ in steps] == [1, 2, 3, 4, 5, 6]
    assert [end for _, _, end in steps] == ends
    assert [start for _, start, _ in steps][1:] == ends[:-1]
    first = min(1000 * e["ts"] for e in doc["traceEvents"]
                if e.get("ph") == "X" and e.get("cat") in ("Operator", "Runtime"))
    assert steps[0][1] == first
    assert q(db, "SELECT step FROM complete_steps ORDER BY step") == [(2,), (3,), (4,), (5,)]
