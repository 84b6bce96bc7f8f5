"""The numbers a dashboard link carries (?peak=, ?step=, ?rank=) are read as every CLI
option is (ingest/number_text.py): nan, inf, 1e999, 1_0 or ' 5' were taken by float() and
int(). A bad one is one warning on the page naming the parameter and the value, and the
page falls back to what it shows without it; never a traceback."""

from __future__ import annotations

import duckdb
import pytest
from dashboard_helpers import app_test, no_exception
from streamlit.testing.v1 import AppTest

from stepscope.analyzers.report import build_report


def _open(monkeypatch: pytest.MonkeyPatch, db, page: str, run: str, **params: str
          ) -> AppTest:
    at = app_test(monkeypatch, db, page=page, run=run)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    no_exception(at)
    return at


def _warnings(at: AppTest) -> list[str]:
    return [str(w.value) for w in at.warning if "The link's" in str(w.value)]


@pytest.mark.parametrize(("text", "problem"), [
    ("nan", "not a finite number: 'nan'"),
    ("1e999", "not a finite number: '1e999'"),
    ("1_0", "not a number: '1_0'"),
    (" 5", "not a number: ' 5'"),
    ("100001", "'100001' is out of range: must be in [0, 100000]"),
])
def test_a_bad_peak_is_said_and_the_table_is_used(monkeypatch, sample_db, text, problem):
    at = _open(monkeypatch, sample_db, "overview", "cpu-ddp", peak=text)
    assert _warnings(at) == [f"The link's peak= is ignored ({problem}); MFU is measured "
                             "against the peak table's."]
    assert at.sidebar.number_input(key="peak_tflops").value == 0.0
    assert "peak" not in at.query_params


def test_a_good_peak_is_taken(monkeypatch, sample_db):
    at = _open(monkeypatch, sample_db, "overview", "cpu-ddp", peak="19.5")
    assert _warnings(at) == []
    assert at.sidebar.number_input(key="peak_tflops").value == 19.5


@pytest.mark.parametrize(("step", "rank", "said"), [
    ("1_0", None, ["The link's step= is ignored (not a whole number: '1_0'); showing the "
                   "slowest step."]),
    (" 2", "+3", ["The link's step= is ignored (not a whole number: ' 2'); showing the "
                  "slowest step.",
                  "The link's rank= is ignored (not a whole number: '+3'); showing the "
                  "default ranks."]),
])
def test_a_bad_step_or_rank_falls_back(monkeypatch, sample_db, step, rank, said):
    params = {"step": step, **({"rank": rank} if rank else {})}
    at = _open(monkeypatch, sample_db, "timeline", "straggler", **params)
    assert _warnings(at) == said
    con = duckdb.connect(str(sample_db), read_only=True)
    try:
        report = build_report(con, "straggler")
    finally:
        con.close()
    slowest = max((s for s in report.per_step if s.complete), key=lambda s: s.step_time_ms)
    assert at.selectbox(key="tl_step").value == slowest.step


def test_a_good_step_and_rank_are_taken(monkeypatch, sample_db):
    at = _open(monkeypatch, sample_db, "timeline", "straggler", step="1", rank="5")
    assert _warnings(at) == []
    assert at.selectbox(key="tl_step").value == 1  # the slowest is 2
    assert 5 in at.multiselect(key="tl_ranks_straggler").value
