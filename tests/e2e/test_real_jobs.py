"""Two real jobs nobody here made, through the diff and every dashboard page: the 8-rank
V100 DLRM job of facebookresearch/param and rank 0 of DeepSeek-V3's 64-GPU MoE training
(tests/data/*/PROVENANCE.md), beside the simulated fp32_v100 run on the same device.

The DLRM traces carry no process-group records, so its collectives' groups are unknown
(one known rank): the expectation from A had divided by a ring of zero bus bytes
("ZeroDivisionError: float division by zero" under "Predicted from A vs measured", and
`stepscope diff fp32_v100 dlrm_kineto` crashed the same way)."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from conftest import REPO, SIM
from dashboard_helpers import app_test, no_exception, texts

import stepscope
from stepscope.analyzers.comm.collectives import op_times
from stepscope.analyzers.diff.build import build_diff, mfu_percent
from stepscope.analyzers.report import build_report
from stepscope.analyzers.results import STAGES
from stepscope.cli import main
from stepscope.dashboard.app.charts import diff_waterfall, waterfall_columns
from stepscope.dashboard.app.views import RUN_PAGES

pytestmark = pytest.mark.slow

DATA = REPO / "tests" / "data"
DLRM = DATA / "facebookresearch_param" / "et_replay" / "tests" / "inputs" / "dlrm_kineto.tar.gz"
DEEPSEEK = DATA / "deepseek-ai_profile-data" / "train.json.gz"


@pytest.fixture(scope="module")
def jobs_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """fp32_v100 (simulated, V100), the DLRM job and DeepSeek's rank 0, one run each."""
    db = tmp_path_factory.mktemp("real_jobs") / "jobs.duckdb"
    stepscope.ingest_run([SIM / "fp32_v100"], db=db, run="fp32_v100", jobs=1)
    stepscope.ingest_run([DLRM], db=db, run="dlrm_kineto", jobs=1)
    stepscope.ingest_run([DEEPSEEK], db=db, run="deepseek", jobs=1)
    return db


def _diff(db: Path, a: str, b: str) -> stepscope.analyzers.results.Diff:
    with stepscope.open(db) as store:
        ra, rb = build_report(store.con, a), build_report(store.con, b)
        return build_diff(ra, rb, op_times(store.con, a), op_times(store.con, b))


def test_diff_of_a_job_without_groups_renders_every_section(
        jobs_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Point 1: the diff renders, and the term whose prediction cannot be made says why."""
    assert main(["diff", "fp32_v100", "dlrm_kineto", "--db", str(jobs_db)]) == 0
    out = capsys.readouterr().out
    for section in ("## Expected from A at B's scale and layout", "## MFU points by cause",
                    "## Setup changes", "## Communication", "## Stragglers"):
        assert section in out
    assert "A's nvlink line predicts nothing for it: its group has 1 known rank(s)" in out


def test_the_narrative_keeps_small_mfus_and_the_direction(jobs_db: Path) -> None:
    """Point 5: DLRM's MFU is 0.027%, not "0.0%" beside the table's 0.027%; where kernel
    efficiency gave points, compute runs closer to peak, not further below it."""
    down = _diff(jobs_db, "fp32_v100", "dlrm_kineto")
    assert down.b.mfu is not None and 0 < down.b.mfu < 0.001
    assert f"-> {mfu_percent(down.b.mfu)} " in down.narrative
    assert mfu_percent(0.00027) == "0.027%" and mfu_percent(0.592) == "59.2%"
    assert "kernel efficiency (-" in down.narrative
    assert "(compute runs further below peak)" in down.narrative
    up = _diff(jobs_db, "dlrm_kineto", "fp32_v100")
    assert up.mfu_points_by_category is not None
    assert up.mfu_points_by_category.points("kernel_efficiency") > 50
    assert "kernel efficiency (+" in up.narrative
    assert "(compute runs closer to peak)" in up.narrative
    assert "further below peak" not in up.narrative


def test_a_run_named_like_a_cause_keeps_its_own_column(jobs_db: Path) -> None:
    """Point 4: A named `recompute` (a cause) and B named `idle`: 9 columns, not 8."""
    d = _diff(jobs_db, "fp32_v100", "dlrm_kineto")
    d = msgspec.structs.replace(d, a=msgspec.structs.replace(d.a, run="recompute"),
                                b=msgspec.structs.replace(d.b, run="idle"))
    columns = waterfall_columns(d)
    assert len(columns) == len(STAGES) + 2 == len(set(columns))
    fig = diff_waterfall(d)
    assert list(fig.data[0].x) == columns


@pytest.mark.parametrize("run", ["dlrm_kineto", "deepseek"])
def test_every_page_of_a_real_job_renders(monkeypatch: pytest.MonkeyPatch, jobs_db: Path,
                                          run: str) -> None:
    """No internal error on any page of either real job; Compare renders every section
    below the expectation (it stopped there)."""
    for page in sorted(RUN_PAGES):
        at = app_test(monkeypatch, jobs_db, page=page, run=run)
        if page == "compare":
            at.query_params["vs"] = "fp32_v100"
        at.run()
        no_exception(at)
        if page == "compare":
            heads = [str(h.value) for h in at.subheader]
            assert "Predicted from A vs measured" in heads and "Setup changes" in heads, heads
            assert "ZeroDivisionError" not in texts(at)


def test_plan_says_why_it_assumes_the_efficiency(jobs_db: Path) -> None:
    """Point 8: the DLRM job has an MFU (0.027%), so Plan's start does not say "no MFU for
    this run": its own kernel efficiency is outside the planner's range, in numbers."""
    from stepscope.dashboard.app.views.plan import run_start
    with stepscope.open(jobs_db) as store:
        report = build_report(store.con, "dlrm_kineto")
    assert report.mfu.mfu is not None and report.mfu.mfu > 0
    start = run_start(report, [])
    (said,) = [a for a in start.assumed if a.startswith("kernel efficiency")]
    assert "no MFU" not in said and "is outside 0.05-1)" in said, said
    measured = next(1 + w.points / 100 for w in report.mfu.waterfall
                    if w.name == "kernel_efficiency")
    assert f"the run's own, {measured:.2g}," in said


def test_the_runs_table_names_the_v100_briefly() -> None:
    """The DLRM job's 'Tesla V100-SXM2-32GB' was cut to 'Tesla V10…XM2-32GB', which
    widened the Runs table past the page at 1000 px (743 > 710 px in Chromium)."""
    from stepscope.dashboard.app.views.runs import device_label
    assert device_label("Tesla V100-SXM2-32GB") == "V100 32GB"
    assert device_label("NVIDIA H100 80GB HBM3") == "H100 80GB"
