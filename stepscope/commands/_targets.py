"""What `report` and `diff` print besides the model: notes and the files an on-the-fly
ingest left out (the resolution itself is the library's: stepscope.targets)."""

from __future__ import annotations

import sys

from stepscope.targets import Built


def print_remarks(built: Built) -> None:
    """One line per note and per failed file, on stderr."""
    for note in built.notes:
        print(f"note: {note}", file=sys.stderr)
    for file, problem in built.failures:
        print(f"error: {file}: {problem}", file=sys.stderr)
