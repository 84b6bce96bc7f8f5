"""Renderers of a nightly report (report.json, report.md) and of a job's history.

Pure functions: analyzers.results.NightlyReport or the history frame in, text out.
report.md starts with a chat-sized summary (a few lines a webhook can post), then the
full report and the diff against the baseline.
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

from stepscope.analyzers.nightly.history import HistoryNight, history_nights
from stepscope.analyzers.results import CheckOutcome, NightlyReport, to_json
from stepscope.dashboard.render import strict_json
from stepscope.dashboard.render.diff import diff_markdown
from stepscope.dashboard.render.format import md_code, md_text, mfu_pct, num, pct, points
from stepscope.dashboard.render.labels import CATEGORY_LABELS as LABELS
from stepscope.dashboard.render.report import report_markdown

NA = "n/a"  # what the nightly summary shows for a value that could not be computed
HISTORY_COLUMNS = ("date", "run", "status", "step ms", "change ms", "MFU", "change pts",
                   "largest loss")


def nightly_json(night: NightlyReport) -> str:
    return to_json(night) + "\n"


def value_text(check: CheckOutcome) -> str:
    """'value -21.3' or why there is none, for the summaries."""
    if check.value is None:
        return "not computable" + (" (allowed by --allow-missing)"
                                   if check.status == "skipped" else "")
    return f"value {check.value:.4g}"


def headline(night: NightlyReport) -> list[str]:
    """MFU and step time, each with its change against the baseline."""
    d = night.diff
    mfu = night.mfu.mfu
    shown = mfu_pct(mfu, night.mfu.lower_bound, NA)
    step = night.step_time_ms
    if d is None:
        why = md_text(night.baseline_note or "no baseline")
        return [f"- **MFU {shown}** · **step time {step:.2f} ms** ({why})"]
    a = d.a
    mfu_change = ("" if d.mfu_delta_points is None
                  else f" ({points(d.mfu_delta_points, signed=True)} pts vs "
                       f"{pct(a.mfu, missing=NA)})")
    rel = 100 * d.step_time_delta_ms / a.step_time_ms if a.step_time_ms else 0.0
    return [f"- **MFU {shown}**{mfu_change} · **step time {step:.2f} ms** "
            f"({d.step_time_delta_ms:+.2f} ms, {rel:+.1f}% vs {a.step_time_ms:.2f} ms) "
            f"— baseline {md_code(a.run, table=False)}"]


def summary_markdown(night: NightlyReport) -> list[str]:
    """The chat-sized part: verdict, headline numbers, the top cause, failed checks."""
    failed, info = night.failed_checks, night.nightly
    out = [f"## stepscope nightly: job {md_code(info.job, table=False)}, run "
           f"{md_code(info.run, table=False)} — **{info.verdict}**", ""]
    out += headline(night)
    causes = info.top_causes
    if causes:
        out.append(f"- **Top cause:** {md_text(causes[0])}")
    if failed:
        out.append(f"- **Failed checks ({len(failed)} of {len(night.checks)}):**")
        out += [f"  - {md_code(c.condition, table=False)}: {value_text(c)}" for c in failed]
    elif night.checks:
        out.append(f"- all {len(night.checks)} check(s) pass")
    files = info.failed_files
    if files:
        shown = "; ".join(f"{md_text(f.file)}: {md_text(f.error)}" for f in files[:3])
        more = f" (+{len(files) - 3} more)" if len(files) > 3 else ""
        out.append(f"- **Partial ingest:** {len(files)} file(s) failed: {shown}{more}")
    setup = [f"{md_text(c.what)} {md_text(c.a)} -> {md_text(c.b)}"
             for c in (night.diff.setup_changes if night.diff else ())]
    if setup:
        out.append("- Setup changed: " + ", ".join(setup[:6]))
    return out


def nightly_markdown(night: NightlyReport) -> str:
    """report.md: the summary, then the full report, then the diff."""
    out = summary_markdown(night)
    out += ["", "---", "", report_markdown(night).rstrip()]
    if night.diff is not None:
        out += ["", diff_markdown(night.diff).rstrip()]
    if night.checks:
        out += ["", "## Checks", "", "| condition | value | result |", "|---|---:|---|"]
        out += [f"| {md_code(c.condition)} | {num(c.value, '.4g', NA)} | {c.status} |"
                for c in night.checks]
    return "\n".join(out) + "\n"


# -- history -------------------------------------------------------------------------


def _status(night: HistoryNight) -> str:
    parts = [] if night.status == "complete" else [night.status]
    if night.checks == "fail":
        parts.append(f"FAIL({night.checks_failed})")
    return ", ".join(parts) or "ok"


def _loss(night: HistoryNight) -> str:
    if night.largest_loss is None or night.largest_loss_ms is None:
        return "-"
    share = (f" ({100 * night.largest_loss_ms / night.step_time_ms:.0f}%)"
             if night.step_time_ms else "")
    return f"{LABELS[night.largest_loss]} {night.largest_loss_ms:.2f} ms{share}"


def _date(t: datetime | None) -> str:
    return "-" if t is None else f"{t:%Y-%m-%d %H:%M}"


def history_cells(frame: pl.DataFrame) -> list[list[str]]:
    """One row of display cells per night (HISTORY_COLUMNS)."""
    return [[_date(n.trace_start), n.run, _status(n), num(n.step_time_ms, ".2f"),
             num(n.step_time_change_ms, "+.2f"), pct(n.mfu, missing=NA),
             ("-" if n.mfu_change_points is None else points(n.mfu_change_points, signed=True)),
             _loss(n)]
            for n in history_nights(frame)]


def history_text(job: str, frame: pl.DataFrame) -> str:
    if frame.is_empty():
        return f"no nightly history for job '{job}'\n"
    rows = [list(HISTORY_COLUMNS), *history_cells(frame)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HISTORY_COLUMNS))]
    lines = [f"nightly history of job '{job}' ({frame.height} night(s), oldest first)"]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
              for r in rows]
    return "\n".join(lines) + "\n"


def history_markdown(job: str, frame: pl.DataFrame) -> str:
    if frame.is_empty():
        return f"No nightly history for job {md_code(job, table=False)}.\n"
    lines = [f"## Nightly history: {md_code(job, table=False)}", "",
             "| " + " | ".join(HISTORY_COLUMNS) + " |",
             "|---|---|---|---:|---:|---:|---:|---|"]
    lines += ["| " + " | ".join(md_text(c, cell=True) for c in cells) + " |"
              for cells in history_cells(frame)]
    return "\n".join(lines) + "\n"


def history_json(job: str, frame: pl.DataFrame) -> str:
    rows = frame.to_dicts()
    return strict_json.dumps({"job": job, "nights": rows}, indent=2, default=str) + "\n"
