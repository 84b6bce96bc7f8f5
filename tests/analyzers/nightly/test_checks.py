"""`--fail-if` thresholds: parsing, the metric catalogue, values and verdicts."""

from __future__ import annotations

import pytest

from stepscope.analyzers.nightly.checks import (
    evaluate_json,
    metric_catalog,
    metric_value,
    parse_threshold,
)
from stepscope.ingest import UsageError

REPORT = {
    "step_time_ms": 10.0,
    "breakdown_ms": {"compute": 6.0, "recompute": 0.0, "exposed_comm": 2.5,
                     "straggler_wait": 1.0, "bubble": 0.0, "memory": 0.2, "idle": 0.3},
    "mfu": {"mfu": 0.41, "hfu": None},
    "pipeline": None,
    "stragglers": [{"rank": 3}],
    "run": {"world_size": 16, "failed_files": [{"file": "rank9.json", "error": "x"}]},
}
DIFF = {"a": {"step_time_ms": 8.0}, "mfu_delta_points": -3.2, "step_time_delta_ms": 2.0,
        "breakdown_delta_ms": {"exposed_comm": 1.5}}


@pytest.mark.parametrize(("expr", "metric", "op", "limit"), [
    ("mfu.mfu < 0.35", "mfu.mfu", "<", 0.35),
    ("  share.exposed_comm>=.2 ", "share.exposed_comm", ">=", 0.2),
    ("diff.mfu_delta_points <= -2e0", "diff.mfu_delta_points", "<=", -2.0),
    ("step_time_ms > +12", "step_time_ms", ">", 12.0),
])
def test_parse(expr: str, metric: str, op: str, limit: float) -> None:
    t = parse_threshold(expr)
    assert (t.metric, t.op, t.limit) == (metric, op, limit)


@pytest.mark.parametrize("expr", ["mfu.mfu = 0.3", "mfu.mfu < ", "< 0.3", "mfu.mfu < 30%"])
def test_malformed_is_usage_error(expr: str) -> None:
    with pytest.raises(UsageError, match="expected '<metric> <op> <number>'"):
        parse_threshold(expr)


def test_unknown_metric_lists_the_valid_ones() -> None:
    with pytest.raises(UsageError) as info:
        parse_threshold("share.comm > 0.1")
    message = str(info.value)
    assert "unknown metric 'share.comm'" in message
    assert all(m in message for m in metric_catalog())


def test_values() -> None:
    assert metric_value("share.exposed_comm", REPORT, None) == pytest.approx(0.25)
    assert metric_value("breakdown_ms.idle", REPORT, None) == 0.3
    assert metric_value("count.stragglers", REPORT, None) == 1.0
    assert metric_value("count.failed_files", REPORT, None) == 1.0
    # report schema 1 wrote the list as a JSON string
    older = {**REPORT, "run": {"failed_files": '[{"file": "a", "error": "x"}, {"file": "b"}]'}}
    assert metric_value("count.failed_files", older, None) == 2.0
    assert metric_value("run.world_size", REPORT, None) == 16.0
    assert metric_value("diff.step_time_delta_pct", REPORT, DIFF) == pytest.approx(25.0)
    assert metric_value("diff.breakdown_delta_ms.exposed_comm", REPORT, DIFF) == 1.5
    # not computable: null MFU field, no pipeline, no diff
    assert metric_value("mfu.hfu", REPORT, None) is None
    assert metric_value("pipeline.bubble_fraction", REPORT, None) is None
    assert metric_value("diff.mfu_delta_points", REPORT, None) is None


def test_verdicts_at_the_boundary() -> None:
    exprs = ["mfu.mfu < 0.41", "mfu.mfu <= 0.41", "step_time_ms > 10", "step_time_ms >= 10",
             "diff.mfu_delta_points < -3", "mfu.hfu > 0"]
    results = evaluate_json([parse_threshold(e) for e in exprs], REPORT, DIFF)
    assert [r.status for r in results] == ["pass", "fail", "pass", "fail", "fail", "missing"]
    assert [r.failed for r in results] == [False, True, False, True, True, True]
    allowed = evaluate_json([parse_threshold("mfu.hfu > 0")], REPORT, DIFF,
                            allow_missing=True)
    assert allowed[0].status == "skipped" and not allowed[0].failed
    assert results[4].line() == "diff.mfu_delta_points = -3.2 (threshold: fail if < -3)"
