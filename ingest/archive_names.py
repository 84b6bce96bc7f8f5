"""Where an archive member is unpacked, and how a line names it, whatever its path.

A tar member may carry a path no file system takes: a folder name of 5,000 characters
(255 bytes is the most a Linux name may have), or a path beyond PATH_MAX. Unpacked as it
was named, such a member failed the whole archive with a raw 'File name too long' line
holding the 5,000 characters. Now each over-long name is staged under a short name that
keeps its start, its end (the file's suffix, which says its format) and a digest of the
whole (two names stay two files), and a line shows the member's path with each over-long
name cut in the middle, saying its length.
"""

from __future__ import annotations

import hashlib
from pathlib import Path, PurePosixPath

from stepscope.ingest.errors import quote_name

NAME_BYTES = 120  # a staged name longer than this is shortened (file systems allow 255)
PATH_BYTES = 1024  # staged folders longer than this become one (PATH_MAX is 4096)
SHOWN_NAME = 60  # a name shown in a line longer than this is cut in the middle


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogateescape"))


def _short_name(name: str) -> str:
    """`name` when it fits NAME_BYTES, else its first 16 and last 40 characters around
    a digest of the whole (at most 4 bytes a character: 241 bytes)."""
    if _size(name) <= NAME_BYTES:
        return name
    return f"{name[:16]}~{_digest(name)}~{name[-40:]}"


def stage_path(target: Path, member: PurePosixPath) -> Path:
    """Where `member` (a safe relative path) is unpacked under `target`: its own path,
    with each over-long name shortened, and its folders as one digest folder when they
    are still too long together."""
    parts = [_short_name(part) for part in member.parts]
    folders = "/".join(parts[:-1])
    if _size(folders) > PATH_BYTES:
        parts = [f"~{_digest(str(member.parent))}", parts[-1]]
    return target.joinpath(*parts)


def member_display(archive_shown: str, member: PurePosixPath) -> str:
    """`archive!member` as lines show it: a name over SHOWN_NAME characters is cut in the
    middle with its length ('dddd...(5,000 characters)...dddd/rank0.json'), and the
    folders between the first and the file counted when they are still long together."""
    parts = [part if len(part) <= SHOWN_NAME
             else f"{part[:24]}...({len(part):,} characters)...{part[-16:]}"
             for part in member.parts]
    if len(parts) > 3 and sum(map(len, parts)) > 4 * SHOWN_NAME:
        parts = [parts[0], f"...({len(parts) - 2} folders)...", parts[-1]]
    return f"{archive_shown}!{quote_name('/'.join(parts))}"
