"""A whole number written plainly, of any size: the type of options whose range is
checked later with a message of its own (`dashboard --port`, `--max-upload-mb`).

Python's int() also reads '8_501' and other scripts' digits ('\uff15' is 5), which no
option documents (docs/cli.md: every number in ASCII digits without `_`); those were
accepted and the dashboard's server started.
"""

from __future__ import annotations

import argparse


def plain_int(text: str) -> int:
    """`text` as an int when it is an optional sign and ASCII digits, else argparse's
    one-line refusal naming the option."""
    body = text.strip()
    digits = body[1:] if body[:1] in "+-" else body
    if not (digits.isascii() and digits.isdigit()):
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}")
    return int(body)


plain_int.__name__ = "integer"
