"""The text formats of each model: one table per model of the renderers that `--format`
chooses from (stepscope.outputs.add_format_options and emit read them)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple, TypeVar

import polars as pl

from stepscope.analyzers.results import Diff, HangReport, PlanResult, Report, WhatIfResult, to_json
from stepscope.analyzers.summary import RunSummary
from stepscope.dashboard.render.critical_path import whatif_markdown, whatif_text
from stepscope.dashboard.render.diff import diff_json, diff_markdown
from stepscope.dashboard.render.hang import hang_json, hang_markdown
from stepscope.dashboard.render.html_diff import diff_html
from stepscope.dashboard.render.html_report import report_html
from stepscope.dashboard.render.nightly import history_json, history_markdown, history_text
from stepscope.dashboard.render.plan import plan_json, plan_markdown
from stepscope.dashboard.render.report import report_json, report_markdown
from stepscope.dashboard.render.summary import summary_json, summary_markdown, summary_text

T = TypeVar("T")
Formats = Mapping[str, Callable[[T], str]]

REPORT: Formats[Report] = {"json": report_json, "md": report_markdown, "html": report_html}
DIFF: Formats[Diff] = {"json": diff_json, "md": diff_markdown, "html": diff_html}
PLAN: Formats[PlanResult] = {"json": plan_json, "md": plan_markdown}
HANG: Formats[HangReport] = {"json": hang_json, "md": hang_markdown}
WHATIF: Formats[WhatIfResult] = {"text": whatif_text, "md": whatif_markdown, "json": to_json}
SUMMARY: Formats[Sequence[RunSummary]] = {"text": summary_text, "md": summary_markdown,
                                          "json": summary_json}


class JobHistory(NamedTuple):
    """A job's nights as `stepscope history` prints them (analyzers.nightly.history)."""
    job: str
    nights: pl.DataFrame


HISTORY: Formats[JobHistory] = {"text": lambda h: history_text(h.job, h.nights),
                                "md": lambda h: history_markdown(h.job, h.nights),
                                "json": lambda h: history_json(h.job, h.nights)}
