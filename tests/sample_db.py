"""The suite's shared sample database: every bundled run ingested once, each simulated set
under its own name, each real CPU sample as `cpu-<name>` (tests only read it).

It is cached in `.pytest_cache/stepscope-samples/<key>/` under a key of everything its
content depends on: the bytes of sample_traces/, the sources of the packages that ingest
and attribute (ingest/, analyzers/, stepscope/, this file) and the versions of stepscope
and DuckDB. An unchanged tree reuses the file; any change builds a new one. The first
pytest(-xdist) process to need it builds it while holding a file lock, the others wait
on the lock and then read the finished file. `STEPSCOPE_TEST_CACHE` moves the cache.

    python tests/sample_db.py      # build (or find) it and print its path
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_traces" / "cpu"
SIM = REPO / "sample_traces" / "simulated"
DB_NAME = "samples.duckdb"
COMPLETE = "complete"
LOCK_TIMEOUT_S = 1200
KEEP = 3  # cached databases kept (the newest): one per recently tested tree
# what the database's content depends on, besides the versions
KEYED = ("sample_traces", "ingest", "analyzers", "stepscope")


def cache_root() -> Path:
    env = os.environ.get("STEPSCOPE_TEST_CACHE")
    return Path(env) if env else REPO / ".pytest_cache" / "stepscope-samples"


def _files(top: Path) -> Iterator[Path]:
    """The regular files under `top` in a stable order, without following the symbolic
    links of stepscope/ (they point at the other keyed folders) or entering caches."""
    for folder, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            path = Path(folder, name)
            if not path.is_symlink() and not name.endswith(".pyc"):
                yield path


def cache_key() -> str:
    import duckdb

    import stepscope

    h = hashlib.sha256(f"{stepscope.__version__}\0{duckdb.__version__}\0".encode())
    for path in [Path(__file__), *(p for top in KEYED for p in _files(REPO / top))]:
        h.update(str(path.relative_to(REPO)).encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:20]


def build(path: Path) -> Path:
    """Ingest every bundled run into a new database at `path`."""
    import stepscope

    for sample in sorted(p for p in SAMPLES.iterdir() if p.is_dir()):
        stepscope.ingest_run(sample, db=path, run=f"cpu-{sample.name}")
    for sim in sorted(p for p in SIM.iterdir() if p.is_dir()):
        stepscope.ingest_run(sim, db=path, run=sim.name)
    return path


def cached_db() -> Path:
    """The database of the current tree, built here unless the cache holds it. The lock
    (an OS file lock, released when its holder dies) makes one process build while the
    others wait; a build that was killed leaves no COMPLETE marker and is redone."""
    from filelock import FileLock

    root = cache_root()
    folder = root / cache_key()
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(folder / "build.lock", timeout=LOCK_TIMEOUT_S):
        if not (folder / COMPLETE).exists():
            partial = folder / f"building-{os.getpid()}.duckdb"
            partial.unlink(missing_ok=True)
            build(partial)
            os.replace(partial, folder / DB_NAME)
            (folder / COMPLETE).touch()
            _prune(root)
    os.utime(folder)  # recently used: kept by the next prune
    return folder / DB_NAME


def _prune(root: Path) -> None:
    """Keep the KEEP newest cached databases."""
    folders = sorted((p for p in root.iterdir() if p.is_dir()),
                     key=lambda p: p.stat().st_mtime, reverse=True)
    for old in folders[KEEP:]:
        shutil.rmtree(old, ignore_errors=True)


if __name__ == "__main__":
    print(cached_db())
    sys.exit(0)
