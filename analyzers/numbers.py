"""How a number becomes text, shared by the analyzers' sentences and the renderers
(dashboard/render/format.py re-exports it), so one value always reads the same: the
report's "**MFU ≥ 0.26%**" and its "covers: MFU ≥ 0.26% from ..." line, the diff's
narrative, the nightly summary and the dashboard's cards.

The rule for digits (`decimals`): a value is shown with the usual number of decimals,
and with more when that would misstate it by more than a tenth of itself, so an MFU of
0.0312 percent reads "0.03%", never "0.0%", and 0.26 percent "0.26%", never "0.3%".
Zero stays "0.0", and nothing is ever "-0.0".
"""

from __future__ import annotations

import math

MAX_DECIMALS = 6
TOLERANCE = 0.1  # a shown value may be off by at most this share of the true value


def decimals(value: float, digits: int = 1) -> int:
    """The fewest decimals, at least `digits`, that show `value` within TOLERANCE of
    itself (at most MAX_DECIMALS): (33.04, 1) -> 1, (0.0312, 1) -> 2, (0.45, 1) -> 2."""
    if value == 0 or not math.isfinite(value):
        return digits
    for d in range(digits, MAX_DECIMALS + 1):
        if abs(round(value, d) - value) <= TOLERANCE * abs(value):
            return d
    return MAX_DECIMALS


def fixed(value: float, digits: int = 1, signed: bool = False) -> str:
    """`value` with `decimals(value, digits)` decimals, never '-0.0': 0.0312 -> '0.03',
    -0.0 -> '0.0', 12.34 -> '12.3'; '+' in front with signed=True."""
    d = decimals(value, digits)
    shown = round(value, d) + 0.0  # adding 0.0 turns -0.0 into 0.0
    return f"{shown:+.{d}f}" if signed else f"{shown:.{d}f}"


def percent(fraction: float, digits: int = 1) -> str:
    """A fraction as a percentage with the digits rule: 0.4213 -> '42.1%',
    0.0026 -> '0.26%', 0.00027 -> '0.027%', 64.5 -> '6450.0%'."""
    return f"{fixed(100 * fraction, digits)}%"


def mfu_percent(fraction: float, lower_bound: bool = False) -> str:
    """An MFU or HFU as every output shows it: percent, with '≥ ' in front when it counts
    only the shaped work (Mfu.lower_bound, docs/mfu.md "What the MFU covers")."""
    return f"≥ {percent(fraction)}" if lower_bound else percent(fraction)
