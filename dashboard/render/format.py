"""Number formatting of every renderer and page: the one place a percentage, a share, a
number or a rank list becomes text (labels live in labels.py).

`missing` is what a format shows for a value that could not be computed: "-" in
Markdown and plain text, "–" in HTML, "n/a" in the nightly summaries.
"""

from __future__ import annotations

from collections.abc import Sequence

DASH = "-"       # Markdown and plain text
EN_DASH = "–"    # HTML


def pct(fraction: float | None, digits: int = 1, missing: str = DASH) -> str:
    """0.4213 -> '42.1%'; None -> `missing`."""
    return missing if fraction is None else f"{100 * fraction:.{digits}f}%"


def share(part: float, whole: float, digits: int = 1, missing: str = DASH) -> str:
    """`part` as a percentage of `whole`: (3, 12) -> '25.0%'; `missing` when whole is 0."""
    return f"{100 * part / whole:.{digits}f}%" if whole else missing


def num(value: float | None, spec: str = ".2f", missing: str = DASH) -> str:
    """`value` in format `spec` ('.2f', '+.1f', '.4g'); None -> `missing`."""
    return missing if value is None else format(value, spec)


def points(value: float, digits: int = 1, signed: bool = False) -> str:
    """MFU points as a chart label, never '-0.0': -0.04 -> '0.0', -2.345 -> '-2.3'
    ('+0.00' / '-2.35' with signed=True, digits=2)."""
    shown = round(value, digits) + 0.0  # adding 0.0 turns -0.0 into 0.0
    return f"{shown:+.{digits}f}" if signed else f"{shown:.{digits}f}"


def rank_list(ranks: Sequence[int], missing: str = DASH) -> str:
    """[0, 1, 3] -> '0, 1, 3'; no ranks -> `missing`."""
    return ", ".join(str(r) for r in ranks) if ranks else missing


def rank_list_short(ranks: Sequence[int], limit: int = 12) -> str:
    """The first `limit` ranks, then how many there are when that is not all of them:
    '0, 1, 2' or (64 ranks, limit 2) '0, 1, … (64 ranks)'."""
    shown = ", ".join(map(str, ranks[:limit]))
    return shown + (f", … ({len(ranks)} ranks)" if len(ranks) > limit else "")
