"""Every dashboard page on a fixture database, through streamlit's AppTest: the values a
user reads (step time, MFU, the named straggler, the pipeline's bubble, the diff's MFU
change) equal the CLI's models and the simulator's ground truth."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import duckdb
import pytest
from dashboard_helpers import CPU, SIMULATED, app_test, no_exception, texts
from streamlit.testing.v1 import AppTest

from stepscope.analyzers.comm.collectives import op_times
from stepscope.analyzers.diff.build import build_diff
from stepscope.analyzers.report import build_report
from stepscope.analyzers.results import Report
from stepscope.dashboard.app.uploads import ingest_staged
from stepscope.dashboard.app.views import PAGES, compare
from stepscope.dashboard.app.widgets import MISSING
from stepscope.dashboard.render.format import mfu_points, pct

pytestmark = pytest.mark.slow  # ingests four bundled runs, every page

RUNS = {"straggler": SIMULATED / "straggler", "diff_base": SIMULATED / "diff_base",
        "diff_scaled": SIMULATED / "diff_scaled", "cpu-straggler": CPU / "straggler"}


@pytest.fixture(scope="module")
def pages_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("pages") / "pages.duckdb"
    for run, folder in RUNS.items():
        ingest_staged([folder], db, run)
    return db


@cache
def cli_report(db: Path, run: str) -> Report:
    """The CLI's report of `run` in `db` (written once, by the module's fixture), built
    once per test process: several pages are checked against the straggler's."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return build_report(con, run)
    finally:
        con.close()


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def open_page(monkeypatch: pytest.MonkeyPatch, db: Path, page: str, run: str | None = None,
              **env: str) -> AppTest:
    at = app_test(monkeypatch, db, page=page, run=run, **env)
    at.run()
    no_exception(at)
    return at


def page_texts(at: AppTest) -> set[str]:
    """What a page wrote besides its header: text, captions, notes and metric labels."""
    kinds = ("markdown", "caption", "subheader", "info", "warning", "error", "text")
    return ({str(e.value) for kind in kinds for e in getattr(at, kind)}
            | {m.label for m in at.metric})


def test_every_page_renders_for_gpu_and_cpu_runs(monkeypatch, pages_db):
    """Each page gets past its header: it shows something no other page of the same run
    shows (a page that gave up after its header would show only what all pages share)."""
    for run in ("straggler", "cpu-straggler"):
        shown = {}
        for page in PAGES:
            at = open_page(monkeypatch, pages_db, page, run)
            assert at.header[0].value == PAGES[page].HEADER, (page, run)
            shown[page] = page_texts(at)
        for page, own in shown.items():
            others = set().union(*(t for p, t in shown.items() if p != page))
            assert own - others, (page, run)


def test_overview_shows_the_cli_numbers_and_the_straggler(monkeypatch, pages_db):
    at = open_page(monkeypatch, pages_db, "overview", "straggler")
    report = cli_report(pages_db, "straggler")
    truth = json.loads((SIMULATED / "straggler" / "ground_truth.json").read_text())
    shown = metrics(at)
    assert shown["Step time"] == f"{report.step_time_ms:.2f} ms"
    assert shown["Step time"] == f"{truth['mfu']['step_time_ms']:.2f} ms"
    assert shown["MFU"] == pct(report.mfu.mfu) == pct(truth["mfu"]["mfu"])
    assert shown["HFU"] == pct(truth["mfu"]["hfu"])
    assert shown["Stragglers"] == f"rank {truth['config']['slow_rank']}"
    assert len(at.get("plotly_chart")) == 2  # breakdown per step, MFU waterfall
    assert len(at.dataframe[0].value) == len(report.per_step) + 1
    assert report.recommendations[0].title in texts(at)
    assert at.query_params["page"] in ("overview", ["overview"])


def test_ranks_names_the_straggler_with_evidence(monkeypatch, pages_db):
    at = open_page(monkeypatch, pages_db, "ranks", "straggler")
    report = cli_report(pages_db, "straggler")
    assert f"**rank 3** ({report.stragglers[0].host})" in texts(at)
    grid = at.dataframe[1].value
    assert len(grid) == 8 * 3  # ranks x profiled steps
    assert grid.groupby("rank")["wait caused ms"].sum().idxmax() == 3
    at.radio(key="ranks_metric").set_value("wait_suffered_ms").run()
    no_exception(at)
    per_rank = at.dataframe[2].value
    assert per_rank["step ms"].tolist() == pytest.approx(
        [r.step_time_ms for r in report.per_rank], abs=1e-3)


def test_timeline_defaults_to_stragglers_and_stages(monkeypatch, pages_db):
    at = open_page(monkeypatch, pages_db, "timeline", "straggler")
    report = cli_report(pages_db, "straggler")
    chosen = at.multiselect(key="tl_ranks_straggler").value
    assert 3 in chosen
    assert {s.ranks[0] for s in report.pipeline.per_stage} <= set(chosen)
    segments = at.dataframe[0].value
    assert set(segments["rank"]) == set(chosen)
    assert "straggler wait" in set(segments["category"])
    step = at.selectbox(key="tl_step").value
    worst = max((s for s in report.per_step if s.complete), key=lambda s: s.step_time_ms)
    assert step == worst.step
    assert f"{len(segments)} rectangles" in texts(at)


def test_communication_and_pipeline_match_the_report(monkeypatch, pages_db):
    report = cli_report(pages_db, "straggler")
    at = open_page(monkeypatch, pages_db, "communication", "straggler")
    shown = metrics(at)
    assert shown["Exposed"] == f"{report.breakdown_ms.exposed_comm:.2f} ms"
    assert len(at.dataframe[0].value) == len(report.collectives)
    # point-to-point ops have no bus bandwidth: their cells read a dash, not 'None'
    links = at.dataframe[1]
    p2p = [c.is_p2p for c in report.collectives]
    assert any(p2p) and links.value["bus GB/s"].isna().tolist() == p2p
    assert links.proto.placeholder == MISSING == "–"
    at = open_page(monkeypatch, pages_db, "pipeline", "straggler")
    pipe = report.pipeline
    shown = metrics(at)
    assert shown["Stages × microbatches"] == f"{pipe.stages} × {pipe.microbatches}" == "2 × 16"
    assert shown["Bubble measured"] == pct(pipe.bubble_fraction)
    assert shown["1F1B theory (S−1)/(S−1+M)"] == pct(1 / 17)
    cpu = open_page(monkeypatch, pages_db, "pipeline", "cpu-straggler")
    assert "No pipeline parallelism" in texts(cpu)


def test_kernels_page(monkeypatch, pages_db):
    at = open_page(monkeypatch, pages_db, "kernels", "straggler")
    table = at.dataframe[0].value
    assert table["ms/step"].tolist() == sorted(table["ms/step"].tolist(), reverse=True)
    assert (table["min"] <= table["ms/step"]).all() and (table["ms/step"] <= table["max"]).all()


def test_compare_shows_the_diff_model(monkeypatch, pages_db):
    at = app_test(monkeypatch, pages_db, page="compare", run="diff_scaled")
    at.query_params["vs"] = "diff_base"
    at.run()
    no_exception(at)
    con = duckdb.connect(str(pages_db), read_only=True)
    a, b = build_report(con, "diff_base"), build_report(con, "diff_scaled")
    diff = build_diff(a, b, op_times(con, "diff_base"), op_times(con, "diff_scaled"))
    con.close()
    shown = metrics(at)
    assert shown["MFU (A → B)"] == f"{pct(a.mfu.mfu)} → {pct(b.mfu.mfu)}"
    assert diff.mfu_delta_points is not None and diff.mfu_delta_points < 0
    assert at.metric[0].delta == f"{mfu_points(diff.mfu_delta_points, 2)} points"
    points = at.dataframe[0].value
    assert sum(points["MFU points"]) == pytest.approx(diff.mfu_delta_points, abs=0.01)
    assert diff.narrative.splitlines()[0][:40] in texts(at)
    assert at.query_params["vs"] in ("diff_base", ["diff_base"])
    # B as expected from A beside the measured B: the diff's `expected`
    assert "from A at B's scale and layout" in texts(at)
    expected = next(d.value for d in at.dataframe if "expected B ms" in d.value.columns)
    assert sum(expected["expected pts"]) + sum(expected["departure pts"]) == \
        pytest.approx(diff.mfu_delta_points, abs=0.05)
    # why B departs, per term, listed under the table (short columns at 1000 px)
    why = [m.value for m in at.markdown if str(m.value).startswith("- straggler wait:")]
    assert why and "rank 13" in why[0]


def test_compare_explains_points_that_moved_with_the_same_time(sample_db):
    """healthy -> straggler: exposed communication keeps its milliseconds but gains points
    (a smaller share of a longer step); the page says so, naming the numbers."""
    con = duckdb.connect(str(sample_db), read_only=True)
    a, b = build_report(con, "healthy"), build_report(con, "straggler")
    diff = build_diff(a, b, op_times(con, "healthy"), op_times(con, "straggler"))
    con.close()
    points = diff.mfu_points_by_category
    assert points is not None and points.points("exposed_comm") > 1.0
    assert diff.breakdown_delta_ms.ms("exposed_comm") == pytest.approx(0.0, abs=1e-3)
    comm = a.breakdown_ms.ms("exposed_comm")
    assert compare.share_effect_note(diff) == (
        f"Same time, different points: exposed communication ({comm:.2f} → {comm:.2f} ms, "
        f"{points.points('exposed_comm'):+.2f} points). Each cause's points are its share "
        "of the step, and the same time is a smaller share of a longer step.")
    assert compare.share_effect_note(build_diff(a, a, {}, {})) is None


def test_plan_form(monkeypatch, pages_db):
    """A CPU-only run cannot calibrate the planner: the page says why and plans with the
    fixed assumptions."""
    at = open_page(monkeypatch, pages_db, "plan", "cpu-straggler")
    assert "Not calibrated on cpu-straggler" in texts(at)
    assert at.number_input(key="pl_gpus").value == 4  # the run's world size
    assert "Best: TP" in texts(at)  # planned at once with the defaults
    at.number_input(key="pl_params").set_value(13.0)
    at.form_submit_button[0].click()
    at.run()
    no_exception(at)
    assert "Best: TP" in texts(at)
    table = at.dataframe[0].value
    assert 1 <= len(table) <= 15
    assert table["MFU %"].tolist() == sorted(table["MFU %"].tolist(), reverse=True)


def test_plan_uses_the_selected_runs_calibration(monkeypatch, pages_db):
    """With model.json beside the run's traces, the Plan page starts from the run's own
    calibration, says so, and shows the run measured beside the model at its layout."""
    at = open_page(monkeypatch, pages_db, "plan", "diff_base")
    shown = texts(at)
    assert "Calibrated on run **diff_base**" in shown and "model.json" in shown
    assert at.number_input(key="pf_gpus").value == 8
    con = duckdb.connect(str(pages_db), read_only=True)
    try:
        report = build_report(con, "diff_base")
    finally:
        con.close()
    assert metrics(at)["diff_base, measured"].startswith(f"{report.step_time_ms:.2f} ms")
    at.number_input(key="pf_gpus").set_value(16)
    at.form_submit_button[0].click()
    at.run()
    no_exception(at)
    table = at.dataframe[0].value
    degrees = table["layout"].str.extract(r"TP(\d+) PP(\d+) DP(\d+)").astype(int)
    assert (degrees[0] * degrees[1] * degrees[2] == 16).all()
    assert table["MFU %"].tolist() == sorted(table["MFU %"].tolist(), reverse=True)
    at.toggle(key="pl_fixed").set_value(True)
    at.run()
    no_exception(at)
    assert at.number_input(key="pl_gpus").value == 8  # the fixed-assumption form


def test_trends_without_history_orders_runs_by_time(monkeypatch, pages_db):
    at = open_page(monkeypatch, pages_db, "trends", "straggler")
    assert "No nightly history yet" in texts(at)
    table = at.dataframe[0].value
    assert list(table["run"]) == list(RUNS)  # ingested in this order
    assert table["MFU %"][0] == pytest.approx(
        100 * cli_report(pages_db, "straggler").mfu.mfu, abs=0.01)


def test_runs_page_lists_every_run_with_mfu(monkeypatch, pages_db):
    at = open_page(monkeypatch, pages_db, "runs", "straggler")
    table = at.dataframe[0].value
    assert set(table["run"]) == set(RUNS)
    row = table[table["run"] == "straggler"].iloc[0]
    assert row["MFU"] == pct(cli_report(pages_db, "straggler").mfu.mfu)
    assert row["ranks"] == "8/8"
    assert "**straggler**: complete, 8 of 8 ranks" in texts(at)


def test_deep_link_and_navigation_keep_the_url(monkeypatch, pages_db):
    at = open_page(monkeypatch, pages_db, "overview", "diff_base")
    assert at.sidebar.selectbox(key="nav_run").value == "diff_base"
    at.sidebar.radio(key="nav_page").set_value("ranks").run()
    no_exception(at)
    assert at.header[0].value == "Ranks"
    assert at.query_params["page"] in ("ranks", ["ranks"])
    assert at.query_params["run"] in ("diff_base", ["diff_base"])
    unknown = open_page(monkeypatch, pages_db, "nope", "nope")
    # a bad link says what is wrong, and shows no other run's numbers
    assert "Run 'nope' does not exist" in unknown.error[0].value and not unknown.metric
    lost = open_page(monkeypatch, pages_db, "nope")
    assert lost.header[0].value == "Runs"  # an unknown page lands somewhere useful


def lock(db: Path) -> subprocess.Popen[str]:
    """Another process holding the write lock (a nightly CLI ingest, say)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys; c = duckdb.connect(sys.argv[1]); "
         "print('locked', flush=True); sys.stdin.read()", str(db)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    return holder


def test_busy_database_shows_last_state_or_busy(monkeypatch, pages_db, tmp_path):
    at = open_page(monkeypatch, pages_db, "overview", "straggler")
    before = metrics(at)["Step time"]
    other = tmp_path / "other.duckdb"
    shutil.copy(pages_db, other)
    holders = [lock(pages_db), lock(other)]
    try:
        again = open_page(monkeypatch, pages_db, "overview", "straggler")
        assert metrics(again)["Step time"] == before  # the last committed state, cached
        fresh = app_test(monkeypatch, other, page="overview", run="straggler",
                         STEPSCOPE_BUSY_RETRIES="1")
        fresh.run()
        assert not fresh.exception
        assert "still busy" in fresh.error[0].value
    finally:
        for holder in holders:
            holder.kill()
            holder.wait()


def test_numbers_keep_enough_digits_and_never_show_minus_zero() -> None:
    """The digits rule (render/format.py): never more than a tenth off the true value, so
    a stage that lost a few hundredths of a point reads -0.04, not 0.0 or -0.0, and an
    MFU of 0.03% is not 0.0%; zero is 0.0."""
    from stepscope.dashboard.render.format import decimals, fixed, points

    assert [points(v) for v in (-0.04, -0.0, 0.0, 0.04, -2.345, -10.06)] == \
        ["-0.04", "0.0", "0.0", "0.04", "-2.3", "-10.1"]
    assert [points(v, 2, signed=True) for v in (-0.001, 0.004, -2.346, 1.5, 0.0)] == \
        ["-0.001", "+0.004", "-2.35", "+1.50", "+0.00"]
    assert [pct(x) for x in (0.000312, 0.0312, 0.33, 0.0049, 0.0)] == \
        ["0.03%", "3.1%", "33.0%", "0.5%", "0.0%"]
    for value in (0.0312, 0.00049, 7.77e-5, 123.456, 0.95, 0.149):
        shown = float(fixed(value))
        assert abs(shown - value) <= 0.1 * value, value
        assert decimals(value) >= 1
