"""The dashboard tells one story (issue 21): on every page, through streamlit's AppTest on
the session's database of every bundled run, the figures shown are the report's and add
up (exposed + straggler wait + bubble + overlapped = the communication total, and the
parts are the report's categories), the Ranks heatmap opens on who makes the others
wait, Compare picks a comparable baseline and warns where runs differ, numbers keep
their digits, and a link never silently shows another run."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from statistics import mean

import duckdb
import pytest
from conftest import SIM
from dashboard_helpers import app_test, no_exception, texts
from streamlit.testing.v1 import AppTest

from stepscope.analyzers.comm.collectives import op_times
from stepscope.analyzers.detail import rank_step_grid
from stepscope.analyzers.parallel.bubble import bubble_excess
from stepscope.analyzers.report import build_report
from stepscope.analyzers.results import Report
from stepscope.dashboard.app.views import PAGES, RUN_PAGES
from stepscope.dashboard.render.format import pct, points, share
from stepscope.dashboard.render.html_report import report_html
from stepscope.dashboard.render.report import report_markdown
from stepscope.ingest import run_tokens


@cache
def cli(db: Path, run: str, **options: object) -> Report:
    """The CLI's report of `run` in the read-only `db`, built once per test process (a
    report is frozen; several pages are checked against the same run's)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return build_report(con, run, **options)  # type: ignore[arg-type]
    finally:
        con.close()


def open_page(monkeypatch: pytest.MonkeyPatch, db: Path, page: str, run: str | None = None,
              **params: str) -> AppTest:
    at = app_test(monkeypatch, db, page=page, run=run)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    no_exception(at)
    return at


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def ms(text: str) -> float:
    return float(text.split()[0])


# ------------------------------------------------------------------ communication
@pytest.mark.parametrize("run", ["straggler", "moe_ep", "cpu-pipeline", "diff_scaled"])
def test_communication_parts_add_up_to_the_total_and_the_categories(monkeypatch, sample_db,
                                                                    run):
    report = cli(sample_db, run)
    at = open_page(monkeypatch, sample_db, "communication", run)
    shown = metrics(at)
    bd = report.breakdown_ms
    rows = report.collectives
    total = sum(c.time_ms for c in rows)
    # the headline: each part is the report's category, and they add up to the total
    assert shown["Exposed"] == f"{bd.exposed_comm:.2f} ms"
    assert shown["Straggler wait"] == f"{bd.straggler_wait:.2f} ms"
    assert shown["Communication"] == f"{total:.2f} ms"
    overlapped = ms(shown["Overlapped"])
    assert sum(c.exposed_ms for c in rows) == pytest.approx(bd.exposed_comm, abs=1e-3)
    assert sum(c.straggler_wait_ms for c in rows) == pytest.approx(bd.straggler_wait, abs=1e-3)
    assert sum(c.bubble_ms for c in rows) == pytest.approx(bd.bubble, abs=1e-3)
    # the metrics shown add up to the total shown ("in bubble" shown where p2p ran in it)
    if bd.bubble and sum(c.bubble_ms for c in rows):
        assert shown["In bubble (p2p)"] == f"{sum(c.bubble_ms for c in rows):.2f} ms"
    else:
        assert "In bubble (p2p)" not in shown
    assert ms(shown["Exposed"]) + ms(shown["Straggler wait"]) + ms(
        shown.get("In bubble (p2p)", "0 ms")) + overlapped == pytest.approx(total, abs=0.02)
    # the table: one row per collective, each row's parts add up to its time
    table = at.dataframe[0].value
    assert len(table) == len(rows)
    parts = table["exposed ms"] + table["wait ms"] + table["bubble ms"] + table["overlapped ms"]
    assert list(parts) == pytest.approx(list(table["time ms"]), abs=0.005)
    assert table["exposed ms"].sum() == pytest.approx(bd.exposed_comm, abs=0.01)
    assert table["wait ms"].sum() == pytest.approx(bd.straggler_wait, abs=0.01)
    # the caption says the same sum in words
    assert f"= {total:.2f} ms per rank and step" in texts(at)


def test_recommendations_split_exposed_from_the_wait(sample_db):
    """The overlap advice names exposed time only, and the wait beside it, with the
    report's numbers: no 'exposed' figure larger than the exposed category."""
    for run in ("diff_scaled", "hidden_straggler", "cpu-ddp", "moe_ep"):
        report = cli(sample_db, run)
        for rec in report.recommendations:
            if not rec.id.startswith("exposed-"):
                continue
            exposed = float(re.search(r"exposed (\d+\.\d+) ms/step", rec.evidence).group(1))
            assert exposed <= report.breakdown_ms.exposed_comm + 0.01, (run, rec.evidence)
            assert "straggler wait" in rec.evidence and "overlapped" in rec.evidence
            assert rec.expected_gain_ms <= exposed + 0.01


# ------------------------------------------------------------------ overview
def test_overview_figures_are_the_reports(monkeypatch, sample_db):
    report = cli(sample_db, "straggler")
    at = open_page(monkeypatch, sample_db, "overview", "straggler")
    shown = metrics(at)
    assert shown["Step time"] == f"{report.step_time_ms:.2f} ms"
    assert shown["MFU"] == pct(report.mfu.mfu) and shown["HFU"] == pct(report.mfu.hfu)
    loss = max((report.breakdown_ms.ms(c), c) for c in
               ("recompute", "exposed_comm", "straggler_wait", "bubble", "memory", "idle"))
    (label,) = [k for k in shown if k.startswith("Largest loss")]
    assert shown[label] == f"{loss[0]:.2f} ms"
    # the waterfall's table: each stage's points beside the share of the step behind them
    water = at.dataframe[1].value
    step = report.step_time_ms
    for w, row in zip(report.mfu.waterfall, water.itertuples(), strict=False):
        assert row.points == points(w.points, 2)
        if w.name != "kernel_efficiency":
            assert row.share == f"{share(report.breakdown_ms.ms(w.name), step)} of the step"
    assert water["stage"].iloc[-1] == "= MFU"
    text = texts(at)
    assert "points are the MFU regained if its time went away" in text
    # every recommendation with its gain and a link to the Timeline where it shows
    for rec in report.recommendations[:5]:
        assert f"**{rec.expected_gain_ms:.2f} ms/step (" in text  # then its share
    assert "page=timeline&run=straggler&rank=3" in text


def test_tiny_mfu_keeps_its_digits(monkeypatch, sample_db):
    """A CPU run with the sidebar's peak: MFU is tiny but shown true, never 0.0%; the
    peak and dtype travel in the URL."""
    report = cli(sample_db, "cpu-ddp", peak_tflops=50.0, dtype="fp32")
    assert report.mfu.mfu is not None and report.mfu.mfu < 0.001
    at = open_page(monkeypatch, sample_db, "overview", "cpu-ddp", peak="50", dtype="fp32")
    shown = metrics(at)
    assert shown["MFU"] == pct(report.mfu.mfu)
    assert shown["MFU"] not in ("0.0%", "0%") and re.fullmatch(r"0\.0*[1-9]\d?%", shown["MFU"])
    assert at.query_params["peak"] in ("50", ["50"])
    assert at.query_params["dtype"] in ("fp32", ["fp32"])
    assert at.sidebar.number_input(key="peak_tflops").value == 50.0
    for rec in report.recommendations:
        if rec.expected_mfu_points is not None:
            assert "+0.0 MFU" not in texts(at)
    # without a peak the page says how to give one, and offers the control
    plain = open_page(monkeypatch, sample_db, "overview", "cpu-ddp")
    assert "pass --peak-tflops" in texts(plain) and "Peak TFLOP/s per GPU" in texts(plain)


# ------------------------------------------------------------------ ranks
def test_heatmap_opens_on_who_makes_the_others_wait(monkeypatch, sample_db):
    report = cli(sample_db, "straggler")
    at = open_page(monkeypatch, sample_db, "ranks", "straggler")
    assert at.radio(key="ranks_metric").value == "wait_caused_ms"
    con = duckdb.connect(str(sample_db), read_only=True)
    grid = rank_step_grid(con, "straggler")
    con.close()
    caused: dict[int, list[float]] = {}
    for r, ok, v in zip(grid.rank, grid.complete, grid.wait_caused_ms, strict=True):
        if ok:
            caused.setdefault(r, []).append(v)
    means = {r: mean(v) for r, v in caused.items()}
    worst = max(means, key=lambda r: means[r])
    assert worst == report.stragglers[0].rank == 3
    text = texts(at)
    # the sentence above the chart is the chart's own numbers
    others = (len(means) - 1) * report.step_time_ms  # summed over the waiting ranks
    assert f"rank 3: {means[3]:.2f} ms/step ({share(means[3], others)} of the other " in text
    # the Stragglers table's figure adds the waits passed on through the ranks that
    # waited for it (its pipeline peers): all the others' straggler wait
    assert report.stragglers[0].waited_on_ms > means[3]
    assert report.stragglers[0].waited_on_ms == pytest.approx(
        sum(r.breakdown_ms.straggler_wait for r in report.per_rank if r.rank != 3), rel=1e-6)
    assert "also counts the waits passed on" in text
    assert "ms per step" in text  # the unit of the view, in words
    # the straggler links to its Timeline at its worst step
    assert "page=timeline&run=straggler&rank=3&step=" in text
    # the other views say the same numbers
    at.radio(key="ranks_metric").set_value("wait_suffered_ms").run()
    no_exception(at)
    suffered = {r.rank: r.breakdown_ms.straggler_wait for r in report.per_rank}
    top = max(suffered, key=lambda r: suffered[r])
    assert f"rank {top}: {suffered[top]:.2f} ms/step" in texts(at)


def test_timeline_opens_at_the_linked_rank_and_step_and_names_ops(monkeypatch, sample_db):
    at = open_page(monkeypatch, sample_db, "timeline", "hidden_straggler", rank="13",
                   step="2")
    assert at.selectbox(key="tl_step").value == 2
    assert 13 in at.multiselect(key="tl_ranks_hidden_straggler").value
    segments = at.dataframe[0].value  # folded in an expander; AppTest sees it anyway
    named = segments[segments["category"] == "compute"]["op"]
    assert len(named) and all(named.str.len() > 0)
    comm = segments[segments["category"] == "exposed communication"]["op"]
    assert len(comm) and all(comm.str.contains("all_reduce"))


# ------------------------------------------------------------------ pipeline
def test_pipeline_says_what_makes_up_a_bubble_above_theory(monkeypatch, sample_db):
    report = cli(sample_db, "straggler")
    found = bubble_excess(report)
    assert found is not None and found.measured_ms > 3 * found.theory_ms
    assert sum(p.ms for p in found.parts) == pytest.approx(found.excess_ms, abs=1e-9)
    parts = {p.name: p for p in found.parts}
    # the simulator sends 134 MB per microbatch direction at 200 GB/s: the P2P part is a
    # lower bound at the link's 450 GB/s; the slow rank (3) explains most of the rest
    assert 0 < parts["p2p_transfer"].ms <= 2 * 134.2e6 / 200e9 * 1e3 + 1e-9
    assert parts["slow_rank"].ms > parts["p2p_transfer"].ms
    assert "rank 3" in found.advice
    at = open_page(monkeypatch, sample_db, "pipeline", "straggler")
    text = texts(at)
    assert f"{found.measured_ms / found.theory_ms:.1f}× the theory" in text
    for p in found.parts:
        assert f"{p.ms:.2f} ms/step" in text
    assert "What to do" in text and "page=timeline&run=straggler&rank=3" in text
    # a balanced pipeline near its theory gets no excess story
    assert bubble_excess(cli(sample_db, "deep_pipeline")) is None


# ------------------------------------------------------------------ compare
def comparable(db: Path, run: str) -> str:
    """The rule, from the files: the newest other run on the same device whose model.json
    beside its traces holds the same spec (parsed, not stepscope's reading of it), one
    on nodes of as many GPUs (the simulator's gpus_per_node) first."""
    target = cli(db, run)
    spec = json.loads((SIM / run / "model.json").read_text())
    con = duckdb.connect(str(db), read_only=True)
    newest_first = [r for r in run_tokens(con) if r != run]
    con.close()
    same = [o for o in newest_first if (SIM / o / "model.json").is_file()
            and json.loads((SIM / o / "model.json").read_text()) == spec
            and cli(db, o).run.device == target.run.device]
    node = [o for o in same if _sim_gpus_per_node(o) == _sim_gpus_per_node(run)]
    if not (node or same):
        raise AssertionError("no comparable run")
    return (node or same)[0]


def _sim_gpus_per_node(run: str) -> int:
    return int(json.loads((SIM / run / "ground_truth.json").read_text())["config"]
               ["gpus_per_node"])


def test_compare_defaults_to_a_comparable_run_and_warns(monkeypatch, sample_db):
    want = comparable(sample_db, "diff_scaled")
    at = open_page(monkeypatch, sample_db, "compare", "diff_scaled")
    assert at.selectbox(key="cmp_base").value == want
    # diff_base: the identical model.json on 4-GPU nodes (dp_exposed's nodes have 2;
    # straggler's model only matches its FLOPs per step)
    assert want == "diff_base"
    assert "same device with the same model spec" in texts(at)
    warnings = [w.value for w in at.warning]
    assert any("Different world sizes: 8 → 16" in w for w in warnings), warnings
    assert not any("Different devices" in w for w in warnings)
    text = texts(at)
    # work per GPU next to a faster step with a lower MFU
    assert "Work per GPU" in text and "0.50×" in text and "so MFU fell" in text
    # the CLI diff's recommendations, communication table and stragglers
    con = duckdb.connect(str(sample_db), read_only=True)
    from stepscope.analyzers.diff.build import build_diff
    diff = build_diff(cli(sample_db, want), cli(sample_db, "diff_scaled"),
                      op_times(con, want), op_times(con, "diff_scaled"))
    con.close()
    for rec in diff.recommendations:
        assert rec.title in text
    frames = [d.value for d in at.dataframe]
    comm = next(f for f in frames if "exposed ms" in f.columns)
    assert len(comm) == len(diff.collectives)
    for s in diff.stragglers.new:
        assert f"**new in B**: rank {s.rank}" in text


def test_compare_warns_when_nothing_is_comparable(monkeypatch, sample_db):
    at = open_page(monkeypatch, sample_db, "compare", "fp32_v100")
    warnings = " ".join(w.value for w in at.warning)
    assert "Different devices" in warnings and "Tesla V100" in warnings
    assert "Different models or batches" in warnings
    assert "none ran on the same device" in texts(at)


def test_compare_keeps_the_linked_baseline(monkeypatch, sample_db):
    at = open_page(monkeypatch, sample_db, "compare", "diff_scaled", vs="healthy")
    assert at.selectbox(key="cmp_base").value == "healthy"
    assert at.query_params["vs"] in ("healthy", ["healthy"])


# ------------------------------------------------------------------ no silent fallbacks
def test_a_link_to_a_missing_run_says_so(monkeypatch, sample_db):
    at = open_page(monkeypatch, sample_db, "overview", "doesnotexist")
    assert "Run 'doesnotexist' does not exist" in at.error[0].value
    assert at.query_params["run"] in ("doesnotexist", ["doesnotexist"])  # not rewritten
    assert not at.metric  # no other run's numbers
    at.button(key="open_newest").click().run()
    no_exception(at)
    assert at.header[0].value == "Overview" and not at.error


def test_runs_and_trends_say_what_they_show(monkeypatch, sample_db):
    runs = open_page(monkeypatch, sample_db, "runs", "healthy")
    assert "Pick a run in the sidebar to see" not in texts(runs)
    assert "Run 'healthy'" in texts(runs)
    trends = open_page(monkeypatch, sample_db, "trends", "healthy")
    when = trends.dataframe[0].value["when (UTC)"]
    assert when.notna().all() and when.str.match(r"\d{4}-\d\d-\d\d \d\d:\d\d").all()


@pytest.mark.parametrize("run", ["healthy", "cpu-pipeline"])
def test_plan_starts_from_the_runs_facts_and_marks_what_it_assumes(monkeypatch, sample_db,
                                                                    run):
    """GPUs, GPUs per node, network bandwidth and kernel efficiency come from the report
    where it has them (the caption names them), every other value is listed as assumed;
    a CPU run's device is an assumed GPU, said so."""
    report = cli(sample_db, run)
    at = open_page(monkeypatch, sample_db, "plan", run)
    if at.toggle:  # a calibrated run: its fixed-assumption form
        at.toggle(key="pl_fixed").set_value(True).run()
        no_exception(at)
    caption = next(t for t in texts(at).splitlines() if "Assumed until you change" in t)
    form = {n.label: n.value for n in at.number_input}
    assert form["GPUs"] == report.run.world_size and f"GPUs ({form['GPUs']})" in caption
    per_node = report.layout.gpus_per_node
    assert form["GPUs per node"] == (per_node or 8)
    crossing = [c.measured_bus_bw_gbs or c.bus_bw_gbs for c in report.collectives
                if c.crosses_nodes and not c.is_p2p]
    if crossing:
        assert form["Network GB/s per GPU"] == pytest.approx(max(crossing))
        assert "measured across nodes" in caption
    else:
        assert "no collective crossed nodes" in caption
    if report.mfu.mfu is not None:
        eff = 1 + report.mfu.waterfall[0].points / 100
        assert form["Kernel efficiency"] == pytest.approx(eff, abs=5e-4)
        assert f"kernel efficiency ({form['Kernel efficiency']:g})" in caption
    else:
        assert "no MFU for this run" in caption
    if report.run.device and "cpu" in report.run.device.lower():
        assert "GPU (H100-SXM: the peak table has no" in caption
    assert "parameters (8 B), sequence (8192), global batch (4 Mi tokens)" in caption


def test_every_run_page_offers_the_whole_report(monkeypatch, sample_db):
    """The sidebar's downloads are the CLI's renderers of the same report."""
    from stepscope.dashboard.app import data

    html, markdown = data.report_files(sample_db, "straggler")
    report = cli(sample_db, "straggler")
    assert html == report_html(report) and markdown == report_markdown(report)
    for page in sorted(RUN_PAGES):
        at = open_page(monkeypatch, sample_db, page, "straggler")
        labels = [b.proto.label for b in at.sidebar.get("download_button")]
        assert {"Report (HTML)", "Report (Markdown)"} <= set(labels), page
    assert set(PAGES) - RUN_PAGES == {"upload", "trends", "help"}


def test_help_shows_the_section_a_number_links_to(monkeypatch, sample_db):
    at = open_page(monkeypatch, sample_db, "help", None, doc="mfu", section="The waterfall")
    text = texts(at)
    assert "## The waterfall" in text and "kernel efficiency" in text
    assert "## Peaks" not in text  # only the section
