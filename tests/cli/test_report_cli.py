"""`stepscope report`: on a path, on a run, JSON and Markdown from the same model."""

from __future__ import annotations

import gzip
import json
from html import escape
from pathlib import Path

import pytest
from conftest import (
    REAL_TRACES,
    REPO,
    SAMPLES,
    kineto_trace,
    q,
    real_run,
    real_trace_files,
    write_trace,
)

from stepscope.analyzers.results import FailedFile, Report, from_json
from stepscope.cli import main
from stepscope.dashboard.render.html_report import failed_files_html
from stepscope.dashboard.render.report import FAILED_SHOWN, failed_files_lines, report_markdown

SIM = REPO / "sample_traces" / "simulated"


@pytest.mark.slow
def test_report_on_a_path_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(SIM / "deep_pipeline"), "--format", "json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["run"]["name"] == "deep_pipeline" and r["run"]["timeline"] == "gpu"
    assert r["pipeline"]["stages"] == 4
    assert set(r) >= {"schema_version", "run", "layout", "step_time_ms", "breakdown_ms",
                      "per_rank", "per_step", "stragglers", "pipeline"}


@pytest.mark.slow
def test_report_on_a_run_in_the_db(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "r.duckdb"
    assert main(["ingest", str(SAMPLES / "straggler"), "--db", str(db), "--quiet"]) == 0
    out = tmp_path / "report.md"
    assert main(["report", "straggler", "--db", str(db), "--out", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("# stepscope report: straggler")
    assert "## Where the step time went" in text
    assert "- **rank 2** (vm)" in text
    assert "| straggler wait |" in text
    assert main(["report", "nope", "--db", str(db)]) == 2
    assert "no run named 'nope' (runs: straggler)" in capsys.readouterr().err


def test_markdown_renders_every_section_of_the_model() -> None:
    model = {
        "schema_version": 2,
        "run": {"name": "r", "status": "complete", "world_size": 2, "ranks": 2,
                "device": "NVIDIA H100 80GB HBM3", "hosts": ["a"], "timeline": "gpu",
                "failed_files": []},
        "layout": {"tp": 2, "pp": 1, "dp": 1, "cp": 1, "ep": 1, "gpus_per_node": 2,
                   "nodes": 1, "source": "inferred"},
        "step_time_ms": 10.0,
        "breakdown_ms": {"compute": 6.0, "recompute": 0.0, "exposed_comm": 2.0,
                         "straggler_wait": 1.0, "bubble": 0.0, "memory": 0.5, "idle": 0.5},
        "per_rank": [{"rank": 0, "host": "a", "n_steps": 2, "step_time_ms": 10.0,
                      "breakdown_ms": {"compute": 6.0, "recompute": 0.0, "exposed_comm": 2.0,
                                       "straggler_wait": 1.0, "bubble": 0.0, "memory": 0.5,
                                       "idle": 0.5}}],
        "per_step": [],
        "stragglers": [],
        "pipeline": None,
        "collective_matching": {},
        "notes": ["a note"],
        "mfu": {"peak_table_version": "t", "dtype": "bf16", "message": "no peak known"},
        "collectives": [],
        "recommendations": [],
    }
    text = report_markdown(from_json(json.dumps(model), Report))
    assert "| compute | 6.00 | 60.0% |" in text
    assert "| exposed communication | 2.00 | 20.0% |" in text
    assert "TP 2 x PP 1 x DP 1" in text and "note: a note" in text
    assert "none: no rank is consistently the last to arrive" in text
    assert "no pipeline parallelism" in text
    assert "- not computed: no peak known" in text
    assert "- none: no category costs enough for a fix to pay off" in text


@pytest.mark.slow
@pytest.mark.parametrize("path", real_trace_files(), ids=lambda p: p.name)
def test_full_report_on_every_shared_trace(path: Path, real_db: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Ingest, attribution, MFU, advisor and rendering run on every real trace: the JSON
    report of the path (ingested by the CLI), the Markdown one of its run in the session's
    real database (the same ingest)."""
    assert main(["report", str(path), "--format", "json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["run"]["ranks"] == 1
    assert abs(sum(r["breakdown_ms"].values()) - r["step_time_ms"]) < 1e-6
    # every real trace gets a breakdown: ProfilerStep#N or a fallback step (issue 8)
    assert r["per_rank"] and r["step_time_ms"] > 0 and r["run"]["step_source"]
    if r["run"]["step_source"] != "profiler_step":
        assert any("ProfilerStep" in n for n in r["notes"])
    mfu = r["mfu"]
    if mfu["mfu"] is None:  # no MFU: the message names the option that fixes it
        assert mfu["waterfall"] == [] and mfu["hfu"] is None
        assert any(opt in mfu["message"] for opt in ("--peak-tflops", "--model", "--dtype"))
    else:  # an MFU: a share of peak whose waterfall adds up to it
        assert 0 < mfu["mfu"] <= mfu["hfu"] <= 1
        assert 100 + sum(w["points"] for w in mfu["waterfall"]) == pytest.approx(
            100 * mfu["mfu"], abs=1e-9)
    assert main(["report", real_run(path), "--db", str(real_db)]) == 0
    assert capsys.readouterr().out.startswith("# stepscope report:")


def test_partial_run_lists_its_failed_files_in_every_format(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A reader of the Markdown or HTML report sees which files failed and why, as the
    JSON's run.failed_files says (one good trace, one truncated .json.gz)."""
    job = tmp_path / "job"
    write_trace(job / "rank0.json.gz", kineto_trace(rank=0, world_size=2))
    good = gzip.compress(json.dumps(kineto_trace(rank=1, world_size=2)).encode())
    (job / "rank1.json.gz").write_bytes(good[: len(good) // 2])
    db = tmp_path / "p.duckdb"
    assert main(["ingest", str(job), "--db", str(db), "--quiet"]) == 3
    capsys.readouterr()
    bad, why = (str(job / "rank1.json.gz"), "truncated gzip file (it ends before the "
                "end-of-stream marker; re-copy it)")
    assert main(["report", "job", "--db", str(db), "--format", "json"]) == 0
    run = json.loads(capsys.readouterr().out)["run"]
    assert run["failed_files"] == [{"file": bad, "error": why}]
    assert main(["report", "job", "--db", str(db)]) == 0
    md = capsys.readouterr().out.splitlines()
    at = md.index("- **partial run**: 1 trace file(s) could not be ingested; the report "
                  "covers the others:")
    assert md[at + 1] == f"  - `{bad}`: {why}"
    assert main(["report", "job", "--db", str(db), "--format", "html"]) == 0
    page = capsys.readouterr().out
    assert ('<p class="bad"><b>Partial run</b>: 1 trace file(s) could not be ingested; the '
            f"report covers the others:</p><ul><li><code>{escape(bad)}</code>: {escape(why)}"
            "</li></ul>") in page


def test_many_failed_files_are_cut_in_markdown_and_folded_in_html() -> None:
    files = tuple(FailedFile(file=f"rank{i}.json", error="empty file") for i in range(25))
    lines = failed_files_lines(files)
    assert len(lines) == 1 + FAILED_SHOWN + 1
    assert lines[-1] == "  - and 5 more (`--format json` lists every one)"
    page = failed_files_html(files)
    assert page.count("<li>") == 25 and "<details><summary>5 more</summary>" in page
    assert failed_files_lines(()) == [] and failed_files_html(()) == ""


CUPTI_RANGE = (REAL_TRACES / "HolisticTraceAnalysis" / "tests" / "data" / "cupti_profiler"
               / "benchmark_result_924719_1679055439_trace.json.gz")


def test_range_profiled_gpu_trace_is_not_cpu_only(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """HTA's cupti_profiler trace: 8 A100s in deviceProperties, its kernels measured by the
    CUPTI range profiler (77 cuda_profiler_range events on pid 0, 'GPU 0') and no kernel
    events. It ran on GPU 0, an A100: not 'CPU only'; the CPU timeline note says why."""
    if not CUPTI_RANGE.is_file():
        pytest.fail("tests/data/traces is missing from this checkout")
    db = tmp_path / "c.duckdb"
    assert main(["ingest", str(CUPTI_RANGE), "--db", str(db), "--run", "c", "--quiet"]) == 0
    assert q(db, "SELECT device, device_name FROM ranks") == [(0, "NVIDIA A100-PG509-200")]
    assert q(db, "SELECT count(*) FROM gpu_ops") == [(0,)]
    assert main(["report", "c", "--db", str(db), "--format", "json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert (r["run"]["device"], r["run"]["timeline"]) == ("NVIDIA A100-PG509-200", "cpu")
    why = ("no GPU kernel events in the traces (the kernels on the NVIDIA A100-PG509-200 "
           "were not traced)")
    assert f"{why}: attributed on the CPU timeline of the training threads" in r["notes"]
    assert r["roofline"]["message"] == f"{why}: no GPU kernels to hold against a roof"
    assert main(["summary", "--db", str(db), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["devices"] == "NVIDIA A100-PG509-200"
