"""User-facing errors of the ingest layer.

Each message is one line that names the file (or the argument) and what to do.

Per-file failures (for every reader, present and future): a reader raises
``TraceFileError(file, problem)`` for what it recognises; the loader turns any other
exception escaping a reader into a ``TraceFileError`` of that file with
``as_file_error``, so one bad file fails that file only and the run goes on ``partial``.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Sequence

_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(ch: str) -> str:
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8 (os.fsdecode's surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    if ch in _ESCAPES:
        return _ESCAPES[ch]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _plain(ch: str) -> bool:
    return ch.isprintable() and not 0xD800 <= ord(ch) <= 0xDFFF


def one_line(text: str) -> str:
    """`text` with every character that is not printable (newlines, escape codes,
    bidirectional controls, bytes that are not UTF-8) written as a backslash escape: a
    message is always exactly one line, and nothing in it can forge another one."""
    if all(_plain(ch) for ch in text):
        return text
    return "".join(ch if _plain(ch) else _escape_char(ch) for ch in text)


TERMINAL_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    """`text` (a report, a summary table: many lines) with every control character but
    newline and tab written as a `\\uXXXX` escape: ESC, OSC and C1 codes in a kernel or
    file name cannot clear the screen or set the window title when it is printed, nor hide
    in a Markdown file. In JSON text the same escape is the same character, so a JSON
    report still decodes to the same values."""
    if TERMINAL_UNSAFE.search(text) is None:
        return text
    return TERMINAL_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def quote_name(name: str | os.PathLike[str]) -> str:
    """A file, folder or run name as messages show it: as it is when it is plain
    printable text, else quoted with its odd characters escaped (`'a\\nb.json'`,
    `'caf\\xe9'` for a name that is not UTF-8); a name with a blank at either end is
    quoted too (`--model ' '` read "error:  : --model: no such file"). Also valid text
    for a VARCHAR column."""
    text = os.fspath(name)
    shown = one_line(text)
    plain = shown == text and text.strip() == text
    return text if plain else "'" + shown.replace("'", "\\'") + "'"


def shown_name(name: str | os.PathLike[str], width: int = 160) -> str:
    """`quote_name(name)`, or for a name of more than `width` characters its start and
    its end around "…" with its length: the end (a file name, a trailing '/') is what a
    message is usually about, so it is never what gets cut."""
    text = os.fspath(name)
    if len(text) <= width:
        return quote_name(text)
    keep = width // 2
    return (f"{quote_name(text[:keep])}…{quote_name(text[-keep:])} "
            f"({len(text):,} characters)")


class StepscopeError(Exception):
    """Base class of errors shown to the user as one line, without a traceback.
    `earlier` holds the (file, problem) failures of work done before this error (the
    first run of `diff PATH_A PATH_B` when the second fails): they came first, so the
    CLI prints them before this message."""

    earlier: tuple[tuple[str, str], ...] = ()


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


class MachineFailure(StepscopeError):
    """The machine, not a file, failed (disk full, quota, out of memory, out of file
    handles): the whole ingest stops with this one line, nothing committed (exit 1).
    `what` is what ran out and what to do (machine_problem's words) when known, so that
    a caller that knows better where the work was (a trace path's temporary database,
    stepscope.scratch_db) can say it in its own line."""

    def __init__(self, message: str, what: str | None = None) -> None:
        super().__init__(message)
        self.what = what


class MachineFileError(TraceFileError):
    """A reader's failure on `file` that is the machine's (ingest.errors.machine_problem):
    the loader turns it into MachineFailure instead of failing that file alone."""


# errno -> what ran out, and what to do; a file cannot cause these, the machine does
_MACHINE_ERRNOS = {
    errno.ENOSPC: ("no space left on the disk", "free space, or point $TMPDIR and "
                   "--stage-dir at a larger disk"),
    errno.EDQUOT: ("the disk quota is exceeded", "free space within the quota, or point "
                   "$TMPDIR and --stage-dir elsewhere"),
    errno.EFBIG: ("the file size limit is reached", "raise it (ulimit -f) or point "
                  "$TMPDIR and --stage-dir elsewhere"),
    errno.ENOMEM: ("out of memory", "free memory, or ingest with fewer --jobs"),
    errno.EMFILE: ("too many open files in this process", "raise the limit (ulimit -n)"),
    errno.ENFILE: ("too many open files on this machine", "close other programs' files"),
}
_MACHINE_TEXTS = (("no space left on device", errno.ENOSPC),
                  ("disk quota exceeded", errno.EDQUOT),
                  ("out of memory", errno.ENOMEM), ("cannot allocate memory", errno.ENOMEM),
                  # the dynamic loader's words when a library cannot be mapped (ulimit -v)
                  ("failed to map segment from shared object", errno.ENOMEM),
                  ("too many open files", errno.EMFILE))


def machine_problem(exc: BaseException) -> str | None:
    """What ran out on the machine when `exc` says so (a full disk, a quota, memory, file
    handles: an OSError's errno, a MemoryError, or DuckDB's text for the same), else
    None: such a failure is never a trace file's fault."""
    code = getattr(exc, "errno", None) if isinstance(exc, OSError) else None
    if code is None and isinstance(exc, MemoryError):
        code = errno.ENOMEM
    if code is None and not isinstance(exc, StepscopeError):
        text = str(exc).lower()
        code = next((c for words, c in _MACHINE_TEXTS if words in text), None)
    if code not in _MACHINE_ERRNOS:
        return None
    what, fix = _MACHINE_ERRNOS[code]
    return f"{what}; {fix}"


def machine_failure(file: str, problem: str, db: str | os.PathLike[str]) -> MachineFailure:
    """The one line that stops an ingest when the machine failed while reading `file`."""
    return MachineFailure(f"{file}: {problem} (the machine's failure, not the file's): "
                          f"the ingest stopped and nothing was committed to "
                          f"{quote_name(db)}", what=problem)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def as_file_error(file: str, exc: BaseException) -> TraceFileError:
    """The per-file failure for any exception a reader raised on `file`."""
    if isinstance(exc, TraceFileError):
        return exc
    if (machine := machine_problem(exc)) is not None:
        return MachineFileError(file, machine)
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
