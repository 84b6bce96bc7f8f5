"""The temporary database a command builds for a trace path (`report PATH`, `diff`,
`whatif`, `export`, `hang`): when the machine refuses to let it be created — a full disk,
a quota, the file size limit (RLIMIT_FSIZE), no file handles left — that is the machine's
failure (exit 1, nothing kept), not a usage error. It was exit 2, "cannot open the
database", naming a temporary file the user never gave and could not fix with --db.
A --db the user names keeps its documented exit 2 (docs/cli.md: a --db that cannot be
opened or written).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from stepscope.ingest.errors import MachineFailure, UsageError, one_line, quote_name

# DuckDB's text when the machine ran out (its exceptions carry no errno) -> what ran out
_SIGNS = (
    ("no space left on device", "no space left on the disk"),
    ("disk quota exceeded", "the disk quota is exceeded"),
    ("file too large", "the file size limit is reached (ulimit -f)"),
    ("too many open files", "too many open files (ulimit -n)"),
)


def machine_failure_of(scratch: Path, message: str) -> MachineFailure | None:
    """The one line for a refusal to open `scratch` whose text says the machine ran out;
    None for any other message (a damaged or locked file keeps its own line)."""
    if not message.startswith(f"{scratch}: cannot open the database"):
        return None
    lowered = message.lower()
    what = next((said for sign, said in _SIGNS if sign in lowered), None)
    if what is None:
        return None
    detail = one_line(message.split(": cannot open the database", 1)[1].strip(" ()"))
    return MachineFailure(
        f"{quote_name(str(scratch.parent))}: cannot write the temporary database of the "
        f"traces: {what} ({detail[:200]}); nothing was kept: free space or raise the "
        "limit, or point $TMPDIR at a larger disk, and run again")


@contextmanager
def machine_failures_of(scratch: Path) -> Iterator[None]:
    """Turn the machine's refusal to create `scratch` into its one line (exit 1)."""
    try:
        yield
    except UsageError as exc:
        mapped = machine_failure_of(scratch, str(exc))
        if mapped is None:
            raise
        raise mapped from None
