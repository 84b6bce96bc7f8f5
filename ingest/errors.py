"""User-facing errors of the ingest layer.

Each message is one line that names the file (or the argument) and what to do.
"""

from __future__ import annotations


class StepscopeError(Exception):
    """Base class of errors shown to the user as one line, without a traceback."""


class UsageError(StepscopeError):
    """The command line or API call itself is wrong (exit code 2)."""


class DatabaseBusyError(UsageError):
    """Another connection (an ingest, another process) holds the database's write lock;
    retrying shortly usually succeeds."""


class TraceFileError(StepscopeError):
    """One trace file could not be ingested; other files go on."""

    def __init__(self, file: str, problem: str) -> None:
        super().__init__(f"{file}: {problem}")
        self.file = file
        self.problem = problem


class NothingIngestedError(StepscopeError):
    """No file of the run could be ingested (exit code 1)."""
