"""The Roofline and Memory pages and the all_to_all section of the Communication page,
through streamlit's AppTest: what they show equals the report model and the simulator's
ground truth (moe_roofline), and runs without the data say why."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from dashboard_helpers import CPU, SIMULATED, app_test, no_exception, texts

from stepscope.analyzers.report import build_report
from stepscope.analyzers.results import Report
from stepscope.dashboard.app.uploads import ingest_staged
from stepscope.dashboard.render.format import pct
from stepscope.dashboard.render.memory import NO_EVENTS

pytestmark = pytest.mark.slow  # renders the analyses pages of ingested runs

RUNS = {"moe_roofline": SIMULATED / "moe_roofline", "straggler": SIMULATED / "straggler",
        "cpu-straggler": CPU / "straggler"}


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("analyses") / "pages.duckdb"
    for run, folder in RUNS.items():
        ingest_staged([folder], path, run)
    return path


def model(db: Path, run: str) -> Report:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return build_report(con, run)
    finally:
        con.close()


def open_page(monkeypatch: pytest.MonkeyPatch, db: Path, page: str, run: str):
    at = app_test(monkeypatch, db, page=page, run=run)
    at.run()
    no_exception(at)
    return at


def metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_roofline_page_shows_the_models_shares(monkeypatch: pytest.MonkeyPatch,
                                               db: Path) -> None:
    at = open_page(monkeypatch, db, "roofline", "moe_roofline")
    roof = model(db, "moe_roofline").roofline
    assert roof is not None
    shown = metrics(at)
    assert shown["Kernel time with shapes"] == pct(roof.coverage)
    assert shown["HBM roof"] == "3350 GB/s"
    kinds = at.dataframe[0].value
    # an op kind's name says its dtype already: 'GEMMs (bf16)', never '... bf16' again
    assert list(kinds["op kind"]) == [k.name for k in roof.kinds]
    assert all(k.dtype is None or k.name.endswith(f"({k.dtype})") for k in roof.kinds)
    assert list(kinds["roof"]) == pytest.approx([k.roof_share for k in roof.kinds], abs=1e-4)
    parts = at.dataframe[1].value
    assert list(parts["points"]) == pytest.approx(
        [p.points for p in roof.kernel_efficiency], abs=1e-3)
    assert sum(parts["points"]) == pytest.approx(roof.stage_points, abs=0.01)
    assert len(at.get("plotly_chart")) == 3  # roofline, parts, kernels' shares
    assert "Kernel efficiency by op" in texts(at)


def test_memory_page_shows_the_simulated_peak(monkeypatch: pytest.MonkeyPatch,
                                              db: Path) -> None:
    truth = json.loads((SIMULATED / "moe_roofline" / "ground_truth.json").read_text())["memory"]
    at = open_page(monkeypatch, db, "memory", "moe_roofline")
    shown = metrics(at)
    assert shown["Peak allocated"] == f"{truth['2']['peak_allocated'] / 1e9:.2f} GB"
    assert shown["Peak reserved"] == f"{truth['2']['peak_reserved'] / 1e9:.2f} GB"
    assert shown["Most memory"] == "rank 2"
    live = at.dataframe[1].value
    want = sorted(truth["2"]["live_at_peak"].items(), key=lambda kv: -kv[1])[:5]
    assert list(live["op"]) == [op for op, _ in want]
    at.selectbox(key="mem_rank").select(0).run()
    no_exception(at)
    assert at.subheader[0].value == "Rank 0: live allocations at its peak"
    assert list(at.dataframe[1].value["GB"]) == pytest.approx(
        [round(b / 1e9, 3) for _, b in sorted(truth["0"]["live_at_peak"].items(),
                                              key=lambda kv: -kv[1])[:5]])


def test_communication_page_shows_the_all_to_all_imbalance(monkeypatch: pytest.MonkeyPatch,
                                                          db: Path) -> None:
    at = open_page(monkeypatch, db, "communication", "moe_roofline")
    a2a = model(db, "moe_roofline").all_to_all
    assert a2a is not None
    shown = metrics(at)
    assert shown["Imbalance (busiest / mean)"] == f"{a2a.groups[0].imbalance:.2f}x"
    assert shown["Receives most"] == "rank 2"
    assert "all_to_all: imbalance across ranks" in texts(at)


def test_runs_without_the_data_say_why(monkeypatch: pytest.MonkeyPatch, db: Path) -> None:
    assert NO_EVENTS in texts(open_page(monkeypatch, db, "memory", "straggler"))
    assert "CPU-only traces" in texts(open_page(monkeypatch, db, "roofline", "cpu-straggler"))
    at = open_page(monkeypatch, db, "communication", "straggler")
    assert "all_to_all" not in texts(at)


def test_kernels_whose_names_start_alike_stay_separate_bars() -> None:
    """Plotly merges bars that share a label: two GEMMs differing only past the 60th
    character once showed as one bar at the sum of their shares (150% of the roof)."""
    from stepscope.analyzers.results import RoofRow
    from stepscope.dashboard.app.charts_analyses import roof_shares

    stem = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x128x64_warpgroupsize1x1_"
    rows = tuple(RoofRow(name=stem + tail, kind="gemm", dtype="bf16", time_ms=1.0,
                         time_share=0.5, kernels_per_step=1.0, tflops=500.0, gbs=None,
                         intensity=None, bound="compute", roof_share=share, lost_ms=0.4)
                 for tail, share in (("fc1_fwd", 0.56), ("fc2_fwd", 0.57)))
    (bar,) = roof_shares(rows, "Share of the roof").data
    assert len(set(bar.y)) == 2
    assert list(bar.x) == [0.56, 0.57]
    assert list(bar.customdata) == [r.name for r in rows]
