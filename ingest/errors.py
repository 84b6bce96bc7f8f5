"""User-facing errors of the ingest layer.

Each message is one line that names the file (or the argument) and what to do.

Per-file failures (for every reader, present and future): a reader raises
``TraceFileError(file, problem)`` for what it recognises; the loader turns any other
exception escaping a reader into a ``TraceFileError`` of that file with
``as_file_error``, so one bad file fails that file only and the run goes on ``partial``.
"""

from __future__ import annotations

from collections.abc import Sequence


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
    """No file of the run could be ingested (exit code 1). `failures` holds every
    file's (file, problem), which the CLI prints before this message."""

    def __init__(self, message: str, failures: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__(message)
        self.failures = list(failures)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) stopped the work; `committed` says whether the run reached the
    database (exit code 130). A KeyboardInterrupt, so `except KeyboardInterrupt` holds."""

    def __init__(self, message: str, committed: bool) -> None:
        super().__init__(message)
        self.message = message
        self.committed = committed

    def __str__(self) -> str:
        return self.message


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def as_file_error(file: str, exc: BaseException) -> TraceFileError:
    """The per-file failure for any exception a reader raised on `file`."""
    if isinstance(exc, TraceFileError):
        return exc
    if isinstance(exc, PermissionError):
        return TraceFileError(file, "permission denied (the file cannot be read by this user)")
    if isinstance(exc, IsADirectoryError):
        return TraceFileError(file, "not a regular file (a directory)")
    if isinstance(exc, FileNotFoundError):
        return TraceFileError(file, "no such file (it disappeared while ingesting)")
    if isinstance(exc, OSError):
        return TraceFileError(file, f"cannot read the file ({exc.strerror or _first_line(exc)})")
    if isinstance(exc, RecursionError):
        return TraceFileError(file, "invalid JSON (nested too deeply to be a trace)")
    if isinstance(exc, MemoryError):
        return TraceFileError(file, "out of memory while reading this file")
    if isinstance(exc, UnicodeError):
        return TraceFileError(file, f"invalid text encoding ({_first_line(exc)})")
    return TraceFileError(
        file, f"could not be read ({type(exc).__name__}: {_first_line(exc)}); please report it")
