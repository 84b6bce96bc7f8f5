"""Argument checks shared by the commands, as argparse `type=` functions.

Every number a user gives is checked here, before any work starts: finite, in a sane
range, of the right kind. A bad value is a usage error (exit 2) that names the option,
the value and the allowed range; NaN and infinities never reach a report, so the JSON
output stays valid.
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import os
import re
import stat
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from stepscope.ingest import number_text
from stepscope.ingest.errors import UsageError
from stepscope.ingest.executors import MAX_JOBS, parse_executor
from stepscope.ingest.folder_names import folder_ending, names_a_folder
from stepscope.ingest.limits import parse_size
from stepscope.ingest.ranksets import RankSet, parse_ranks


def real(low: float, high: float, *, low_open: bool = True) -> Callable[[str], float]:
    """A finite float in (low, high] (or [low, high] when low_open is False), written as
    ingest.number_text.decimal reads it (7e9, 0.35; no sign, space or '_')."""

    def parse(text: str) -> float:
        try:
            return number_text.decimal(text, low, high, low_open=low_open)
        except number_text.NumberTextError as exc:
            raise argparse.ArgumentTypeError(exc.about(text)) from None

    parse.__name__ = "number"
    return parse


def integer(low: int, high: int) -> Callable[[str], int]:
    """A whole number in [low, high], written in ASCII digits only (8, 4096)."""

    def parse(text: str) -> int:
        try:
            return number_text.whole(text, low, high)
        except number_text.NumberTextError as exc:
            raise argparse.ArgumentTypeError(exc.about(text)) from None

    parse.__name__ = "integer"
    return parse


def size(text: str) -> int:
    """A byte size such as 8G or 500M (binary units)."""
    try:
        return parse_size(text, "size")
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("size ")) from None


def output_file(text: str) -> Path:
    """Where a report goes: its folder must exist and be writable, and it must not be a
    folder itself, nor name one ('out/', 'out/.': pathlib drops the '/' and a file 'out'
    was written); checked before any work, so a long ingest never ends in a failed write.
    What it may not replace (the database, an input) is checked by each command with
    stepscope.outputs.check_output once the other arguments are known."""
    if text == "-":  # the usual name of stdout (it wrote a file named '-')
        return Path("/dev/stdout")
    if names_a_folder(text):
        raise argparse.ArgumentTypeError(f"{text}: ends with '{folder_ending(text)}', so it "
                                         "names a folder; give a file name")
    path = Path(text)
    try:
        if path.is_symlink() and not _written_into(path):  # its target gets written
            target = Path(os.path.realpath(path))
            shown = text if target.exists() else f"{text} (a link to {target})"
            if target.is_symlink():
                raise argparse.ArgumentTypeError(f"{text}: a loop of symbolic links; give a "
                                                 "file name")
            _writable_file(shown, target, target.parent)
            return path
        return _writable_file(text, path, path.parent)
    except OSError as exc:  # e.g. a name longer than the system allows
        raise argparse.ArgumentTypeError(f"{text}: {exc.strerror or exc}") from None


def _writable_file(text: str, path: Path, folder: Path) -> Path:
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a folder; give a file name")
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path,
                                                                                   os.W_OK)):
        raise argparse.ArgumentTypeError(f"{text}: cannot write there (permission denied)")
    if not _written_into(path):
        _try_a_file_in(text, folder)
    _check_pipe(text, path)
    return path


# A FIFO an output names, opened when its option is checked: a FIFO no process reads
# is refused then (writing into it waited forever); one that is read stays open here, so
# its reader sees no end of file before the output is written (outputs.release_pipe).
HELD_PIPES: dict[str, int] = {}
PIPE_READER_WAIT_S = 5.0


def _check_pipe(text: str, path: Path) -> None:
    """Refuse a FIFO no process reads; hold one that is read open until it is written."""
    real = os.path.realpath(path)
    try:
        mode = os.stat(real).st_mode
    except OSError:
        return  # nothing there yet: a new file
    if not stat.S_ISFIFO(mode) or real in HELD_PIPES:
        return
    deadline = time.monotonic() + PIPE_READER_WAIT_S
    while True:  # a reader started beside the command (`cmd --out p & cat p`) gets time
        try:
            HELD_PIPES[real] = os.open(real, os.O_WRONLY | os.O_NONBLOCK)
            return
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise
        if time.monotonic() > deadline:
            raise argparse.ArgumentTypeError(
                f"{text}: a named pipe that no process reads (writing would wait forever; "
                f"waited {PIPE_READER_WAIT_S:g} s for a reader); start its reader first, "
                "or give a file name")
        time.sleep(0.05)


def release_pipe(path: Path) -> None:
    """Close the FIFO `path` held open by _check_pipe, once the output is written."""
    fd = HELD_PIPES.pop(os.path.realpath(path), None)
    if fd is not None:
        os.close(fd)


def _written_into(path: Path) -> bool:
    """A character device or a FIFO (/dev/null, a named pipe) and this process's own
    streams (/dev/stdout, /dev/fd/1) are written into, never replaced: no file is made
    beside them."""
    text = os.path.normpath(str(path))
    if text in ("/dev/stdout", "/dev/stderr") or text.startswith(("/dev/fd/",
                                                                   "/proc/self/fd/")):
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def _try_a_file_in(text: str, folder: Path) -> None:
    """Make and remove an empty file where the report's temporary file will go: for root
    os.access says yes to any folder, and /proc or /sys take no new file, so the write
    failed only after the work (exit 1)."""
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".stepscope-", suffix=".tmp")
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"{text}: cannot write there ({exc.strerror})"
                                         ) from None
    os.close(fd)
    os.unlink(probe)


UNBOUNDED = 10 ** number_text.MAX_DIGITS  # past any whole number read from text


def checked_numbers(parser: argparse.ArgumentParser) -> None:
    """Give every argument typed plain `int` or `float`, in `parser` and its subcommands,
    the shared checks (ASCII digits, no '_', finite): Python's own took '1_000', other
    scripts' digits and (float) nan or inf, so `dashboard --port 1_000` was port 1000.
    A new option with `type=int` is covered without a change here; its range stays the
    command's to check."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                checked_numbers(sub)
        elif action.type is int:  # no range of its own: the command checks it
            action.type = integer(-UNBOUNDED, UNBOUNDED)
        elif action.type is float:
            action.type = real(-1e308, 1e308, low_open=False)


def host_name(text: str) -> str:
    """An address to listen on: an IP address (v4, or v6 with or without brackets) or a
    host name of printable ASCII labels; a control character or a space reached the
    socket layer ("internal error: encoding of hostname failed")."""
    bare = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    try:
        ipaddress.ip_address(bare)
        return bare
    except ValueError:
        pass
    label = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")
    if text.isascii() and all(label.fullmatch(x) for x in text.removesuffix(".").split(".")):
        return text
    raise argparse.ArgumentTypeError(f"{text!r}: not an IP address or a host name")


# Ranges of the user's numbers (documented in README "Limits").
PEAK_TFLOPS = real(0, 1e6)            # per GPU; today's largest dense peak is ~5e3
JOBS = integer(1, MAX_JOBS)


def _reason(exc: UsageError, option: str, text: str) -> str:
    """A checker's message without its "--OPTION 'VALUE': " head (argparse names the
    option itself); cut by the head, not at the first ': ', which a value can hold
    (`--executor 'ray: h:1'` lost its start)."""
    message = str(exc)
    for head in (f"{option} {text!r}: ", f"{option} '{text}': "):
        if message.startswith(head):
            return message[len(head):]
    return message


def rank_set(text: str) -> RankSet:
    """`--ranks 0-63,512`."""
    try:
        return parse_ranks(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(_reason(exc, "--ranks", text)) from None


def executor_spec(text: str) -> str:
    """`--executor auto|inline|process|ray|ray://ADDRESS`."""
    try:
        parse_executor(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(_reason(exc, "--executor", text)) from None
    return text
