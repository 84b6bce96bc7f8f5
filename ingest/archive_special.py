"""Tar members named like a trace that are no regular file: a character or block device,
a FIFO. A tar stores no content for them; they were skipped, so a rank was lost without a
word (exit 0, run complete with one rank fewer). Each now fails alone with one line, as
the same file on disk does (`not a regular file`). Links keep their own handling."""

from __future__ import annotations

import tarfile
from collections.abc import Callable
from typing import IO

_KINDS = {tarfile.CHRTYPE: "a character device", tarfile.BLKTYPE: "a block device",
          tarfile.FIFOTYPE: "a FIFO"}


class SpecialMember(ValueError):
    """Raised by the opener of such a member: the member's failure, never the machine's."""


def special_kind(info: tarfile.TarInfo) -> str | None:
    """What `info` is when it is a device or a FIFO, else None."""
    return _KINDS.get(info.type)


def refusing_opener(kind: str) -> Callable[[], IO[bytes]]:
    """An opener that fails the member with one line saying what it is."""
    def opener() -> IO[bytes]:
        raise SpecialMember(f"not a regular file ({kind} in the archive): it holds no trace")
    return opener
