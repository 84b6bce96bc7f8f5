"""What `report` and `diff` print besides the model: notes and the files an on-the-fly
ingest left out (the resolution itself is the library's: stepscope.targets)."""

from __future__ import annotations

from stepscope.cli import say
from stepscope.targets import Built


def print_remarks(built: Built) -> None:
    """One line per note and per failed file, on stderr."""
    for note in built.notes:
        say(f"note: {note}")
    for file, problem in built.failures:
        say(f"error: {file}: {problem}")
