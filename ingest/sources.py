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
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO

from stepscope.ingest.archive_names import member_display, stage_path
from stepscope.ingest.archive_special import (
    SpecialMember,
    link_kind,
    refusing_opener,
    special_kind,
)
from stepscope.ingest.errors import (
    MachineFailure,
    UsageError,
    machine_problem,
    one_line,
    quote_name,
)
from stepscope.ingest.limits import format_size, max_trace_bytes
from stepscope.ingest.nccl.default_names import NOT_WHAT_ITS_NAME_SAYS, default_kind
from stepscope.ingest.nccl.sniff import FLIGHT_RECORDER, sniff
from stepscope.ingest.text_encoding import wide_text_encoding

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
    seen: set[str] = field(default_factory=set)  # real paths collected so far

    def first_time(self, path: Path) -> bool:
        """True the first time a file is met (by its real path): the same folder or file
        given twice, or a file given beside its folder, is read once."""
        real = os.path.realpath(path)
        if real in self.seen:
            return False
        self.seen.add(real)
        return True


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
    """A plain .json file that is not a trace (ground truth, configs): skipped when
    scanning a directory. A small one must be valid JSON without `traceEvents`; a large
    one must open like JSON, name `traceEvents` nowhere and, in its first 64 KiB, none of
    a Kineto trace's other top-level keys (a trace cut before its events is reported).
    Compressed, empty or invalid files are always tried, so their problems get reported."""
    if not path.name.lower().endswith(".json"):
        return False
    try:
        info = os.stat(path)  # once: a folder of 5,000 ranks stats each file here
        if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
            return False
        if info.st_size > SNIFF_BYTES:
            return _large_other_json(path)
        data = path.read_bytes()
        if b'"traceEvents"' in data:
            return False
        # decoded as UTF-8 first: json.loads would read UTF-16/32 bytes, in which
        # `"traceEvents"` above is not found, and skip a trace in another encoding
        json.loads(data.removeprefix(b"\xef\xbb\xbf").decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return False  # the reader reports what is wrong with it
    return True


TRACE_KEY = b'"traceEvents"'
KINETO_HEAD_KEYS = (b'"schemaVersion"', b'"deviceProperties"', b'"distributedInfo"',
                    b'"traceName"', b'"displayTimeUnit"')
HEAD_BYTES = 1 << 16
SCAN_CHUNK = 1 << 22


def _large_other_json(path: Path) -> bool:
    """Whether a .json over SNIFF_BYTES is no trace: see _looks_like_other_json. Reads
    the file once in 4 MiB chunks (a trace names traceEvents in its first one)."""
    with open(path, "rb") as fh:
        head = fh.read(HEAD_BYTES)
        if wide_text_encoding(head[:4]) is not None:
            return False  # UTF-16/32: `"traceEvents"` cannot be found in its bytes
        if head.removeprefix(b"\xef\xbb\xbf").lstrip()[:1] not in (b"{", b"[") \
                or any(key in head for key in KINETO_HEAD_KEYS):
            return False
        tail = b""
        chunk = head
        while chunk:
            if TRACE_KEY in tail + chunk:
                return False
            tail = chunk[-len(TRACE_KEY):]
            chunk = fh.read(SCAN_CHUNK)
    return True


def is_regular_file(path: Path) -> bool:
    """A regular file (following links): FIFOs, sockets and devices are never read,
    since reading them can block forever."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


NOT_REGULAR = "not a regular file (a FIFO, socket or device)"
DANGLING_LINK = ("a symbolic link to {target}, which does not exist (a rank's trace is "
                 "missing: restore it, or remove the link)")


UNREADABLE_FOLDER = ("cannot read this folder ({reason}); the traces in it were not "
                     "ingested (fix its permissions, or leave it out)")


def _walk_files(root: Path, out: TraceSet) -> list[Path]:
    """Every file under `root` (hidden names and links to folders left out), sorted; a
    folder that cannot be listed is a failure of that folder, never skipped in silence."""
    found: list[Path] = []

    def unreadable(exc: OSError) -> None:
        where = quote_name(exc.filename if exc.filename is not None else root)
        out.failures.append((where, UNREADABLE_FOLDER.format(
            reason=(exc.strerror or type(exc).__name__).lower())))

    for folder, dirs, files in os.walk(root, onerror=unreadable):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found += [Path(folder, f) for f in files if not f.startswith(".")]
    return sorted(found)


def _scan_directory(root: Path, out: TraceSet, unpack_dir: Path, limit: int) -> None:
    for path in _walk_files(root, out):
        if not path.exists():
            if path.is_symlink() and (is_trace_name(path.name) or is_archive_name(path.name)):
                out.failures.append((quote_name(path), DANGLING_LINK.format(
                    target=quote_name(os.readlink(path)))))
            continue
        if not out.first_time(path):
            continue  # a file already collected through another path
        shown = quote_name(path)
        if not is_regular_file(path):
            if is_trace_name(path.name) or is_archive_name(path.name):
                out.failures.append((shown, NOT_REGULAR))
            continue
        lower = path.name.lower()
        named = default_kind(path.name)
        kind = None if lower.endswith(".json.gz") or is_archive_name(lower) else sniff(
            path, named=named == FLIGHT_RECORDER)
        if kind is not None:
            out.nccl.append(NcclFile(path, shown, kind))
        elif named is not None:
            out.failures.append((shown, NOT_WHAT_ITS_NAME_SAYS[named]))
        elif is_trace_name(path.name):
            if _looks_like_other_json(path):
                out.skipped.append(shown)
            else:
                out.files.append(TraceFile(path, shown))
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


# What reading one archive member can raise: encrypted (RuntimeError), an unsupported
# method such as deflate64 (NotImplementedError), a bad CRC, truncated data.
MEMBER_ERRORS = (RuntimeError, NotImplementedError, zipfile.BadZipFile, tarfile.TarError,
                 zlib.error, EOFError, OSError, ValueError)


# An archive unpacks to at most this many times its own size in all (JSON traces
# compress 5-30x with deflate; a zip bomb of many members 1,000x), and at least
# ARCHIVE_FLOOR_BYTES: many members each under the per-trace limit cannot fill the disk.
ARCHIVE_RATIO = 100
ARCHIVE_FLOOR_BYTES = 1 << 30


def archive_budget(archive: Path) -> int:
    """The bytes `archive` may unpack to in all: ARCHIVE_RATIO times its size, at least
    ARCHIVE_FLOOR_BYTES (each member is also capped by the per-trace `limit`)."""
    return max(ARCHIVE_FLOOR_BYTES, ARCHIVE_RATIO * archive.stat().st_size)


def _unpack(archive: Path, out: TraceSet, unpack_dir: Path, limit: int) -> None:
    """Extract the trace files of a zip / tar archive; skip unsafe member paths; a member
    that cannot be read (encrypted, deflate64, corrupt) or is larger than the per-trace
    limit fails alone, the other members still ingest."""
    if not is_regular_file(archive):
        out.failures.append((quote_name(archive), NOT_REGULAR))
        return
    shown = quote_name(archive)
    if archive.stat().st_size == 0:
        out.failures.append((shown, "an empty file (0 bytes), not an archive"))
        return
    target = Path(tempfile.mkdtemp(prefix="archive-", dir=unpack_dir))
    try:
        members = _zip_members(archive) if zipfile.is_zipfile(archive) else _tar_members(archive)
        found = 0
        budget = [archive_budget(archive)]
        data_failed = False  # whether the last member's data could not be read
        for member, opener in members:
            found += 1
            data_failed = _extract(member, opener, target, member_display(shown, member), out,
                                   limit, budget)
    except (zipfile.BadZipFile, tarfile.TarError, OSError, EOFError, ValueError,
            zlib.error) as exc:
        detail = str(exc).splitlines()[0].rstrip(":") if str(exc) else type(exc).__name__
        if not (data_failed or _said_by_last_member(out, shown, detail)):
            out.failures.append((shown, f"unreadable archive ({detail})"))
        return
    if found == 0:
        out.failures.append((shown, "archive holds no .json or .json.gz trace files"))


def _said_by_last_member(out: TraceSet, shown: str, detail: str) -> bool:
    """Whether the archive's own failure is the one its last member already reported
    (a truncated tar ends in the member it cuts): one cause, one line."""
    if not out.failures:
        return False
    file, problem = out.failures[-1]
    return file.startswith(f"{shown}!") and detail in problem


def _extract(member: PurePosixPath, opener: Callable[[], IO[bytes]], target: Path,
             display: str, out: TraceSet, limit: int, budget: list[int]) -> bool:
    """Copy one member out; its own problems fail this member only; `budget` holds what
    the archive may still unpack to (archive_budget), less this member's size. A full
    disk or no memory is the machine's failure: it stops the ingest (MachineFailure).
    True when the member's data could not be read: a tar read past it (a size of 10^20,
    a cut archive) fails for the same cause, which this member's line already says."""
    dest = stage_path(target, member)
    if dest.exists():  # a zip may hold one path twice: the first copy is the one read
        out.failures.append((display, "the archive holds this path twice; only its first "
                             "copy is read"))
        return False
    cap = min(limit, budget[0])
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        copied = _copy_capped(opener(), dest, cap)
    except MEMBER_ERRORS as exc:
        dest.unlink(missing_ok=True)
        if (machine := machine_problem(exc)) is not None:
            raise MachineFailure(f"{display}: {machine} (the machine's failure, not the "
                                 "file's): the ingest stopped before anything was written",
                                 what=machine) from None
        out.failures.append((display, _member_problem(exc)))
        return not isinstance(exc, SpecialMember)
    if copied:
        budget[0] -= dest.stat().st_size
    if copied and _looks_like_other_json(dest):
        out.skipped.append(display)  # ground truth, configs: as in a folder
    elif copied:
        out.files.append(TraceFile(dest, display))
    elif cap < limit:
        out.failures.append((display, (
            f"the archive unpacks to more than {ARCHIVE_RATIO} times its own size (at "
            f"least {format_size(ARCHIVE_FLOOR_BYTES)}): a zip bomb? Unpack it yourself "
            "and ingest the folder if it is real")))
    else:
        out.failures.append((display, (
            f"more than {format_size(limit)} unpacked, the per-trace limit (raise it "
            "with --max-trace-size or STEPSCOPE_MAX_TRACE_SIZE if this trace is real)")))
    return False


def _member_problem(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if isinstance(exc, SpecialMember):
        return text
    if isinstance(exc, RuntimeError) and "encrypted" in text.lower():
        return "archive member is encrypted (password-protected); unpack it yourself"
    if isinstance(exc, NotImplementedError):
        return (f"archive member uses a compression method Python cannot read ({text}; "
                "e.g. deflate64): re-pack it with plain deflate (zip -Z deflate) or tar.gz")
    return f"unreadable archive member ({type(exc).__name__}: {text})"


def _zip_members(archive: Path) -> Iterator[tuple[PurePosixPath, Callable[[], IO[bytes]]]]:
    """Trace members of a zip archive, with safe relative paths, each with its opener."""
    with zipfile.ZipFile(archive) as zf:
        for zinfo in zf.infolist():
            member = _safe_member(zinfo.filename)
            if zinfo.is_dir() or member is None or not is_trace_name(member.name):
                continue
            yield member, lambda zinfo=zinfo: zf.open(zinfo)  # type: ignore[misc]


def _tar_members(archive: Path) -> Iterator[tuple[PurePosixPath, Callable[[], IO[bytes]]]]:
    """Trace members of a (compressed) tar archive, with safe relative paths; a device,
    FIFO or link out of the archive named like a trace, with an opener that fails it."""
    regular: set[str] = set()  # the regular members so far: a link to one is left out
    with tarfile.open(archive, "r:*") as tf:
        for tinfo in tf:
            _check_declared_size(tinfo)
            member = _safe_member(tinfo.name)
            if tinfo.isfile():
                regular.add(os.path.normpath(tinfo.name))
            if member is not None and is_trace_name(member.name) and (
                    kind := special_kind(tinfo) or link_kind(tinfo, regular)) is not None:
                yield member, refusing_opener(kind)
                continue
            if not tinfo.isfile() or member is None or not is_trace_name(member.name):
                continue
            src = tf.extractfile(tinfo)
            if src is not None:
                yield member, lambda src=src: src  # type: ignore[misc]


# The largest offset a file can have: a tar header declaring a member past it (a pax
# size of 10^20) is damaged, and reading on would fail with Python's 'cannot fit int into
# an offset-sized integer' after the member's own line.
MAX_FILE_OFFSET = (1 << 63) - 1


def _check_declared_size(tinfo: tarfile.TarInfo) -> None:
    """tarfile.ReadError (the archive's one line) for a member whose header declares more
    bytes than any file can hold: the header is damaged, not the member's data."""
    if tinfo.size > MAX_FILE_OFFSET - tinfo.offset_data:
        raise tarfile.ReadError(f"a member's header declares {tinfo.size:,} bytes, more than "
                                "any file holds: a damaged header")


@contextmanager
def collect_traces(paths: Sequence[str | Path],
                   max_bytes: int | None = None) -> Iterator[TraceSet]:
    """Expand user paths into trace files; archives stay unpacked inside the context.
    Non-regular files (FIFOs, devices) become failures, never reads."""
    limit = max_trace_bytes(max_bytes)
    if not paths:
        raise UsageError("no trace path given: pass trace files, directories or archives")
    check_no_empty_path(paths)
    with tempfile.TemporaryDirectory(prefix="stepscope-unpack-") as tmp:
        out = TraceSet()
        for raw in paths:
            _collect_path(Path(raw), out, Path(tmp), limit)
        if not out.files and not out.failures and not out.nccl:
            raise UsageError(
                f"no trace files (.json, .json.gz, archives of them, Flight Recorder "
                f"dumps or NCCL logs) found in "
                f"{', '.join(quote_name(p) for p in paths)}"
            )
        yield out


def _collect_path(path: Path, out: TraceSet, unpack_dir: Path, limit: int) -> None:
    """One path the user gave: a folder, an archive, an NCCL file or a trace."""
    if not path_exists(path):
        raise UsageError(f"{quote_name(path)}: no such file or directory")
    if path.is_dir():
        _scan_directory(path, out, unpack_dir, limit)
        return
    if not out.first_time(path):
        return
    shown = quote_name(path)
    if not is_regular_file(path):
        out.failures.append((shown, NOT_REGULAR))
    elif is_archive_name(path.name):
        _unpack(path, out, unpack_dir, limit)
    elif (kind := sniff(path, named=True)) is not None:
        out.nccl.append(NcclFile(path, shown, kind))
    else:
        out.files.append(TraceFile(path, shown))


def check_no_empty_path(paths: Sequence[str | Path], what: str = "trace path") -> None:
    """An empty path (an unset shell variable: `stepscope ingest "$DIR"`) is a usage error,
    never the current folder."""
    if any(isinstance(p, str) and not p.strip() for p in paths):
        raise UsageError(f"an empty {what} was given (an unset shell variable?); name the "
                         "files or folders, or '.' for the current folder")


def path_exists(path: str | Path) -> bool:
    """Whether a path exists; False (never an error) for a name the system cannot even
    look up, such as one longer than 255 bytes."""
    try:
        return Path(path).exists()
    except (OSError, ValueError):
        return False


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
    return one_line(strip_suffixes(first.name)) or "run"


MAX_NAME_CHARS = 1024  # a run or job name: bounded (a 300-char run name is fine to store)


def check_name_length(option: str, name: str) -> None:
    """UsageError for a run or job name longer than MAX_NAME_CHARS: a 1 MiB `--run` was
    stored, after the ingest ran out of its memory room and retried (issue 43's audit)."""
    if len(name) > MAX_NAME_CHARS:
        raise UsageError(f"{option} {quote_name(name[:40])}...: {len(name):,} characters; "
                         f"a name has at most {MAX_NAME_CHARS:,}")


def checked_run_name(name: str) -> str:
    """A run name as given (`--run`): printable text, since it is shown in messages,
    links and file names; UsageError otherwise."""
    if not name.strip():
        raise UsageError("--run: the run name is empty")
    check_name_length("--run", name)
    if one_line(name) != name:
        raise UsageError(f"--run {quote_name(name)}: a run name must be printable text "
                         "(no newlines, escape codes or bytes that are not UTF-8)")
    return name
