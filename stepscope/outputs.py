"""Where the commands' files go, written so that nothing the user has is ever lost.

Every command that writes a file (`report`, `diff`, `plan`, `hang` and `export` with
`--out`, and `nightly`'s report folder, `--out-dir` or its default) goes through this
module:

* `check_output` is the one check of an output's place, called with every input of the
  command (`command_inputs`: the trace paths it was given, run names that are no path
  are skipped, and the files its options read). Before any work it refuses an output
  that is the database (or its `.wal`), an input trace or archive, anything inside an
  input folder (a new file too: stepscope never writes among the traces; symbolic links
  and `..` are resolved, for a path that does not exist yet as well), an input file of
  an option (`--model`, `--comm-kernels`), any existing DuckDB database, compressed
  file, archive or Kineto trace (a trace of an earlier ingest is no input of
  `report RUN`, and was replaced), a block device or a socket (usage error, exit 2).
  `check_out_dir` applies it to a report folder and each file it will hold;
  `check_folder_name` keeps a name that becomes a folder (`nightly --job`, `--run`) one
  plain path component.
* `write_text` writes through a temporary file in the same folder and an atomic rename,
  so an interrupt, a full disk or a crash never leaves half a report and never replaces
  the old file with a broken one. A symbolic link is followed: its target is replaced and
  the link stays. A character device or FIFO (`/dev/null`, `/dev/tty`, a named pipe) is
  written into, never replaced; `/dev/stdout`, `/dev/stderr` and `/dev/fd/N` write to
  that stream of this process (so `--out /dev/stdout >> log` appends, as the shell
  promised).
* A write that fails (disk full, permission) is one line naming the file and the reason
  (`OutputError`, exit 1); the previous file, if any, is untouched.
"""

from __future__ import annotations

import argparse
import os
import re
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from stepscope.ingest.errors import StepscopeError, UsageError, quote_name, terminal_safe
from stepscope.ingest.sources import check_name_length, path_exists
from stepscope.validate import output_file, release_pipe

DUCKDB_MAGIC = b"DUCK"         # bytes 8..12 of every DuckDB database file
INPUT_OPTIONS = ("model", "comm_kernels")  # options that name a file the command reads
# the arguments that name what a command reads: a trace path (file, folder or archive) or
# a run of the database (a name that is no path is no input here)
TRACE_ARGUMENTS = ("target", "run_a", "run_b", "source", "paths")
# one plain path component: no '/', not '.', '..' or hidden, no space or control character
FOLDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
STREAM_LINKS = {"/dev/stdout": 1, "/dev/stderr": 2, "/proc/self/fd/1": 1,
                "/proc/self/fd/2": 2, "/dev/fd/1": 1, "/dev/fd/2": 2}


class OutputError(StepscopeError):
    """An output could not be written (exit 1); nothing was left half-written."""


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _same(a: Path, b: Path) -> bool:
    """Whether two paths name the same file (existing or not)."""
    try:
        if path_exists(a) and path_exists(b):
            return os.path.samefile(a, b)
    except OSError:
        pass
    return _real(a) == _real(b)


def _is_duckdb_file(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(12)[8:12] == DUCKDB_MAGIC
    except OSError:
        return False


# What no report, diff, plan or hang output ever is: a file of one of these formats is
# someone's data (a trace of an earlier ingest, an archive), never an output to replace.
COMPRESSED_MAGIC = ((b"\x1f\x8b", "a gzip file (a trace?)"), (b"PK\x03\x04", "a zip archive"),
                    (b"\x28\xb5\x2f\xfd", "a zstd file"), (b"BZh", "a bzip2 file"))
TRACE_SNIFF_BYTES = 1 << 16
EXPORT_MARK = b'"otherData":{"stepscope":'  # how `stepscope export` opens its file


def _trace_like(path: Path) -> str | None:
    """What `path` is when it is a compressed file, a tar archive or a Kineto trace (its
    first 64 KiB name traceEvents); None for anything else."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(TRACE_SNIFF_BYTES)
    except OSError:
        return None
    for magic, what in COMPRESSED_MAGIC:
        if head.startswith(magic):
            return what
    if head[257:262] == b"ustar":
        return "a tar archive"
    if head.lstrip()[:1] == b"{" and b'"traceEvents"' in head \
            and EXPORT_MARK not in head:  # `stepscope export`'s own file is replaced
        return "a Kineto trace"
    return None


def _inside(path: Path, folder: Path) -> bool:
    """Whether `path` is `folder` or lies under it, once symbolic links and `..` are
    resolved (realpath resolves what exists; a part that does not exist yet is no link,
    so its `..` is taken literally, as the kernel will)."""
    real, root = _real(path), _real(folder)
    return real == root or root in real.parents


def option_inputs(args: argparse.Namespace) -> list[Path]:
    """The files a command's options make it read (`--model`, `--comm-kernels`): an
    output must never be one of them."""
    found = (getattr(args, name, None) for name in INPUT_OPTIONS)
    return [Path(f) for f in found if f is not None]


def command_inputs(args: argparse.Namespace) -> list[Path]:
    """Everything a command reads, from its parsed arguments: the trace paths or run names
    it was given (TRACE_ARGUMENTS; check_output skips a name that is no path) and the
    files its options read. Every command with an output passes this to check_output."""
    given: list[str | Path] = []
    for name in TRACE_ARGUMENTS:
        value = getattr(args, name, None)
        if isinstance(value, list | tuple):
            given.extend(value)
        elif value is not None:
            given.append(value)
    return [*(Path(v) for v in given), *option_inputs(args)]


def check_output(out: Path, *, db: str | Path | None = None,
                 inputs: Iterable[str | Path] = (), what: str = "--out") -> None:
    """Refuse an output path that would destroy something or land among the traces (see
    the module doc); a UsageError that says what the path is and what to do."""
    shown = f"{what} {quote_name(out)}"
    if _stream_fd(out) is not None:
        return
    if db is not None:
        _check_not_database(out, Path(db), shown)
    for raw in inputs:
        source = Path(raw)
        if not path_exists(source):
            continue  # a run name, not a path
        if source.is_dir():
            _check_outside(out, source, shown)
        elif _same(out, source):
            raise UsageError(f"{shown}: is an input ({quote_name(source)}); writing there "
                             "would destroy it. Choose another file")
    _check_kind(out, shown)


def _check_not_database(out: Path, db: Path, shown: str) -> None:
    for guarded in (db, db.with_name(db.name + ".wal")):
        if _same(out, guarded):
            raise UsageError(f"{shown}: is the database {quote_name(db)} (or its "
                             ".wal); writing there would destroy it. Choose another file")


def _check_outside(place: Path, folder: Path, shown: str, kind: str = "a file") -> None:
    """Refuse a place inside the input folder `folder` (or the folder itself), existing
    or not: what stepscope writes never lands among the traces it reads."""
    if not _inside(place, folder):
        return
    where = ("is the input folder" if _real(place) == _real(folder)
             else f"is {kind} inside the input folder")
    harm = ("replace it" if path_exists(place) and not place.is_dir()
            else "put files among the traces")
    raise UsageError(f"{shown}: {where} {quote_name(folder)}; writing there would {harm}. "
                     "Choose a place outside the traces")


def _check_kind(out: Path, shown: str) -> None:
    try:
        mode = os.stat(out).st_mode
    except OSError:
        return  # does not exist yet (its folder was checked by validate.output_file)
    if stat.S_ISBLK(mode) or stat.S_ISSOCK(mode):
        raise UsageError(f"{shown}: is a block device or a socket; give a file name")
    if stat.S_ISDIR(mode):
        raise UsageError(f"{shown}: is a folder; give a file name")
    if stat.S_ISREG(mode) and _is_duckdb_file(out):
        raise UsageError(f"{shown}: is a DuckDB database; writing there would destroy it. "
                         "Choose another file")
    kind = _trace_like(out) if stat.S_ISREG(mode) else None
    if kind is not None:
        raise UsageError(f"{shown}: is {kind}; writing there would destroy it. "
                         "Choose another file")


def check_out_dir(out_dir: Path, *, db: str | Path | None,
                  inputs: Iterable[str | Path], names: Iterable[str]) -> None:
    """A report folder (`nightly --out-dir` or its default): not a file, not inside an
    input folder (named as given, before its files), and none of the files it will hold
    is one of the guarded paths (check_output)."""
    listed = list(inputs)
    shown = f"--out-dir {quote_name(out_dir)}"
    if path_exists(out_dir) and not out_dir.is_dir():
        raise UsageError(f"{shown}: is a file, not a folder")
    for source in map(Path, listed):
        if path_exists(source) and source.is_dir():
            _check_outside(out_dir, source, shown, "a folder")
    for name in names:
        check_output(out_dir / name, db=db, inputs=listed, what="--out-dir")


def check_folder_name(option: str, name: str, names: str) -> None:
    """A name that becomes a folder (`nightly --job`; `--run`, whose reports go to
    stepscope-nightly/RUN/ by default) is one plain path component: letters, digits,
    '.', '_' and '-', starting with a letter or digit, so no '/', '.', '..', hidden name,
    space or control character can put a folder anywhere else."""
    check_name_length(option, name)
    if not FOLDER_NAME.fullmatch(name):
        shown = quote_name(name)  # quoted and escaped when odd, quoted anyway when plain
        shown = shown if shown != name else f"'{name}'"
        raise UsageError(f"{option} {shown}: use letters, digits, '.', '_' and "
                         f"'-', starting with a letter or digit ({names}: one folder name, "
                         "no '/', not '.' or '..')")


def _stream_fd(out: Path) -> int | None:
    """1 or 2 when `out` names this process's stdout or stderr (through /dev or /proc)."""
    text = os.path.normpath(str(out))
    return STREAM_LINKS.get(text)


def write_text(text: str, out: Path | None) -> None:
    """Write `text` to `out` (see the module doc), or to stdout when out is None; its
    control characters escaped (ingest.errors.terminal_safe), whatever a trace named."""
    text = terminal_safe(text)
    fd = 1 if out is None else _stream_fd(out)
    if fd is not None:
        stream = sys.stdout if fd == 1 else sys.stderr
        stream.write(text if text.endswith("\n") else text + "\n")
        stream.flush()
        return
    assert out is not None
    target = _real(out)
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise OutputError(f"{quote_name(out)}: cannot write there ({exc.strerror})") from None
    if mode is not None and (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
        _write_into(target, text, out)
        return
    _replace_atomically(target, text, out, mode)


def _write_into(target: Path, body: str, shown: Path) -> None:
    try:
        with open(target, "w", encoding="utf-8") as fh:
            fh.write(body)
    except OSError as exc:
        raise OutputError(f"{quote_name(shown)}: could not write ({exc.strerror})") from None
    finally:
        release_pipe(target)


def _replace_atomically(target: Path, body: str, shown: Path, mode: int | None) -> None:
    """A temporary file beside `target`, fsynced and renamed over it."""
    with _staged_beside(target, shown, mode) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        fh.write(body)


@contextmanager
def staged_file(out: Path) -> Iterator[Path]:
    """The path to write `out` through, for a writer that opens the file itself (`export`):
    a temporary file beside it, renamed over `out` once the writer is done, so a full disk
    or an interrupt leaves the earlier file as it was. A character device or FIFO, or this
    process's stdout/stderr, is written directly. A failed write (OSError) is one
    OutputError naming `out`, never the database the writer was reading."""
    target = _real(out)
    try:
        mode: int | None = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise OutputError(f"{quote_name(out)}: cannot write there ({exc.strerror})") from None
    if _stream_fd(out) is not None or (mode is not None
                                       and (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode))):
        try:
            yield out if _stream_fd(out) is not None else target
        except OSError as exc:
            raise OutputError(f"{quote_name(out)}: could not write ({exc.strerror})") from None
        finally:
            release_pipe(target)
        return
    with _staged_beside(target, out, mode) as tmp:
        yield tmp


@contextmanager
def _staged_beside(target: Path, shown: Path, mode: int | None) -> Iterator[Path]:
    """A temporary file's path beside `target`; once the block is done it is fsynced and
    renamed over `target` (keeping its mode). Any OSError is one OutputError naming
    `shown`, and the earlier file stays as it was."""
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name[:80]}.",
                                   suffix=".tmp")
        os.close(fd)
    except OSError as exc:
        raise OutputError(f"{quote_name(shown)}: cannot write there ({exc.strerror})") from None
    try:
        yield Path(tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, stat.S_IMODE(mode) if mode is not None else _new_file_mode())
        os.replace(tmp, target)
    except OSError as exc:
        raise OutputError(f"{quote_name(shown)}: could not be written ({exc.strerror}); "
                          "an earlier file there is unchanged") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _new_file_mode() -> int:
    """What open() would give a new file: 0o666 less the umask (mkstemp's is 0o600)."""
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def write_files(folder: Path, files: Mapping[str, str]) -> list[Path]:
    """Each of `files` (name -> text) into `folder`, each atomically."""
    written = []
    for name, text in files.items():
        path = folder / name
        write_text(text, path)
        written.append(path)
    return written


T = TypeVar("T")


def add_format_options(p: argparse.ArgumentParser, formats: Mapping[str, Callable[[T], str]],
                       *, default: str = "md", out_help: str | None = None) -> None:
    """`--format` over a model's formats (dashboard/render/formats.py) and, when the command
    writes files, `--out FILE` with its help."""
    p.add_argument("--format", choices=sorted(formats), default=default,
                   help=f"output format (default: {default})")
    if out_help is not None:
        p.add_argument("--out", type=output_file, help=out_help)


def emit(args: argparse.Namespace, formats: Mapping[str, Callable[[T], str]], model: T) -> None:
    """The model in the chosen `--format`, to `--out` or stdout (write_text)."""
    write_text(formats[args.format](model), getattr(args, "out", None))
