"""Getting traces into the dashboard's database: uploads, a server folder, the samples.

Every ingest here goes through a private staging file and a short merge
(`ingest.merge`), so the pages of other browser tabs keep reading the shared database
while traces are parsed. Uploaded bytes live in a temporary folder that is removed when
the ingest ends, whatever happens. Nothing here imports Streamlit: the Upload page only
wires these functions to widgets.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from stepscope.analyzers.breakdown.attribution import materialize
from stepscope.ingest import IngestResult, NothingIngestedError, UsageError, relabel_files
from stepscope.ingest import ingest as ingest_traces
from stepscope.ingest.errors import quote_name
from stepscope.ingest.merge import merge_run, retry_busy
from stepscope.ingest.sources import is_archive_name, is_trace_name, strip_suffixes

UPLOAD_TYPES = ("json", "gz", "zip", "tgz", "tar")
UPLOAD_LABEL = "upload:"
SAMPLES_DIR = Path(__file__).resolve().parents[2] / "sample_traces"
MAX_FOLDER_DEPTH = 4
MAX_FOLDERS = 500
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")

ProgressFn = Callable[[int, int, str], None]
BusyFn = Callable[[int], None]


@dataclass(frozen=True)
class Upload:
    """One file the browser sent: its name as the user saw it and its bytes."""

    name: str
    data: BinaryIO


def safe_file_name(name: str) -> str:
    """The last path component of an uploaded name, with only harmless characters
    (a browser may send 'C:\\x\\rank0.json' or '../../etc/passwd')."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    cleaned = _UNSAFE.sub("_", base).lstrip(".")
    return cleaned or "upload"


def check_upload_size(sizes: Iterable[int], max_mb: int) -> None:
    """Raise UsageError when the files together exceed the --max-upload-mb limit."""
    total = sum(sizes)
    if total > max_mb * 1024 * 1024:
        raise UsageError(f"the files add up to {total / 2**20:.0f} MB, over the "
                         f"{max_mb} MB limit (start the dashboard with a larger "
                         "--max-upload-mb, or put the traces under --traces-root)")


def default_run_name(names: Iterable[str]) -> str:
    """A run name from the uploaded names: the archive's name for one archive, else
    'upload'."""
    names = list(names)
    if len(names) == 1:
        return strip_suffixes(safe_file_name(names[0])) or "upload"
    return "upload"


@contextmanager
def saved_uploads(uploads: Iterable[Upload]) -> Iterator[Path]:
    """Write the uploads into a fresh temporary folder (unique names); the folder and
    everything in it is removed when the context ends."""
    folder = Path(tempfile.mkdtemp(prefix="stepscope-upload-"))
    try:
        used: set[str] = set()
        for up in uploads:
            name = safe_file_name(up.name)
            stem, n = name, 1
            while name in used:
                n += 1
                name = f"{n}-{stem}"
            used.add(name)
            with open(folder / name, "wb") as out:
                shutil.copyfileobj(up.data, out, 1 << 20)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def relabel_failures(result: IngestResult, prefix: str, label: str) -> list[tuple[str, str]]:
    """The failed files of an ingest with the temporary folder replaced by `label`."""
    return [(f.replace(prefix, label), why) for f, why in result.failures]


def relabel_nothing(exc: NothingIngestedError, prefix: str) -> NothingIngestedError:
    """The same refusal naming each file by the name it was uploaded under, not its
    temporary path on the server, and pointing at the errors the page lists below it."""
    message = str(exc).replace(prefix, UPLOAD_LABEL).replace(
        "(see the errors above)", "(each file's error is listed below)")
    return NothingIngestedError(message, [(f.replace(prefix, UPLOAD_LABEL), why)
                                          for f, why in exc.failures])


def ingest_staged(paths: list[Path], db: Path, run: str, progress: ProgressFn | None = None,
                  on_busy: BusyFn | None = None, relabel_prefix: str | None = None,
                  ) -> IngestResult:
    """Ingest `paths` as run `run` into a private staging file next to `db`, then merge
    the finished run into `db` in one short transaction (retrying while another writer
    holds it). Raises NothingIngestedError / UsageError like `stepscope ingest`."""
    db.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".stepscope-staging-", dir=db.parent) as tmp:
        staging = Path(tmp) / "staging.duckdb"
        try:
            result = ingest_traces(paths, db=staging, run=run, progress=progress,
                                   after_load=materialize)
        except NothingIngestedError as exc:
            if relabel_prefix is None:
                raise
            raise relabel_nothing(exc, relabel_prefix) from None
        except UsageError as exc:  # two jobs in one upload: each named by its files
            if relabel_prefix is None:
                raise
            raise UsageError(str(exc).replace(relabel_prefix, UPLOAD_LABEL)) from None
        if relabel_prefix is not None:
            relabel_files(staging, run, relabel_prefix, UPLOAD_LABEL)
            result.failures = relabel_failures(result, relabel_prefix, UPLOAD_LABEL)
            result.warnings = [w.replace(relabel_prefix, UPLOAD_LABEL) for w in result.warnings]
        retry_busy(lambda: merge_run(staging, db, run), on_busy=on_busy)
    result.db = str(db)
    return result


def ingest_uploads(uploads: Iterable[Upload], db: Path, run: str,
                   progress: ProgressFn | None = None, on_busy: BusyFn | None = None,
                   ) -> IngestResult:
    """Save, ingest (staged) and delete uploaded files; stored names read 'upload:NAME'."""
    with saved_uploads(uploads) as folder:
        files = sorted(folder.iterdir())
        return ingest_staged(files, db, run, progress, on_busy,
                             relabel_prefix=str(folder) + "/")


def trace_folders(root: Path) -> list[str]:
    """Folders under `root` (itself included as '.') that hold trace files or archives,
    as paths relative to it; symlinks leading outside `root` are not followed."""
    root = root.resolve()
    found: list[str] = []
    stack: list[tuple[Path, int]] = [(root, 0)]
    while stack and len(found) < MAX_FOLDERS:
        folder, depth = stack.pop()
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            continue
        if any(e.is_file() and (is_trace_name(e.name) or is_archive_name(e.name))
               for e in entries):
            found.append(str(folder.relative_to(root)))
        if depth < MAX_FOLDER_DEPTH:
            stack.extend((e, depth + 1) for e in reversed(entries)
                         if e.is_dir() and not e.name.startswith(".")
                         and e.resolve().is_relative_to(root))
    return sorted(found)


def resolve_under(root: Path, relative: str) -> Path:
    """`root / relative`, refusing anything that resolves outside `root` ('..', absolute
    paths, symlinks)."""
    root = root.resolve()
    target = (root / relative).resolve()
    if not target.is_relative_to(root):
        raise UsageError(f"{relative}: outside the traces root {root}")
    if not target.is_dir():
        raise UsageError(f"{relative}: no such folder under {root}")
    escaping = links_outside(target, root)
    if escaping:
        raise UsageError(f"{relative}: {quote_name(escaping[0].relative_to(target))} is a "
                         f"link to outside the traces root {root} ({len(escaping)} such "
                         "link(s)); nothing was ingested: copy the traces under the root "
                         "instead of linking them")
    return target


def links_outside(folder: Path, root: Path) -> list[Path]:
    """The files under `folder` (walked without following folder links, as the ingest
    walks) that are symbolic links resolving outside `root`, or dangling: ingesting the
    folder would read them, so a link to /etc/shadow beside the traces would be read."""
    found: list[Path] = []
    for where, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            path = Path(where, name)
            if path.is_symlink() and not path.resolve().is_relative_to(root):
                found.append(path)
    return sorted(found)


def sample_sets() -> dict[str, Path]:
    """The bundled sample runs ('simulated/straggler' -> its folder), when the dashboard
    runs from a checkout that has sample_traces/."""
    sets: dict[str, Path] = {}
    for kind in ("simulated", "cpu"):
        base = SAMPLES_DIR / kind
        if base.is_dir():
            for d in sorted(p for p in base.iterdir() if p.is_dir()):
                sets[f"{kind}/{d.name}"] = d
    return sets


def sample_run_name(label: str) -> str:
    """The name the README's quick start gives a sample run (`stepscope ingest
    sample_traces/cpu sample_traces/simulated --run-per-dir`): the folder's name, with
    its kind as prefix when both kinds have a folder of that name ('cpu-straggler')."""
    kind, name = label.split("/", 1)
    names = [key.split("/", 1)[1] for key in sample_sets()]
    return name if names.count(name) == 1 else f"{kind}-{name}"
