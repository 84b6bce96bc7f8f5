"""Number formatting shared by the pages (labels live in dashboard/labels.py)."""

from __future__ import annotations


def pct(fraction: float | None, digits: int = 1) -> str:
    """0.4213 -> '42.1%'; None -> '-'."""
    return "-" if fraction is None else f"{100 * fraction:.{digits}f}%"


def points(value: float, digits: int = 1, signed: bool = False) -> str:
    """MFU points as a chart label, never '-0.0': -0.04 -> '0.0', -2.345 -> '-2.3'
    ('+0.00' / '-2.35' with signed=True, digits=2)."""
    shown = round(value, digits) + 0.0  # adding 0.0 turns -0.0 into 0.0
    return f"{shown:+.{digits}f}" if signed else f"{shown:.{digits}f}"
