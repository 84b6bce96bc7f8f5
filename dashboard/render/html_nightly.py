"""report.html of `stepscope nightly`: the night's verdict, checks and change against
its baseline, then the full run report, as one self-contained HTML file."""

from __future__ import annotations

from stepscope.analyzers.nightly import NightlyReport
from stepscope.dashboard.render.format import EN_DASH, num, pct
from stepscope.dashboard.render.html_diff import diff_sections
from stepscope.dashboard.render.html_page import card, cards, esc, page, section, table
from stepscope.dashboard.render.html_report import report_sections


def _delta_cls(v: float | None, good_when_positive: bool) -> str:
    if v is None or abs(v) < 1e-12:
        return ""
    return "good" if (v > 0) == good_when_positive else "bad"


def _cards(night: NightlyReport) -> str:
    r, d = night.report, night.diff
    mfu_delta = d.mfu_delta_points if d else None
    step_delta = d.step_time_delta_ms if d else None
    return cards([
        card("MFU", pct(r.mfu.mfu, missing=EN_DASH),
             "" if mfu_delta is None else f"{mfu_delta:+.1f} pts", _delta_cls(mfu_delta, True)),
        card("step time", f"{r.step_time_ms:.2f} ms",
             "" if step_delta is None else f"{step_delta:+.2f} ms",
             _delta_cls(step_delta, False)),
        card("checks", f"{len(night.checks) - len(night.failed_checks)}/{len(night.checks)}"
             " pass" if night.checks else "none"),
        card("ranks", f"{r.run.ranks}/{r.run.world_size}",
             night.status, "bad" if night.status != "complete" else ""),
    ])


def _checks(night: NightlyReport) -> str:
    if not night.checks:
        return ""
    rows = [[f"<code>{esc(c.threshold.text)}</code>", num(c.value, ".4g", EN_DASH),
             f'<span class="{"bad" if c.failed else "good"}">{esc(c.status)}</span>']
            for c in night.checks]
    return section("Checks", table(["fail if", "value", "result"], rows, numeric=(1,)),
                   anchor="checks")


def _head(night: NightlyReport) -> str:
    base = night.baseline
    against = (f"baseline {base.run} ({base.selected_by})" if base
               else night.baseline_note or "no baseline")
    causes = night.top_causes()
    started = f"{night.trace_start:%Y-%m-%d %H:%M:%S} UTC" if night.trace_start else EN_DASH
    head = (f'<h1>Nightly: {esc(night.job)} <span class="verdict {night.verdict}">'
            f"{night.verdict}</span></h1><p class=\"meta\">run {esc(night.run)} · traces from "
            f"{esc(started)} · {esc(against)}</p>"
            + (f"<p><b>Top cause:</b> {esc(causes[0])}</p>" if causes else ""))
    failed = "".join(f"<li><code>{esc(c.threshold.text)}</code>: {esc(c.value_text())}</li>"
                     for c in night.failed_checks)
    if failed:
        head += f'<p class="bad"><b>Failed checks:</b></p><ul class="bad">{failed}</ul>'
    if night.failed_files:
        files = "".join(f"<li>{esc(f)}: {esc(e)}</li>" for f, e in night.failed_files[:20])
        head += (f"<p class=\"bad\"><b>Partial ingest</b>: {len(night.failed_files)} file(s) "
                 f"failed</p><ul>{files}</ul>")
    return head


def nightly_html(night: NightlyReport) -> str:
    """report.html of `stepscope nightly`: verdict, checks, the diff vs the baseline,
    then the full report."""
    sections = [_head(night), _cards(night), _checks(night)]
    if night.diff is not None:
        sections += diff_sections(night.diff, f"Change vs baseline {night.diff.a.run}")
    sections += report_sections(night.report)
    return page(f"stepscope nightly: {night.job} {night.verdict}", sections)
