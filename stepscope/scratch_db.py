"""The temporary database a command builds for a trace path (`report PATH`, `diff`,
`whatif`, `export`, `hang`, `plan --from`), and the machine's failures while it lives.

When the machine fails while that database is made, filled or read — a full disk, a
quota, the file size limit (RLIMIT_FSIZE), no file handles left (RLIMIT_NOFILE), memory
that cannot be allocated (RLIMIT_AS, DuckDB out of memory) — that is the machine's
failure (exit 1, nothing kept), and its one line names the trace path the user gave:
never the temporary file (`/tmp/stepscope-*/run.duckdb`) the user never named and cannot
fix with --db, nor the --db that a trace path leaves unused. A --db the user names keeps
its documented exit 2 (docs/cli.md: a --db that cannot be opened or written).

`scratch_database` is the one way a command gets such a database: every failure inside
its block goes through `machine_failure_of`, whatever raised it (DuckDB while opening,
the ingest's workers, a query, an allocation in Python).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from stepscope.ingest.errors import (
    MachineFailure,
    StepscopeError,
    UsageError,
    machine_problem,
    one_line,
    quote_name,
)

# DuckDB's text when the machine ran out as it opened the database but said so as a
# refusal to open it (its exceptions carry no errno) -> what ran out, and what to do
_SIGNS = (
    ("no space left on device", "no space left on the disk; free space"),
    ("disk quota exceeded", "the disk quota is exceeded; free space within the quota"),
    ("file too large", "the file size limit is reached; raise it (ulimit -f)"),
    ("too many open files", "too many open files in this process; raise the limit "
                            "(ulimit -n)"),
)


class ScratchFailure(MachineFailure):
    """The machine's failure while a trace path's temporary database lived, naming the
    path (an enclosing scratch database, `diff PATH PATH`'s first, keeps this line)."""


@dataclass
class Scratch:
    """A temporary database for the traces at `traces`: its file, and whether the ingest
    into it is done (the line then says the database could not be read, not written)."""

    traces: str | Path
    path: Path
    ingested: bool = False


def _refused_open(scratch: Scratch, exc: UsageError) -> str | None:
    """What ran out, when `exc` is DuckDB's refusal to open the scratch file whose text
    says the machine ran out; None for any other usage error (a trace's own line)."""
    message = str(exc)
    if not message.startswith(f"{scratch.path}: cannot open the database"):
        return None
    lowered = message.lower()
    return next((said for sign, said in _SIGNS if sign in lowered), None)


def _what_ran_out(scratch: Scratch, exc: BaseException) -> str | None:
    """What ran out on the machine (and what to do) when `exc` is the machine's failure,
    else None: a file's, an option's or an output's own error keeps its line."""
    if isinstance(exc, ScratchFailure):
        return None  # already said, naming its own trace path
    if isinstance(exc, MachineFailure):
        return exc.what or "the machine ran out (" + one_line(str(exc))[:200] + ")"
    if isinstance(exc, UsageError):
        return _refused_open(scratch, exc)
    if isinstance(exc, StepscopeError):
        return None
    return machine_problem(exc)  # MemoryError, OSError's errno, DuckDB's words


def machine_failure_of(scratch: Scratch, exc: BaseException) -> ScratchFailure | None:
    """The one line (exit 1) for `exc` raised while `scratch` lived, when it is the
    machine's failure; None for any other error."""
    what = _what_ran_out(scratch, exc)
    if what is None:
        return None
    doing = "read" if scratch.ingested else "write"
    return ScratchFailure(
        f"{quote_name(str(scratch.traces))}: cannot {doing} the temporary database of the "
        f"traces: {what} (the machine's failure, not the traces'); nothing was kept",
        what=what)


@contextmanager
def scratch_database(traces: str | Path, name: str = "run.duckdb") -> Iterator[Scratch]:
    """A temporary database for the traces at `traces`, removed when the block ends; the
    machine's failure anywhere in the block (making the folder, the ingest, the queries
    on it) is one line naming `traces` (machine_failure_of)."""
    scratch = Scratch(traces, Path(name))
    try:
        with tempfile.TemporaryDirectory(prefix="stepscope-") as tmp:
            scratch.path = Path(tmp) / name  # not the run's name: that may be any length
            yield scratch
    except Exception as exc:
        mapped = machine_failure_of(scratch, exc)
        if mapped is None:
            raise
        raise mapped from None
