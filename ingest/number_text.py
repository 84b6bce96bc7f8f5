"""The one grammar of a number a user writes: every option, `STEPSCOPE_*` variable and
option-file number that is read from text goes through these readers (docs/cli.md,
"Numbers").

Python's int() and float() also take a sign ('+2'), surrounding whitespace (' 2', '2\\n'),
digit-group underscores ('1_000') and other scripts' digits ('\\u0663' is 3, '\\uff15'
is 5): none of those is documented, and each was accepted by some option. Here a number
is ASCII only, matched whole (re.fullmatch: `$` would let a trailing newline through):

- a whole number: the digits 0-9, nothing else (no '+', no space, no '_');
- a decimal: digits with an optional fraction and exponent (7e9, 0.35, .5, 1e-3), never
  nan or inf;
- a '-' before either is out of range, '-0' too, unless the range holds negative
  numbers;
- a size: a decimal without exponent, then optionally one space and a unit (16G, 16 G,
  1.5GiB, 500MB).

Each reader checks the range too, so a message says what is allowed. The readers raise
NumberTextError (a ValueError); its `about(text)` is the message, which the caller heads
with the option's or the variable's name.
"""

from __future__ import annotations

import math
import os
import re

MAX_DIGITS = 4000  # below int()'s 4,300-digit limit (sys.int_info); longer is out of range

_WHOLE = re.compile(r"[0-9]+", re.ASCII)
_DECIMAL = re.compile(r"-?(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?", re.ASCII)
_SIZE = re.compile(r"([0-9]+(?:\.[0-9]+)?)(?: (?=[A-Za-z]))?([KMGTkmgt]?)((?:[iI]?[bB])?)",
                   re.ASCII)  # a space only before a unit
SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_NOT_FINITE = ("nan", "inf", "infinity")


class NumberTextError(ValueError):
    """Text that is not a number of the wanted kind (`problem` says which), or one out of
    its range (`problem` says the range)."""

    def __init__(self, problem: str, *, out_of_range: bool = False) -> None:
        super().__init__(problem)
        self.problem = problem
        self.out_of_range = out_of_range

    def about(self, text: str) -> str:
        """The message about `text`: "not a whole number: '+2'", "'0' is out of range:
        must be from 1 to 1024"."""
        if self.out_of_range:
            return f"{text!r} is out of range: {self.problem}"
        return f"{self.problem}: {text!r}"


def setting(variable: str) -> str | None:
    """The text of the environment variable `variable`, None when it is unset or empty;
    any other text is read whole, a blank one and a space or a newline around a number
    included (and refused)."""
    return os.environ.get(variable) or None


def whole(text: str, low: int, high: int) -> int:
    """`text` as an int in [low, high]: ASCII digits only, a '-' before them where the
    range holds negative numbers (module docstring)."""
    digits = text.removeprefix("-")
    if _WHOLE.fullmatch(digits) is None:
        raise NumberTextError("not a whole number")
    value = int(text) if len(digits) <= MAX_DIGITS else high + 1
    if not low <= value <= high or (text.startswith("-") and low >= 0):  # -0 too
        raise NumberTextError(f"must be from {low} to {high}", out_of_range=True)
    return value


def decimal(text: str, low: float, high: float, *, low_open: bool = True) -> float:
    """`text` as a finite float in (low, high] ([low, high] when low_open is False): a
    decimal of ASCII digits (module docstring)."""
    if text.lstrip("+-").lower() in _NOT_FINITE:
        raise NumberTextError("not a finite number")
    if _DECIMAL.fullmatch(text) is None:
        raise NumberTextError("not a number")
    value = float(text)
    if not math.isfinite(value):  # 1e400
        raise NumberTextError("not a finite number")
    too_low = value <= low if low_open else value < low
    if too_low or value > high or (text.startswith("-") and low >= 0):  # -0 too
        bracket = "(" if low_open else "["
        raise NumberTextError(f"must be in {bracket}{low:g}, {high:g}]", out_of_range=True)
    return value


def size(text: str, low: int, high: int) -> int:
    """`text` as bytes in [low, high]: a number, optionally one space and a binary unit
    (K, M, G, T, each optionally followed by B or iB: 16G, 16 G, 1.5GiB)."""
    match = _SIZE.fullmatch(text)
    if match is None or (match.group(3) and not match.group(2)
                         and match.group(3).lower() != "b"):
        raise NumberTextError("not a size; write it like 8G, 500M or 1048576")
    value = int(float(match.group(1)) * SIZE_UNITS[match.group(2).upper()])
    if not low <= value <= high:
        raise NumberTextError(f"must be between {_shown(low)} and {_shown(high)}",
                              out_of_range=True)
    return value


_COMMA = re.compile(r" *, *")


def list_items(text: str) -> list[str]:
    """The items of a comma-separated list ('0-3,5', '0, 1'): spaces around a comma are
    the list's, anything else belongs to an item (and fails its own check)."""
    return _COMMA.split(text)


def _shown(n: int) -> str:
    for unit in ("T", "G", "M", "K"):
        if n >= SIZE_UNITS[unit] and n % SIZE_UNITS[unit] == 0:
            return f"{n // SIZE_UNITS[unit]}{unit}"
    return str(n)
