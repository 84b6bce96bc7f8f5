"""Read a small file an option names (`--model`, `--comm-kernels`): a regular file, at
most a given size, never blocking.

An option file is configuration of a few KB. Read naively, `--comm-kernels /dev/zero`
reads until memory runs out, a FIFO blocks forever and a 3 GiB file is read whole. This
opens without blocking (O_NONBLOCK: opening a FIFO with no writer returns at once), checks
that what was opened is a regular file, and reads at most `max_bytes` + 1 bytes, so a
larger file is refused without reading it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from stepscope.ingest.errors import UsageError, quote_name
from stepscope.ingest.limits import format_size

MAX_OPTION_FILE_BYTES = 16 << 20  # a comm-kernels table of 10,000 patterns is ~2 MB


def read_option_file(path: str | Path, option: str,
                     max_bytes: int = MAX_OPTION_FILE_BYTES) -> bytes:
    """The bytes of the file `option` names; UsageError (one line naming the option, the
    file and the problem) for a missing, unreadable or oversized file, or one that is not
    a regular file (a folder, FIFO, device or socket)."""
    shown = f"{quote_name(path)}: {option}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise UsageError(f"{shown}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{shown}: a folder, not a file") from None
    except OSError as exc:
        if _is_socket(path):  # opening a socket fails with ENXIO ("No such device")
            raise UsageError(f"{shown}: not a regular file (a FIFO, socket or device)") \
                from None
        raise UsageError(f"{shown}: cannot read it ({exc.strerror})") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise UsageError(f"{shown}: a folder, not a file")
        if not stat.S_ISREG(mode):
            raise UsageError(f"{shown}: not a regular file (a FIFO, socket or device)")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise UsageError(f"{shown}: cannot read it ({exc.strerror})") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise UsageError(f"{shown}: larger than {format_size(max_bytes)}, far more than "
                         "an option file holds (is it the right file?)")
    return data


def _is_socket(path: str | Path) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False
