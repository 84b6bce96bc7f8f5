"""Renderers of the per-run ingest summary (analyzers.summary.run_summary)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime

from stepscope.analyzers.summary import RunSummary
from stepscope.dashboard.render import strict_json
from stepscope.dashboard.render.format import md_text, pct

# (column, header) shown in the human formats, in order.
TEXT_COLUMNS = (
    ("run", "run"),
    ("status", "status"),
    ("n_ranks", "ranks"),
    ("world_size", "world"),
    ("hosts", "hosts"),
    ("devices", "devices"),
    ("steps", "steps"),
    ("gpu_ops", "GPU ops"),
    ("collectives", "collectives"),
    ("attributed_step_ms", "step ms"),
    ("compute_share", "compute"),
    ("top_loss", "largest loss"),
)


NO_LOSS = "none"          # an attributed run whose every non-compute category is zero
UNKNOWN_HOSTS = "?"       # no trace names its host: the report's "? host(s)"


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


def _row_cells(row: RunSummary) -> dict[str, str]:
    cells = {col: _cell(getattr(row, col)) for col, _ in TEXT_COLUMNS}
    if row.compute_share is not None:
        cells["compute_share"] = pct(row.compute_share, 0)
    if row.top_loss and row.top_loss_share is not None:
        cells["top_loss"] = f"{row.top_loss} {pct(row.top_loss_share, 0)}"
    elif row.attributed_step_ms is not None:
        cells["top_loss"] = NO_LOSS
    if row.hosts is None:
        cells["hosts"] = UNKNOWN_HOSTS
    return cells


def _rows(summary: Sequence[RunSummary]) -> tuple[list[str], list[list[str]]]:
    headers = [header for _, header in TEXT_COLUMNS]
    rows = [[_row_cells(row)[col] for col, _ in TEXT_COLUMNS] for row in summary]
    return headers, rows


def summary_text(summary: Sequence[RunSummary]) -> str:
    """Aligned plain-text table, one line per run."""
    if not summary:
        return "no runs in this database"
    headers, rows = _rows(summary)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


def summary_markdown(summary: Sequence[RunSummary]) -> str:
    """GitHub-flavoured Markdown table, one row per run."""
    if not summary:
        return "_no runs in this database_"
    headers, rows = _rows(summary)
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(md_text(c, cell=True) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def summary_json(summary: Sequence[RunSummary]) -> str:
    """JSON list of run objects with every summary column (times to the second)."""
    records = [{key: value.strftime("%Y-%m-%dT%H:%M:%S") if isinstance(value, datetime)
                else value for key, value in asdict(row).items()} for row in summary]
    return strict_json.dumps(records, indent=2)
