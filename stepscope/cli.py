"""The `stepscope` command line: thin wrappers over the library, one module per subcommand.

Exit codes (stable, for scripts): defined once in ingest/exit_codes.py, described in the
README ("Exit codes"). Only the standard library and those constants are imported at
module level (the ingest package loads its heavy modules on first use), so Ctrl-C while
the heavy modules load is still one line and exit 130, not a traceback.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stepscope.address_space import check_address_space_floor, fit_address_space_limit
from stepscope.ingest.exit_codes import EXIT_NOTHING, EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    from stepscope.ingest.errors import StepscopeError

NOTHING_WRITTEN = "interrupted: nothing was written"
# Commands that write the user's database report what it holds when interrupted; the
# others only read it, or ingest into a temporary database that is gone.
WRITES_DATABASE = {"ingest", "nightly"}


def build_parser(only: str | None = None, *, every: bool = True) -> argparse.ArgumentParser:
    """The whole command line. With `every` False only the command `only` (if any) gets
    its full parser; the others are listed with their one-line help alone, so their
    modules (DuckDB, polars, the analyzers) are not imported: `stepscope --help` and each
    command start without paying for the rest."""
    from stepscope import __version__
    from stepscope.commands import COMMAND_HELP, COMMANDS, load
    from stepscope.ingest import UsageError

    class _Parser(argparse.ArgumentParser):
        def error(self, message: str) -> None:  # type: ignore[override]
            raise UsageError(f"{self.prog}: {message} (see --help)")

    parser = _Parser(
        prog="stepscope",
        description="Where did the step time go? Multi-rank PyTorch profiler trace analysis.",
    )
    parser.add_argument("--version", action="version", version=f"stepscope {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        if every or name == only:
            load(name).add_parser(sub)
        else:
            sub.add_parser(name, help=COMMAND_HELP[name])
    if every or only in COMMANDS:  # a command's parser is built: its numbers checked
        from stepscope.validate import checked_numbers

        checked_numbers(parser)
    return parser


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand an argument list names: its first argument that is not an option
    (the top-level parser has no option taking a value)."""
    return next((a for a in argv if not a.startswith("-")), None)


def say(line: str) -> None:
    """Print one line on stderr: whatever a file or run name holds (a newline, an escape
    code, bytes that are not UTF-8), it stays one line (ingest.errors.one_line)."""
    from stepscope.ingest.errors import one_line

    print(one_line(line), file=sys.stderr)


def check_no_empty_argument(arguments: Sequence[str]) -> None:
    """An empty argument (`stepscope ingest "$DIR"` with DIR unset, `--stage-dir=`) is a
    usage error: no path, name or option value of stepscope is empty, and an empty path
    would otherwise mean the current folder. Nor does any hold a NUL byte (the library's
    `main([...])` could pass one; open() then failed deep inside: "internal error")."""
    from stepscope.ingest import UsageError

    for i, arg in enumerate(arguments):
        option, equals, value = arg.partition("=") if arg.startswith("--") else ("", "", arg)
        after = option or (arguments[i - 1] if i and arguments[i - 1].startswith("-")
                           else "")
        if "\x00" in arg:  # only a call of main() can pass one (a process's argv cannot)
            shown = value if option and equals else arg
            raise UsageError(f"{after or 'argument'} {shown!r}: holds a NUL byte, which no "
                             "path, name or value can")
        if arg.startswith("--") and not equals:
            continue
        if not value:
            where = f" for {after}" if after else ""
            raise UsageError(f"an empty argument{where} (an unset shell variable?); name "
                             "the path or value, or '.' for the current folder")


def check_memory_limit_env() -> None:
    """$STEPSCOPE_MEMORY_LIMIT, when set, is checked before any work by its one reader
    (ingest.limits.memory_limit_setting): `report` used to ignore a value `ingest`
    refused; every command now refuses it alike."""
    from stepscope.ingest.limits import memory_limit_setting

    memory_limit_setting()


NAME_MAX = 255  # bytes in one name of a path, on every file system stepscope runs on


def check_db_name(db: object, option: str = "--db") -> None:
    """--db names a file whose every name fits the file system: a trailing '/' (a folder)
    or a name over 255 bytes is a usage error before any work (a too-long name used to
    surface as exit 1, "File name too long", once the database was opened). `option` is
    what the message names: `dashboard` checks its $STEPSCOPE_DB here too. A name longer
    than 160 characters is shown cut in the middle with its length (its first 80 hid the
    file name and the '/' the message is about)."""
    from stepscope.ingest import UsageError
    from stepscope.ingest.errors import shown_name
    from stepscope.ingest.folder_names import folder_ending, names_a_folder

    if not isinstance(db, str):
        return
    # the whole name, or its start and end with its length: never cut where the
    # message's point is (a trailing '/', the file name)
    shown = repr(db) if len(db) <= 160 else shown_name(db)
    if db.startswith(":memory:"):  # DuckDB's name of a database that lives in memory
        raise UsageError(f"{option} {shown}: DuckDB's in-memory database, which keeps "
                         "nothing once the command ends; give a database file name")
    if names_a_folder(db):
        raise UsageError(f"{option} {shown}: ends with '{folder_ending(db)}', so it names a "
                         "folder; give the database's file name")
    if any(len(os.fsencode(part)) > NAME_MAX for part in Path(db).parts):
        raise UsageError(f"{option} {shown_name(db)}: a name in it is longer than "
                         f"{NAME_MAX} bytes, the most a file system allows; give a shorter one")


def _run(argv: Sequence[str] | None) -> int:
    from stepscope.commands import load
    from stepscope.ingest import StepscopeError, UsageError

    arguments = list(sys.argv[1:] if argv is None else argv)
    try:
        check_no_empty_argument(arguments)
        check_memory_limit_env()
        parser = build_parser(_command_of(arguments), every=False)
        args = parser.parse_args(arguments)
        if args.command is None:
            parser.print_help()
            return EXIT_USAGE
        check_db_name(getattr(args, "db", None))
        check_address_space_floor()
        try:
            return _command(load(args.command).run, args)
        except KeyboardInterrupt:
            if args.command in WRITES_DATABASE:
                raise
            raise KeyboardInterrupt from None  # a temporary database only: nothing written
    except UsageError as exc:
        _say_error(exc)
        return EXIT_USAGE
    except StepscopeError as exc:
        _say_error(exc)
        return EXIT_NOTHING


def _say_error(exc: StepscopeError) -> None:
    """The error's line, after the failures that came before it: those of earlier work
    (`exc.earlier`), then a NothingIngestedError's own files (the first error first)."""
    from stepscope.ingest import NothingIngestedError

    own = exc.failures if isinstance(exc, NothingIngestedError) else []
    for file, problem in [*exc.earlier, *own]:
        say(f"error: {file}: {problem}")
    say(f"error: {exc}")


def _command(run: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a command; a failure of the database or the disk (full, damaged, read-only,
    out of memory) becomes its one-line error (ingest.db_errors)."""
    try:
        return int(run(args))
    except Exception as exc:
        if _STOPPED_BY:  # DuckDB turned the signal into "Query interrupted": a stop
            raise Stopped(_STOPPED_BY[0]) from None
        from stepscope.ingest.db_errors import explain

        mapped = explain(exc, getattr(args, "db", None))
        if mapped is None:
            raise
        raise mapped from None


def _print_uninterrupted(line: str) -> None:
    """Print the interrupt's one line; a second signal cannot cut it (the stop signals
    are ignored while printing, then the previous handlers are restored for in-process
    callers)."""
    if threading.current_thread() is not threading.main_thread():
        print(line, file=sys.stderr)
        return
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in STOP_SIGNALS}
    try:
        print(line, file=sys.stderr)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised like Ctrl-C's KeyboardInterrupt so that every `with`
    block (temporary folders, open databases) cleans up on the way out."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_STOPPED_BY: list[int] = []  # the stop signals this `main` call received, in order


def _raise_stopped(signum: int, frame: object) -> None:
    _STOPPED_BY.append(signum)
    raise Stopped(signum)


def _raise_interrupt(signum: int, frame: object) -> None:
    """Ctrl-C as Python's own handler treats it, but remembered: DuckDB turns the
    KeyboardInterrupt raised inside a query into RuntimeError("Query interrupted"), which
    `report`, `export` and `whatif` of a trace path showed as "internal error", exit 1."""
    _STOPPED_BY.append(signum)
    raise KeyboardInterrupt


@contextmanager
def _stop_signals_interrupt() -> Iterator[None]:
    """While the block runs, SIGTERM and SIGHUP raise Stopped and SIGINT a remembered
    KeyboardInterrupt (main thread only; one that was ignored when the process started,
    e.g. SIGHUP under nohup, or SIGINT set by another handler, stays as it was; the
    previous handlers come back after, for in-process callers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP)}
    previous = {sig: h for sig, h in previous.items() if h is not signal.SIG_IGN}
    for sig in previous:
        signal.signal(sig, _raise_stopped)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, _raise_interrupt)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _interrupts() -> Any:
    """stepscope.ingest.interrupts when something loaded it (never imported here)."""
    return sys.modules.get("stepscope.ingest.interrupts")


def _stop_signal(exc: BaseException) -> int:
    """Which signal stopped the command: Stopped's, else the one the ingest's guard saw,
    else SIGINT."""
    signum = getattr(exc, "signum", None)
    if signum is None and (interrupts := _interrupts()) is not None:
        signum = interrupts.last_signal()
    if signum is None and _STOPPED_BY:  # re-raised as a plain KeyboardInterrupt on the way
        signum = _STOPPED_BY[0]
    return int(signum or signal.SIGINT)


def _interrupt_line(exc: BaseException, signum: int) -> str:
    line = getattr(exc, "message", None) or NOTHING_WRITTEN
    if signum != signal.SIGINT and line.startswith("interrupted"):
        line = f"interrupted by {signal.Signals(signum).name}" + line[len("interrupted"):]
    return line


def machine_failure_line(exc: BaseException) -> str | None:
    """The one line for the machine's failure outside any command's own handling (memory
    that cannot be allocated while the modules load or the arguments are read, no file
    handle left): exit 1, never "internal error". None for anything else."""
    if not isinstance(exc, MemoryError | OSError | ImportError):
        return None  # ImportError: a library the loader could not map into memory
    from stepscope.ingest.errors import machine_problem

    what = machine_problem(exc)
    return None if what is None else f"error: {what} (the machine's failure, not stepscope's)"


def _escape_what_the_streams_cannot_encode() -> None:
    """On a stdout or stderr that cannot encode every character (PYTHONIOENCODING=ascii,
    a Latin-1 terminal) a name is written with backslash escapes (`caf\\xe9`) instead
    of ending the command with UnicodeEncodeError; a UTF-8 stream is unchanged."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and stream.errors == "strict":
            reconfigure(errors="backslashreplace")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (never raises for user errors). A stop signal
    gives one line and 128 + its number (130 for Ctrl-C, 143 SIGTERM, 129 SIGHUP)."""
    if (interrupts := _interrupts()) is not None:
        interrupts.forget_signals()
    _STOPPED_BY.clear()
    _escape_what_the_streams_cannot_encode()
    try:
        with _stop_signals_interrupt():
            return _run(argv)
    except KeyboardInterrupt as exc:
        signum = _stop_signal(exc)
        _print_uninterrupted(_interrupt_line(exc, signum))
        return 128 + signum
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # last resort: one line, not a traceback (re-raised on debug)
        if _STOPPED_BY:  # the signal's exception was replaced on the way (DuckDB's
            signum = _STOPPED_BY[0]  # "Query interrupted"): it is still the signal's stop
            _print_uninterrupted(_interrupt_line(KeyboardInterrupt(), signum))
            return 128 + signum
        if (line := machine_failure_line(exc)) is not None:
            say(line)
            return EXIT_NOTHING
        if os.environ.get("STEPSCOPE_DEBUG"):
            raise
        first = (str(exc).strip() or "?").splitlines()[0][:500]
        say(f"internal error: {type(exc).__name__}: {first} (set STEPSCOPE_DEBUG=1 for "
            "the traceback, and please report it)")
        return EXIT_NOTHING


def entry() -> None:
    """The process entry (console script, `python -m stepscope`): exit with main's code,
    whatever Ctrl-C arrives once main has returned. After Ctrl-C the exit goes through
    os._exit(130): CPython turns a normal exit into
    death by SIGINT (-2) when a KeyboardInterrupt once escaped C-level code run during an
    import, even though main caught it and printed its one line."""
    fit_address_space_limit()
    code = main()
    # The outcome is decided and its line printed: a Ctrl-C from here on is ignored, or
    # it would kill the exiting process by SIGINT (-2, no line), since CPython resets a
    # Python-level SIGINT handler to the default during interpreter shutdown.
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    if code > 128:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    raise SystemExit(main())
