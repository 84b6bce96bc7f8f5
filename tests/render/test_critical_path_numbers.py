"""The Critical path section's path per step next to the step time (issue 42 §4): the
path per step is each step's reference rank's window (the longest of the step), the step
time the mean over ranks; they differ on the simulated `critical_path` set (17.94 vs
17.70 ms: rank 5, the slow one, has the longest windows) and the section says which is
which instead of printing one number beside the other without a word."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

import stepscope
from stepscope.analyzers.report import build_report
from stepscope.dashboard.render.critical_path import path_and_step
from stepscope.dashboard.render.html_report import report_html
from stepscope.dashboard.render.report import report_markdown


def test_path_per_step_and_step_time_are_both_named(sample_db: Path) -> None:
    with stepscope.open(sample_db) as store:
        rep = build_report(store.con, "critical_path")
    cp = rep.critical_path
    assert cp is not None
    gap = cp.path_ms - rep.step_time_ms
    assert gap > 0.1  # the reference windows are the longest ones
    # the path per step is the mean of the steps' reference windows
    assert cp.path_ms == pytest.approx(sum(s.window_ms for s in cp.steps) / len(cp.steps))
    line = (f"{cp.path_ms:.2f} ms/step on average, each step's reference rank's window (the "
            f"rank with the longest window of the step): {gap:.2f} ms longer than the step "
            f"time of {rep.step_time_ms:.2f} ms (the mean over ranks of each rank's window, "
            "as the breakdown)")
    assert path_and_step(cp, rep.step_time_ms) == line
    md = report_markdown(rep).split("## Critical path", 1)[1]
    assert line in md.split("\n\n", 2)[1]
    assert line.replace("'", "&#x27;") in report_html(rep).split('id="critical-path"', 1)[1]
    # equal lengths read as equal
    same = msgspec.structs.replace(cp, path_ms=rep.step_time_ms + 0.001)
    assert path_and_step(same, rep.step_time_ms).endswith(
        "as long as the step time (the mean over ranks of each rank's window, as the "
        "breakdown)")
