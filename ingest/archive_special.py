"""Tar members named like a trace that are no regular file: a character or block device,
a FIFO. A tar stores no content for them; they were skipped, so a rank was lost without a
word (exit 0, run complete with one rank fewer). Each now fails alone with one line, as
the same file on disk does (`not a regular file`). So does a link named like a trace
whose target is no regular member before it (`/etc/passwd`, a name the archive lacks):
links are never followed out of the archive, and it was skipped in the same silence; a
link to a member the archive holds is left out, that member is read under its own name."""

from __future__ import annotations

import posixpath
import tarfile
from collections.abc import Callable
from typing import IO

from stepscope.ingest.errors import quote_name

_KINDS = {tarfile.CHRTYPE: "a character device", tarfile.BLKTYPE: "a block device",
          tarfile.FIFOTYPE: "a FIFO"}


class SpecialMember(ValueError):
    """Raised by the opener of such a member: the member's failure, never the machine's."""


def special_kind(info: tarfile.TarInfo) -> str | None:
    """What `info` is when it is a device or a FIFO, else None."""
    return _KINDS.get(info.type)


def link_kind(info: tarfile.TarInfo, regular: set[str]) -> str | None:
    """What `info` is when it is a link whose target is none of the `regular` members
    read before it (their normalized names), else None (no link, or one to such a
    member)."""
    if not (info.issym() or info.islnk()):
        return None
    target = info.linkname if info.islnk() else posixpath.join(
        posixpath.dirname(info.name), info.linkname)
    if posixpath.normpath(target) in regular:
        return None
    what = "a symbolic link" if info.issym() else "a hard link"
    return f"{what} to {quote_name(info.linkname)}"


def refusing_opener(kind: str) -> Callable[[], IO[bytes]]:
    """An opener that fails the member with one line saying what it is."""
    def opener() -> IO[bytes]:
        raise SpecialMember(f"not a regular file ({kind} in the archive): it holds no trace")
    return opener
