"""report.html of `stepscope nightly`: the night's verdict, checks and change against
its baseline, then the full run report, as one self-contained HTML file."""

from __future__ import annotations

from datetime import datetime

from stepscope.analyzers.results import NightlyReport
from stepscope.dashboard.render.format import EN_DASH, mfu_pct, num, points
from stepscope.dashboard.render.html_diff import diff_sections
from stepscope.dashboard.render.html_page import card, cards, esc, page, section, table
from stepscope.dashboard.render.html_report import report_sections
from stepscope.dashboard.render.nightly import value_text


def _delta_cls(v: float | None, good_when_positive: bool) -> str:
    if v is None or abs(v) < 1e-12:
        return ""
    return "good" if (v > 0) == good_when_positive else "bad"


def _cards(night: NightlyReport) -> str:
    d, status = night.diff, night.nightly.status
    mfu_delta = d.mfu_delta_points if d else None
    step_delta = d.step_time_delta_ms if d else None
    return cards([
        card("MFU", mfu_pct(night.mfu.mfu, night.mfu.lower_bound, EN_DASH),
             "" if mfu_delta is None else f"{points(mfu_delta, signed=True)} pts",
             _delta_cls(mfu_delta, True)),
        card("step time", f"{night.step_time_ms:.2f} ms",
             "" if step_delta is None else f"{step_delta:+.2f} ms",
             _delta_cls(step_delta, False)),
        card("checks", f"{len(night.checks) - len(night.failed_checks)}/{len(night.checks)}"
             " pass" if night.checks else "none"),
        card("ranks", f"{night.run.ranks}/{night.run.world_size}",
             status, "bad" if status != "complete" else ""),
    ])


def _checks(night: NightlyReport) -> str:
    if not night.checks:
        return ""
    rows = [[f"<code>{esc(c.condition)}</code>", num(c.value, ".4g", EN_DASH),
             f'<span class="{"bad" if c.failed else "good"}">{esc(c.status)}</span>']
            for c in night.checks]
    return section("Checks", table(["fail if", "value", "result"], rows, numeric=(1,)),
                   anchor="checks")


def _started(iso: str | None) -> str:
    """'2025-01-31T02:00:00Z' -> '2025-01-31 02:00:00 UTC'."""
    return f"{datetime.fromisoformat(iso):%Y-%m-%d %H:%M:%S} UTC" if iso else EN_DASH


def _head(night: NightlyReport) -> str:
    base, info = night.baseline, night.nightly
    against = (f"baseline {base.run} ({base.selected_by})" if base
               else night.baseline_note or "no baseline")
    causes = info.top_causes
    head = (f'<h1>Nightly: {esc(info.job)} <span class="verdict {info.verdict}">'
            f"{info.verdict}</span></h1><p class=\"meta\">run {esc(info.run)} · traces from "
            f"{esc(_started(info.trace_start))} · {esc(against)}</p>"
            + (f"<p><b>Top cause:</b> {esc(causes[0])}</p>" if causes else ""))
    failed = "".join(f"<li><code>{esc(c.condition)}</code>: {esc(value_text(c))}</li>"
                     for c in night.failed_checks)
    if failed:
        head += f'<p class="bad"><b>Failed checks:</b></p><ul class="bad">{failed}</ul>'
    files = info.failed_files
    if files:  # each file with its error heads the run report below
        head += (f"<p class=\"bad\"><b>Partial ingest</b>: {len(files)} file(s) "
                 "failed (listed with the run report below)</p>")
    return head


def nightly_html(night: NightlyReport) -> str:
    """report.html of `stepscope nightly`: verdict, checks, the diff vs the baseline,
    then the full report."""
    sections = [_head(night), _cards(night), _checks(night)]
    if night.diff is not None:
        sections += diff_sections(night.diff, f"Change vs baseline {night.diff.a.run}")
    sections += report_sections(night)
    return page(f"stepscope nightly: {night.nightly.job} {night.nightly.verdict}", sections)
