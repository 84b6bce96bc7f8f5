"""One builder per model (analyzers/builders.py): the same two runs give the same diff
through `stepscope diff`, the nightly job and the dashboard, field for field, and the
calibration the planner starts from is the dashboard's and `plan --from`'s alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SIM, cli

import stepscope
from stepscope.analyzers.builders import calibrate_run, diff_runs
from stepscope.analyzers.results import to_builtins
from stepscope.dashboard.app import data

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def night(sample_db: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A copy of the sample database with diff_scaled ingested as a night of a job whose
    baseline is diff_base; the night's folder of report files."""
    import shutil

    tmp = tmp_path_factory.mktemp("night")
    db = tmp / "night.duckdb"
    shutil.copyfile(sample_db, db)
    out = tmp / "out"
    rc, _, err = cli("nightly", SIM / "diff_scaled", "--job", "scaled", "--run", "scaled-1",
                     "--baseline", "diff_base", "--db", db, "--out-dir", out, "--quiet")
    assert rc == 0, err
    return db, out


def test_the_nightly_diff_is_stepscope_diff(night: tuple[Path, Path]) -> None:
    db, out = night
    nightly = json.loads((out / "report.json").read_text())["diff"]
    rc, text, err = cli("diff", "diff_base", "scaled-1", "--db", db, "--format", "json")
    assert rc == 0, err
    assert nightly == json.loads(text)
    assert nightly["expected"] is not None  # the block the nightly used to lack


def test_the_dashboard_diff_is_stepscope_diff(night: tuple[Path, Path]) -> None:
    db, _ = night
    rc, text, err = cli("diff", "diff_base", "scaled-1", "--db", db, "--format", "json")
    assert rc == 0, err
    assert to_builtins(data.diff(db, "diff_base", "scaled-1")) == json.loads(text)
    expected, why_not = data.expected(db, "diff_base", "scaled-1")
    assert why_not is None and expected is not None
    assert to_builtins(expected) == json.loads(text)["expected"]


def test_the_library_diff_is_the_builders(sample_db: Path) -> None:
    with stepscope.open(sample_db) as store:
        built = diff_runs(store.con, "diff_base", store.con, "diff_scaled")
        assert to_builtins(stepscope.diff("diff_base", "diff_scaled", sample_db).diff) \
            == to_builtins(built.diff)


def test_the_dashboard_calibration_is_plan_from(sample_db: Path) -> None:
    with stepscope.open(sample_db) as store:
        built = calibrate_run(store.con, "plan_mb4")
    cal, source = data.calibration(sample_db, "plan_mb4")
    assert cal is not None and to_builtins(cal) == to_builtins(built.calibration)
    assert source == f"model spec: {built.spec_source}"


def test_a_run_without_a_spec_says_why_it_has_no_calibration(sample_db: Path) -> None:
    """The CPU samples have no model.json beside them: the page says so in the words of
    `plan --from`, without the command's prefix."""
    cal, why = data.calibration(sample_db, "cpu-ddp")
    assert cal is None and why.startswith("no model spec: pass --model FILE"), why
