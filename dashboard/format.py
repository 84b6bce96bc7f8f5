"""Number formatting shared by the pages (labels live in dashboard/labels.py)."""

from __future__ import annotations


def pct(fraction: float | None, digits: int = 1) -> str:
    """0.4213 -> '42.1%'; None -> '-'."""
    return "-" if fraction is None else f"{100 * fraction:.{digits}f}%"
