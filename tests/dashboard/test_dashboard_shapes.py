"""The dashboard reads what the CLI reads (issue 20, sections 3 and 6): the idle split on
the Overview, one definition of a complete step on the Ranks and Kernels pages, a Plan
page for a device without a bf16 peak."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from conftest import kineto_trace, write_trace
from dashboard_helpers import SIMULATED, app_test, no_exception, texts
from streamlit.testing.v1 import AppTest

from stepscope.analyzers.report import build_report
from stepscope.dashboard.app.uploads import ingest_staged

pytestmark = pytest.mark.slow  # renders pages of ingested runs


@pytest.fixture(scope="module")
def shapes_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("dash_shapes")
    db = tmp / "d.duckdb"
    ingest_staged([SIMULATED / "host_bound"], db, "host_bound")
    ingest_staged([SIMULATED / "fp32_v100"], db, "fp32_v100")
    one = write_trace(tmp / "one" / "rank0.json", kineto_trace(rank=0, world_size=1, steps=1))
    ingest_staged([one.parent], db, "one_step")
    return db


def open_page(monkeypatch: pytest.MonkeyPatch, db: Path, page: str, run: str) -> AppTest:
    at = app_test(monkeypatch, db, page=page, run=run)
    at.run()
    no_exception(at)
    return at


def test_overview_shows_the_idle_split(monkeypatch: pytest.MonkeyPatch, shapes_db: Path) -> None:
    con = duckdb.connect(str(shapes_db), read_only=True)
    report = build_report(con, "host_bound")
    con.close()
    assert report.idle_split is not None
    at = open_page(monkeypatch, shapes_db, "overview", "host_bound")
    assert "Idle: why the GPU waited" in texts(at)
    split = next(d.value for d in at.dataframe if "part of idle" in d.value.columns)
    assert split["ms/step"].sum() == pytest.approx(report.breakdown_ms.idle, abs=2e-3)
    host = next(d.value for d in at.dataframe if "the host ran meanwhile" in d.value.columns)
    assert host["the host ran meanwhile"][0] == "aten::index"
    assert "Stop synchronizing the host" in texts(at)


def test_one_profiled_step_is_complete_everywhere(monkeypatch: pytest.MonkeyPatch,
                                                  shapes_db: Path) -> None:
    con = duckdb.connect(str(shapes_db), read_only=True)
    report = build_report(con, "one_step")
    con.close()
    assert [s.complete for s in report.per_step] == [True]
    ranks = open_page(monkeypatch, shapes_db, "ranks", "one_step")
    grid = next(d.value for d in ranks.dataframe if "complete" in d.value.columns)
    assert grid["complete"].tolist() == [True]
    kernels = open_page(monkeypatch, shapes_db, "kernels", "one_step")
    assert "No GPU ops in the complete steps" not in texts(kernels)
    table = kernels.dataframe[0].value
    # numbered as the chart's bars are
    assert "sm90_xmma_gemm_bf16" in [k.split(". ", 1)[1] for k in table["kernel"].tolist()]


def test_plan_page_for_a_v100_run(monkeypatch: pytest.MonkeyPatch, shapes_db: Path) -> None:
    at = open_page(monkeypatch, shapes_db, "plan", "fp32_v100")
    # the run has a model.json, so the page opens calibrated on it; the fixed form is one
    # toggle away and starts from the run's device
    assert "Calibrated on run **fp32_v100**" in texts(at)
    at.toggle(key="pl_fixed").set_value(True).run()
    no_exception(at)
    assert at.selectbox(key="pl_gpu").value == "V100-SXM2"
    assert "no bf16 peak: planned at its fp16 peak" in texts(at)  # 8B on 4 x 32 GB: no fit
    at.number_input(key="pl_params").set_value(1.0)
    at.form_submit_button[0].click()
    at.run()
    no_exception(at)
    shown = texts(at)
    assert "Best: TP" in shown and "no bf16 peak: planned at its fp16 peak" in shown


# ------------------------------------------------------------------ kernel names
ANON = "void at::native::(anonymous namespace)::{}<float, 4>(float*, float const*, int)"
TILES = ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x{}x64_warpgroupsize1x1"
         "_execute_segment_k_off_kernel__5x_cublas")


def test_distinct_kernels_are_never_merged(tmp_path: Path) -> None:
    """Two `(anonymous namespace)` kernels and two GEMMs differing in a tile size keep
    their full names in the diff's op times (JSON), and stay distinct when shortened."""
    from stepscope.analyzers.comm.collectives import op_times
    from stepscope.dashboard.render.format import short_name, short_names

    trace = kineto_trace(rank=0, world_size=1, steps=3)
    names = iter([ANON.format("softmax_warp_forward"), ANON.format("softmax_warp_backward"),
                  TILES.format(128)])
    for event in trace["traceEvents"]:
        if event.get("name") == "sm90_xmma_gemm_bf16":
            event["name"] = next(names)
    db = tmp_path / "k.duckdb"
    import stepscope
    stepscope.ingest_run(write_trace(tmp_path / "k" / "rank0.json", trace), db=db, run="k")
    con = duckdb.connect(str(db), read_only=True)
    ops = op_times(con, "k")
    con.close()
    assert {ANON.format("softmax_warp_forward"), ANON.format("softmax_warp_backward")} <= set(ops)
    gemms = [TILES.format(t) for t in (64, 128, 256)]
    shown = short_names(gemms, 56)
    assert len(set(shown)) == 3 and all(len(s) <= 58 for s in shown)
    assert all(f"128x{t}x64" in s for s, t in zip(shown, (64, 128, 256), strict=True))
    one = short_name(gemms[0], 56)
    assert one.startswith("sm90_xmma") and one.endswith("_cublas") and "…" in one
    anon = short_names([ANON.format("softmax_warp_forward"), ANON.format("softmax_warp_backward")],
                       60)
    assert anon[0] != anon[1] and all(len(s) <= 62 for s in anon)
    assert short_name(ANON.format("f"), 200).startswith("void at::native::(anon)::f<")
