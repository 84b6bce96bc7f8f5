"""What a database failure means for the user, in one line with what to do.

DuckDB reports a full disk, a damaged file, a read-only folder or its memory limit as
exceptions whose text is long, multi-line and names DuckDB's own settings. The CLI asks
`explain` for any exception a command raised: a database or file-system failure becomes
a `DatabaseProblem` (exit 1: the work could not be done) or a `DatabaseUnusable`
(exit 2: the --db given cannot be used as it is); anything else is left to the caller.
A MemoryError (Python could not allocate, as under `ulimit -v`) is the machine's failure
too, exit 1. Generic on purpose: it looks only at the exception's kind and text, so the checks
ingest.db makes when it opens a database (not a DuckDB file, truncated, newer schema)
stay there; this covers what happens after, in the middle of a query or a commit.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from stepscope.ingest.db import (
    DEFAULT_MEMORY_LIMIT,
    MEMORY_ENV,
    OUT_OF_MEMORY_TEXTS,
    limit_that_failed,
)
from stepscope.ingest.errors import (
    StepscopeError,
    UsageError,
    machine_problem,
    one_line,
    quote_name,
)


class DatabaseProblem(StepscopeError):
    """The database could not be written or read to the end (disk full, out of memory);
    exit 1. Whatever was being ingested was rolled back."""


class DatabaseUnusable(UsageError):
    """The database file or its folder cannot be used (damaged, read-only); exit 2."""


_DAMAGED = ("could not read enough bytes", "corrupt", "checksum", "invalid block",
            "not a valid duckdb database", "failed to load metadata pointer",
            "serialization error", "deserializ")
_NO_SPACE = ("no space left on device", "disk quota exceeded", "file too large")
_READ_ONLY = ("read-only file system", "permission denied", "read only")


def _first(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return one_line(text.splitlines()[0])[:300]


def _name(db: str | Path | None) -> str:
    return quote_name(str(db)) if db is not None else "the database"


def _out_of_memory(exc: BaseException, db: str | Path | None) -> DatabaseProblem:
    """Out of memory, naming the limit that failed (DuckDB's text has it) and where it
    came from: the user's $STEPSCOPE_MEMORY_LIMIT, or the ingest's rooms, which grow
    when a step runs out (ingest.db.room_scales) up to what the machine has free."""
    failed = limit_that_failed(exc)
    at = f"at its limit of {failed}" if failed else "at its limit"
    user = os.environ.get(MEMORY_ENV)
    source = (f"${MEMORY_ENV}={user}" if user else
              f"the largest room this process's memory allowed; default {DEFAULT_MEMORY_LIMIT}"
              " outside an ingest")
    return DatabaseProblem(
        f"out of memory in the database {at} ({source}); set ${MEMORY_ENV} higher "
        f"(e.g. 8GB) or free memory; nothing was committed to {_name(db)}")


def explain(exc: BaseException, db: str | Path | None) -> StepscopeError | None:
    """The one-line error for a failure of the database or the disk, or None."""
    if isinstance(exc, StepscopeError | BrokenPipeError):
        return None
    kind = type(exc).__name__
    from_duckdb = type(exc).__module__.split(".")[0] in ("duckdb", "_duckdb")
    if not from_duckdb and not isinstance(exc, OSError | MemoryError):
        return None
    text = str(exc).lower()
    if isinstance(exc, MemoryError):  # Python could not allocate: the machine's memory
        return DatabaseProblem(f"{machine_problem(exc)} (the machine's failure, not the "
                               f"database's); nothing was committed to {_name(db)}")
    if "bad allocation" in text:  # DuckDB asked the machine and got nothing: not its limit
        return DatabaseProblem(f"{machine_problem(MemoryError())} (the machine's failure, "
                               f"not the database's); nothing was committed to {_name(db)}")
    if kind == "OutOfMemoryException" or any(words in text for words in OUT_OF_MEMORY_TEXTS):
        return _out_of_memory(exc, db)
    if any(s in text for s in _NO_SPACE) or getattr(exc, "errno", None) == errno.ENOSPC:
        return DatabaseProblem(
            f"the disk is full ({_first(exc)}); nothing was committed to {_name(db)}: "
            "free space (or point $TMPDIR / --db elsewhere) and run again")
    if any(s in text for s in _READ_ONLY):
        return DatabaseUnusable(
            f"{_name(db)}: cannot write the database or its folder ({_first(exc)}); "
            "use a --db in a folder you can write")
    if any(s in text for s in _DAMAGED) or kind in ("SerializationException",
                                                      "InternalException"):
        return DatabaseUnusable(
            f"{_name(db)}: not a readable DuckDB file (damaged or incomplete: "
            f"{_first(exc)[:160]}); restore it from a copy or use another --db")
    if (what := machine_problem(exc)) is not None:  # no file handle left, ...
        return DatabaseProblem(f"{what} (the machine's failure, not the database's); "
                               f"nothing was committed to {_name(db)}")
    if isinstance(exc, OSError):
        where = quote_name(exc.filename) if exc.filename else "a file"
        return DatabaseProblem(f"{where}: {exc.strerror or _first(exc)}")
    return DatabaseProblem(f"{_name(db)}: database error ({kind}: {_first(exc)})")
