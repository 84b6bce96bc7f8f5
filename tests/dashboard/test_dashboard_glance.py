"""Read at a glance (issue 45, point 9), through streamlit's AppTest on the bundled runs:
controls open on what the report names, labels that say a thing once, gains in ms and
share of the step, Trends joining only one job's runs, assumed link peaks said, chart
labels clear of lines, axes and legends, the Timeline's ranks counted."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import duckdb
import pytest
from dashboard_helpers import SIMULATED, app_test, no_exception, texts

from stepscope.analyzers.report import build_report

pytestmark = pytest.mark.slow  # renders pages of ingested runs


def test_whatif_opens_on_the_straggler(monkeypatch: pytest.MonkeyPatch, sample_db: Path) -> None:
    """The simulator slowed rank 3 of `straggler` (ground truth); the what-if's rank
    control opens on it, not on rank 0."""
    truth = json.loads((SIMULATED / "straggler" / "ground_truth.json").read_text())
    at = app_test(monkeypatch, sample_db, page="critical_path", run="straggler")
    at.run()
    no_exception(at)
    rank = next(s for s in at.selectbox if s.key == "cp_rank")
    assert rank.value == truth["config"]["slow_rank"] == 3


def test_op_kinds_name_their_dtype_once(monkeypatch: pytest.MonkeyPatch, sample_db: Path) -> None:
    """The roofline's op kinds read 'GEMMs (bf16)', not 'GEMMs (bf16) bf16'; shapes and
    kernels, whose names do not say it, still get it."""
    at = app_test(monkeypatch, sample_db, page="roofline", run="moe_roofline")
    at.run()
    no_exception(at)
    kinds = next(d.value for d in at.dataframe if "op kind" in d.value.columns)["op kind"]
    assert "GEMMs (bf16)" in kinds.to_list()
    assert all(name.count("bf16") <= 1 for name in kinds), kinds.to_list()
    shapes = next(d.value for d in at.dataframe if "M x N x K" in d.value.columns)["M x N x K"]
    assert all(name.endswith(" bf16") for name in shapes), shapes.to_list()


def test_gains_lead_with_ms_and_share_of_the_step(monkeypatch: pytest.MonkeyPatch,
                                                  sample_db: Path) -> None:
    """Each recommendation's gain reads in ms/step and its share of the step before MFU
    points (a third of the step must not read as '+0.014 pts'): straggler's 'replace
    rank 3' is 4.02 of 17.70 ms = 22.7% (17.70 ms: the simulator's step time)."""
    truth = json.loads((SIMULATED / "straggler" / "ground_truth.json").read_text())["mfu"]
    con = duckdb.connect(str(sample_db), read_only=True)
    report = build_report(con, "straggler")
    con.close()
    assert report.step_time_ms == pytest.approx(truth["step_time_ms"], abs=0.01)
    at = app_test(monkeypatch, sample_db, page="overview", run="straggler")
    at.run()
    no_exception(at)
    shown = texts(at)
    for rec in report.recommendations[:5]:
        share = 100 * rec.expected_gain_ms / truth["step_time_ms"]
        assert f"{rec.expected_gain_ms:.2f} ms/step ({share:.1f}% of the step)" in shown
    assert "4.02 ms/step (22.7% of the step), about +9.7 MFU points" in shown


def _device(run: str) -> str:
    config = json.loads((SIMULATED / run / "ground_truth.json").read_text())["config"]
    return str(config["device_name"])


def test_trends_join_only_one_jobs_runs(monkeypatch: pytest.MonkeyPatch,
                                        sample_db: Path) -> None:
    """Without a nightly history, Trends draws a line only through runs of one job: the
    simulated runs a line joins have one model.json and one device (the simulator's
    files, not the project's reading of them); the others are lone points."""
    at = app_test(monkeypatch, sample_db, page="trends")
    at.run()
    no_exception(at)
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    mfu = [t for t in fig["data"] if t["type"] == "scatter"]
    lines = [t["x"] for t in mfu if "lines" in t["mode"]]
    alone = [x for t in mfu if t["mode"] == "markers" for x in t["x"]]
    assert len(lines) > 1 and {"diff_base", "diff_scaled"} <= set(next(
        x for x in lines if "diff_base" in x))
    assert "fp32_v100" in alone  # the only V100 run
    for runs in lines:
        simulated = [r for r in runs if (SIMULATED / r / "model.json").is_file()]
        specs = {(SIMULATED / r / "model.json").read_text() for r in simulated}
        assert len(specs) <= 1 and len({_device(r) for r in simulated}) <= 1, runs
    assert sorted(x for t in mfu for x in t["x"]) == sorted(at.dataframe[0].value["run"])


def test_assumed_link_peaks_say_so(monkeypatch: pytest.MonkeyPatch, sample_db: Path) -> None:
    """diff_scaled's DP all_reduce crosses nodes (four hosts in the simulator's run):
    its 50 GB/s network peak is an assumption and the caption under the links table
    says so; NVLink's peak is the device's (peak table), and the chart's link label
    marks the assumed one."""
    at = app_test(monkeypatch, sample_db, page="communication", run="diff_scaled")
    at.run()
    no_exception(at)
    links = next(d.value for d in at.dataframe if "peak GB/s" in d.value.columns)
    assert {(link, peak) for link, peak in zip(links["link"], links["peak GB/s"],
                                               strict=True)} >= {("network", 50.0)}
    caption = next(str(c.value) for c in at.caption if "Link peaks" in str(c.value))
    assert "network 50 GB/s assumed (one 400 Gb/s NIC per GPU)" in caption, caption
    assert "nvlink" in caption and "GB/s from the peak table" in caption
    fig = next(json.loads(c.proto.spec) for c in at.get("plotly_chart")
               if "Bus bandwidth" in c.proto.spec)
    peaks = next(t for t in fig["data"] if t.get("name") == "link peak")
    assert "network (assumed peak)" in peaks["text"] and "nvlink" in peaks["text"]


def _label_boxes(fig: dict) -> list[tuple[str, float, float]]:
    """(text, low, high) of the waterfall's labels in % of peak, LINE_UNITS a line."""
    from stepscope.dashboard.app.charts import LINE_UNITS
    out = []
    for a in fig["layout"]["annotations"]:
        height = LINE_UNITS * (a["text"].count("<br>") + 1)
        lo = a["y"] - height if a["yanchor"] == "top" else a["y"]
        out.append((a["text"], lo, lo + height))
    return out


def test_waterfall_labels_clear_the_hfu_line(sample_db: Path) -> None:
    """straggler: HFU 33.7% ran through the straggler wait's '9.2%' and over the MFU's
    '33.0'; every label's box now clears the line and stays above the axis."""
    from stepscope.dashboard.app.charts import LABEL_PAD, mfu_waterfall
    con = duckdb.connect(str(sample_db), read_only=True)
    report = build_report(con, "straggler")
    con.close()
    assert report.mfu.hfu is not None
    hfu = 100 * report.mfu.hfu
    fig = json.loads(mfu_waterfall(report).to_json())
    boxes = _label_boxes(fig)
    assert len(boxes) == len(report.mfu.waterfall) + 2
    assert "9.2%" in next(t for t, _, _ in boxes if t.startswith("-5.0"))
    for text, lo, hi in boxes:
        assert lo >= 0 and not (lo - LABEL_PAD < hfu < hi + LABEL_PAD), (text, lo, hi, hfu)


def test_tiny_bars_label_above_the_axis() -> None:
    """PARAM's DLRM job (MFU and HFU 0.027%: every bar after kernel efficiency ends at
    0.36% of peak or less) printed its labels below the axis over the category names;
    the numbers are its waterfall's (kernel efficiency -99.64, exposed -0.005, straggler
    wait -0.14, bubble 0, memory -0.0005, idle -0.19)."""
    from stepscope.dashboard.app.charts import LABEL_PAD, LINE_UNITS, waterfall_label_places
    points = [-99.64, 0.0, -0.005, -0.14, 0.0, -0.0005, -0.19]
    levels = [100.0]
    for p in points:
        levels.append(levels[-1] + p)
    bars = [(0.0, 100.0), *[(min(a, b), max(a, b)) for a, b in itertools.pairwise(levels)],
            (0.0, 0.027)]
    lines = [1, *[2] * len(points), 1]
    places = waterfall_label_places(bars, lines, 0.027, [False, *[True] * len(points), False])
    for (y, anchor), n in zip(places, lines, strict=True):
        lo = y - n * LINE_UNITS if anchor == "top" else y
        assert lo >= 0 and lo > 0.027 + LABEL_PAD - 1e-9


def test_timeline_counts_the_ranks_it_shows(monkeypatch: pytest.MonkeyPatch,
                                            sample_db: Path) -> None:
    """diff_scaled has 16 ranks; beside the step the chips were cut after rank 10 with no
    word of the other five: the control now has the whole width and a caption counts
    the ranks shown."""
    at = app_test(monkeypatch, sample_db, page="timeline", run="diff_scaled")
    at.run()
    no_exception(at)
    chosen = next(m for m in at.multiselect if m.key == "tl_ranks_diff_scaled").value
    assert len(chosen) == 16
    assert "16 of 16 ranks shown: 0, 1, 2, 3, 4, 5, 6, 7, … (16 ranks)" in texts(at)


def test_rank_legend_sits_above_the_host_labels(sample_db: Path) -> None:
    """Per rank, grouped by host: the legend above the bars (below them, the rotated rank
    labels pushed diff_scaled's host row under it at 1000 px)."""
    from stepscope.dashboard.app.charts import rank_breakdown
    con = duckdb.connect(str(sample_db), read_only=True)
    report = build_report(con, "diff_scaled")
    con.close()
    fig = json.loads(rank_breakdown(report).to_json())
    legend = fig["layout"]["legend"]
    assert legend["y"] >= 1 and legend["yanchor"] == "bottom"
    hosts = fig["data"][0]["x"][0]
    assert len(set(hosts)) == 4 and "?" not in hosts
