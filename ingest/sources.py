"""Find the trace files behind the paths a user gives: files, directories, archives.

Archives are unpacked into a temporary directory that lives as long as the
`TraceSet` context. Problems with one path (unreadable archive) become failures of
that path, not of the whole ingest.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO

from stepscope.ingest.errors import UsageError
from stepscope.ingest.limits import format_size, max_trace_bytes
from stepscope.ingest.nccl.sniff import sniff

TRACE_SUFFIXES = (".json", ".json.gz")
ARCHIVE_SUFFIXES = (".zip", ".tar.gz", ".tgz", ".tar")
SNIFF_BYTES = 1 << 20


@dataclass(frozen=True)
class TraceFile:
    """One trace file: where to read it and the name to show the user."""

    path: Path
    display: str


@dataclass(frozen=True)
class NcclFile:
    """A file of NCCL evidence (ingest.nccl.sniff kinds) found next to the traces."""

    path: Path
    display: str
    kind: str


@dataclass
class TraceSet:
    files: list[TraceFile] = field(default_factory=list)
    nccl: list[NcclFile] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)  # (display, problem)
    skipped: list[str] = field(default_factory=list)


def is_trace_name(name: str) -> bool:
    return name.lower().endswith(TRACE_SUFFIXES)


def is_archive_name(name: str) -> bool:
    return name.lower().endswith(ARCHIVE_SUFFIXES)


def strip_suffixes(name: str) -> str:
    """'rank3.pt.trace.json.gz' -> 'rank3.pt.trace'; 'job.tar.gz' -> 'job'."""
    lower = name.lower()
    for suffix in (*ARCHIVE_SUFFIXES, ".json.gz", ".json"):
        if lower.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _looks_like_other_json(path: Path) -> bool:
    """A small plain .json file holding valid JSON without `traceEvents` (ground truth,
    configs): skipped when scanning a directory. Compressed, large, empty or invalid
    files are always tried, so their problems get reported."""
    if not path.name.lower().endswith(".json"):
        return False
    try:
        if not is_regular_file(path) or not 0 < path.stat().st_size <= SNIFF_BYTES:
            return False
        data = path.read_bytes()
        if b'"traceEvents"' in data:
            return False
        json.loads(data.removeprefix(b"\xef\xbb\xbf"))
    except (OSError, ValueError, RecursionError):
        return False  # the reader reports what is wrong with it
    return True


def is_regular_file(path: Path) -> bool:
    """A regular file (following links): FIFOs, sockets and devices are never read,
    since reading them can block forever."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


NOT_REGULAR = "not a regular file (a FIFO, socket or device)"


def _scan_directory(root: Path, out: TraceSet, unpack_dir: Path, limit: int) -> None:
    for path in sorted(p for p in root.rglob("*") if not p.is_dir()):
        if any(part.startswith(".") for part in path.relative_to(root).parts):
            continue
        if not path.exists():
            continue  # a dangling link
        if not is_regular_file(path):
            if is_trace_name(path.name) or is_archive_name(path.name):
                out.failures.append((str(path), NOT_REGULAR))
            continue
        lower = path.name.lower()
        kind = None if lower.endswith(".json.gz") or is_archive_name(lower) else sniff(path)
        if kind is not None:
            out.nccl.append(NcclFile(path, str(path), kind))
        elif is_trace_name(path.name):
            if _looks_like_other_json(path):
                out.skipped.append(str(path))
            else:
                out.files.append(TraceFile(path, str(path)))
        elif is_archive_name(path.name):
            _unpack(path, out, unpack_dir, limit)


def _safe_member(name: str) -> PurePosixPath | None:
    member = PurePosixPath(name)
    if member.is_absolute() or ".." in member.parts:
        return None
    return member


def _copy_capped(src: IO[bytes], dest: Path, limit: int) -> bool:
    """Copy a member out, at most `limit` bytes; False (and no file) when it is larger."""
    written = 0
    with src, open(dest, "wb") as dst:
        while chunk := src.read(1 << 20):
            written += len(chunk)
            if written > limit:
                break
            dst.write(chunk)
    if written > limit:
        dest.unlink()
        return False
    return True


def _unpack(archive: Path, out: TraceSet, unpack_dir: Path, limit: int) -> None:
    """Extract the trace files of a zip / tar archive; skip unsafe member paths; a
    member larger than the per-trace limit fails alone."""
    if not is_regular_file(archive):
        out.failures.append((str(archive), NOT_REGULAR))
        return
    target = Path(tempfile.mkdtemp(prefix="archive-", dir=unpack_dir))
    try:
        members = _zip_members(archive) if zipfile.is_zipfile(archive) else _tar_members(archive)
        found = 0
        for member, src in members:
            dest = target / member
            dest.parent.mkdir(parents=True, exist_ok=True)
            found += 1
            if _copy_capped(src, dest, limit):
                out.files.append(TraceFile(dest, f"{archive}!{member}"))
            else:
                out.failures.append((f"{archive}!{member}", (
                    f"more than {format_size(limit)} unpacked, the per-trace limit (raise it "
                    "with --max-trace-size or STEPSCOPE_MAX_TRACE_SIZE if this trace is real)")))
    except (zipfile.BadZipFile, tarfile.TarError, OSError, EOFError, ValueError) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        out.failures.append((str(archive), f"unreadable archive ({detail})"))
        return
    if found == 0:
        out.failures.append((str(archive), "archive holds no .json or .json.gz trace files"))


def _zip_members(archive: Path) -> Iterator[tuple[PurePosixPath, IO[bytes]]]:
    """Trace members of a zip archive, with safe relative paths."""
    with zipfile.ZipFile(archive) as zf:
        for zinfo in zf.infolist():
            member = _safe_member(zinfo.filename)
            if zinfo.is_dir() or member is None or not is_trace_name(member.name):
                continue
            yield member, zf.open(zinfo)


def _tar_members(archive: Path) -> Iterator[tuple[PurePosixPath, IO[bytes]]]:
    """Trace members of a (compressed) tar archive, with safe relative paths."""
    with tarfile.open(archive, "r:*") as tf:
        for tinfo in tf:
            member = _safe_member(tinfo.name)
            if not tinfo.isfile() or member is None or not is_trace_name(member.name):
                continue
            src = tf.extractfile(tinfo)
            if src is not None:
                yield member, src


@contextmanager
def collect_traces(paths: Sequence[str | Path],
                   max_bytes: int | None = None) -> Iterator[TraceSet]:
    """Expand user paths into trace files; archives stay unpacked inside the context.
    Non-regular files (FIFOs, devices) become failures, never reads."""
    limit = max_trace_bytes(max_bytes)
    if not paths:
        raise UsageError("no trace path given: pass trace files, directories or archives")
    with tempfile.TemporaryDirectory(prefix="stepscope-unpack-") as tmp:
        out = TraceSet()
        for raw in paths:
            path = Path(raw)
            if not path.exists():
                raise UsageError(f"{path}: no such file or directory")
            if path.is_dir():
                _scan_directory(path, out, Path(tmp), limit)
            elif not is_regular_file(path):
                out.failures.append((str(path), NOT_REGULAR))
            elif is_archive_name(path.name):
                _unpack(path, out, Path(tmp), limit)
            elif (kind := sniff(path, named=True)) is not None:
                out.nccl.append(NcclFile(path, str(path), kind))
            else:
                out.files.append(TraceFile(path, str(path)))
        if not out.files and not out.failures and not out.nccl:
            raise UsageError(
                f"no trace files (.json, .json.gz, archives of them, Flight Recorder "
                f"dumps or NCCL logs) found in "
                f"{', '.join(str(p) for p in paths)}"
            )
        yield out


_RANK_IN_NAME = re.compile(r"(?:rank|worker)[-_]?(\d+)", re.IGNORECASE)


def rank_from_name(display: str) -> int | None:
    """Rank number in a file name: 'rank3', 'worker3', 'rank-3', 'rank_3'."""
    name = display.replace("\\", "/").rsplit("/", 1)[-1].rsplit("!", 1)[-1]
    match = _RANK_IN_NAME.search(name)
    return int(match.group(1)) if match else None


def default_run_name(paths: Sequence[str | Path]) -> str:
    if not paths:
        raise UsageError("no trace path given: pass trace files, directories or archives")
    first = Path(paths[0]).resolve()
    return strip_suffixes(first.name) or "run"
