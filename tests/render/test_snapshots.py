"""Golden snapshots of what users read: the Markdown and JSON of a few sample runs, a
diff and a plan (tests/snapshots/). After an intended change, rewrite them with
`pytest tests/render/test_snapshots.py --update-snapshots` and review the diff in the commit.

Markdown must match exactly; JSON must match in structure and every string, with numbers
equal to 1e-9 relative (DuckDB's parallel sums may differ in the last bits)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REPO, SIM
from identity import assert_close

import stepscope
from stepscope.analyzers.builders import diff_runs
from stepscope.analyzers.context import ReportOptions, run_context
from stepscope.analyzers.flops.model_spec import load_spec
from stepscope.analyzers.flops.peaks import resolve_device
from stepscope.analyzers.plan.calibrate import calibrate
from stepscope.analyzers.plan.from_run import Constraints, plan_from
from stepscope.analyzers.plan.layouts import make_job, plan_result
from stepscope.analyzers.report import build_report, report_from_context
from stepscope.analyzers.results import Diff, Model, PlanResult, Report, to_json
from stepscope.dashboard.render.diff import diff_markdown
from stepscope.dashboard.render.plan import plan_markdown
from stepscope.dashboard.render.report import report_markdown

SNAPSHOTS = REPO / "tests" / "snapshots"


def _report(db: Path, run: str, spec_of: str | None = None) -> Report:
    spec = load_spec(SIM / spec_of / "model.json") if spec_of else None
    with stepscope.open(db) as store:
        return build_report(store.con, run, spec)


def _diff(db: Path) -> Diff:
    options = ReportOptions(spec=load_spec(SIM / "diff_base" / "model.json"))
    with stepscope.open(db) as store:
        return diff_runs(store.con, "diff_base", store.con, "diff_scaled", options).diff


def _plan_from(db: Path) -> PlanResult:
    """`plan --from plan_mb4 --gpus 16` (the spec's source named relative to the repo)."""
    spec_path = SIM / "plan_mb4" / "model.json"
    spec = load_spec(spec_path)
    with stepscope.open(db) as store:
        ctx = run_context(store.con, "plan_mb4", ReportOptions(spec=spec))
        cal = calibrate(ctx, report_from_context(ctx), spec,
                        str(spec_path.relative_to(REPO)))
        return plan_from(cal, ctx.device.peak, Constraints(gpus=16), top=5)


def _plan(_: Path) -> PlanResult:
    job = make_job(70e9, 1024, 8, 8192, 4 * 2**20)
    return plan_result(job, resolve_device("H100"), top=5)


CASES: dict[str, Callable[[Path], Model]] = {
    "report-straggler": lambda db: _report(db, "straggler"),
    "report-deep_pipeline-spec": lambda db: _report(db, "deep_pipeline", "deep_pipeline"),
    "report-cpu-pipeline": lambda db: _report(db, "cpu-pipeline"),
    "diff-base-scaled": _diff,
    "plan-70b-h100": _plan,
    "plan-from-mb4": _plan_from,
}


def markdown(model: Model) -> str:
    if isinstance(model, Report):
        return report_markdown(model)
    if isinstance(model, Diff):
        return diff_markdown(model)
    assert isinstance(model, PlanResult)
    return plan_markdown(model)


def _check(path: Path, text: str, update: bool) -> str:
    if update or not path.exists():
        if not update:
            pytest.fail(f"{path.name} is missing: run pytest --update-snapshots")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return path.read_text()


@pytest.mark.parametrize("name", sorted(CASES))
def test_markdown_snapshot(name: str, sample_db: Path, update_snapshots: bool) -> None:
    text = markdown(CASES[name](sample_db))
    want = _check(SNAPSHOTS / f"{name}.md", text, update_snapshots)
    assert text == want, f"{name}.md changed: review, then pytest --update-snapshots"


@pytest.mark.parametrize("name", sorted(CASES))
def test_json_snapshot(name: str, sample_db: Path, update_snapshots: bool) -> None:
    text = to_json(CASES[name](sample_db)) + "\n"
    want = _check(SNAPSHOTS / f"{name}.json", text, update_snapshots)
    assert_close(json.loads(text), json.loads(want))
