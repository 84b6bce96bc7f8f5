"""A whole number written plainly, of any size: the type of options whose range is
checked later with a message of its own (`dashboard --port`, `--max-upload-mb`).

Read by ingest.number_text, the one grammar of every number (ASCII digits only: no
sign, no surrounding space or newline, no '_', no other scripts' digits); Python's int()
took '8_501', '\\uff15' and '8501\\n', and the dashboard's server started.
"""

from __future__ import annotations

import argparse

from stepscope.ingest import number_text

ANY_SIZE = 10 ** number_text.MAX_DIGITS


def plain_int(text: str) -> int:
    """`text` as an int when it is ASCII digits (after a '-': the command's own range
    check refuses it with its message), else argparse's one-line refusal naming the
    option."""
    try:
        return number_text.whole(text, -ANY_SIZE, ANY_SIZE)  # the command checks the range
    except number_text.NumberTextError as exc:
        raise argparse.ArgumentTypeError(exc.about(text)) from None


plain_int.__name__ = "integer"
