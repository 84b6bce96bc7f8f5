"""The suite's shared databases (tests only read them):

- the sample database: every bundled run ingested once, each simulated set under its own
  name, each real CPU sample as `cpu-<name>`;
- the real database: every Kineto trace of tests/data/traces (one rank each) ingested
  once, the i-th of `real_files()` as run `t<i>` (`real_run`);
- the plan database: the planner's pairs that are not bundled (PLAN_SETS, too big to
  commit) simulated into `sets/` beside it with their ground truth, each ingested under
  its own name.

Each is cached in `.pytest_cache/stepscope-samples/<kind>-<key>/` under a key of
everything its content depends on: the bytes of its inputs (sample_traces/, or the real
traces and their paths), the sources of the packages that ingest and attribute (ingest/,
analyzers/, stepscope/, this file) and the versions of stepscope and DuckDB. An unchanged
tree reuses the file; any change builds a new one. The first pytest(-xdist) process to
need one builds it while holding a file lock, the others wait on the lock and then read
the finished file. `STEPSCOPE_TEST_CACHE` moves the cache.

    python tests/sample_db.py [samples|real|plan]   # build (or find) it, print its path
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_traces" / "cpu"
SIM = REPO / "sample_traces" / "simulated"
REAL_TRACES = REPO / "tests" / "data" / "traces"
DB_NAME = "samples.duckdb"
COMPLETE = "complete"
LOCK_TIMEOUT_S = 1200
KEEP = 3  # cached databases kept per kind (the newest): one per recently tested tree
# what the database's content depends on, besides the versions
KEYED = ("sample_traces", "ingest", "analyzers", "stepscope")
# sample_traces/simulate_gpu.py PLAN_PAIRS "dp2x" and "tp_to_pp"
# (tests/analyzers/plan/test_plan_from.py)
PLAN_SETS = ("plan_dp_a", "plan_dp_b", "plan_tp8", "plan_tp4_pp2")


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


def real_files() -> list[Path]:
    """The real Kineto traces of tests/data/traces, in a stable order (none without it)."""
    if not REAL_TRACES.is_dir():
        return []
    return sorted(REAL_TRACES.rglob("*.json.gz"))


def real_run(path: Path) -> str:
    """The run name of one real trace in the real database."""
    return f"t{real_files().index(path)}"


def cache_key(kind: str = "samples") -> str:
    import duckdb

    import stepscope

    h = hashlib.sha256(f"{kind}\0{stepscope.__version__}\0{duckdb.__version__}\0".encode())
    sources = [Path(__file__), *(p for top in KEYED for p in _files(REPO / top))]
    inputs = [(str(p.relative_to(REPO)), p) for p in sources]
    if kind == "real":
        inputs += [(str(p.relative_to(REAL_TRACES)), p) for p in real_files()]
    for name, path in inputs:
        h.update(name.encode() + b"\0")
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


def build_real(path: Path) -> Path:
    """Ingest every real trace, each as its own run `real_run(file)`, at `path`."""
    import stepscope

    for trace in real_files():
        stepscope.ingest_run(trace, db=path, run=real_run(trace))
    return path


def build_plan(path: Path) -> Path:
    """Simulate PLAN_SETS into `sets/` beside `path` (the simulator run as a script, as
    `python sample_traces/simulate_gpu.py --sets ...` does) and ingest each there."""
    import stepscope

    sets = path.parent / "sets"
    shutil.rmtree(sets, ignore_errors=True)
    subprocess.run([sys.executable, str(SIM.parent / "simulate_gpu.py"), "--out", str(sets),
                    "--sets", ",".join(PLAN_SETS)], check=True, capture_output=True)
    for name in PLAN_SETS:
        stepscope.ingest_run(sets / name, db=path, run=name)
    return path


BUILDERS = {"samples": build, "real": build_real, "plan": build_plan}


def cached_db(kind: str = "samples") -> Path:
    """The database of `kind` (samples, real) of the current tree, built here unless the
    cache holds it. The lock (an OS file lock, released when its holder dies) makes one
    process build while the others wait; a build that was killed leaves no COMPLETE
    marker and is redone."""
    from filelock import FileLock

    root = cache_root()
    folder = root / f"{kind}-{cache_key(kind)}"
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(folder / "build.lock", timeout=LOCK_TIMEOUT_S):
        if not (folder / COMPLETE).exists():
            partial = folder / f"building-{os.getpid()}.duckdb"
            partial.unlink(missing_ok=True)
            BUILDERS[kind](partial)
            os.replace(partial, folder / DB_NAME)
            (folder / COMPLETE).touch()
            _prune(root, kind)
    os.utime(folder)  # recently used: kept by the next prune
    return folder / DB_NAME


def _prune(root: Path, kind: str) -> None:
    """Keep the KEEP newest cached databases of `kind`; drop the folders of no kind (an
    older layout named them by the key alone)."""
    folders = sorted((p for p in root.iterdir() if p.is_dir()),
                     key=lambda p: p.stat().st_mtime, reverse=True)
    ours = [p for p in folders if p.name.startswith(f"{kind}-")]
    stray = [p for p in folders if not p.name.startswith(tuple(f"{k}-" for k in BUILDERS))]
    for old in ours[KEEP:] + stray:
        shutil.rmtree(old, ignore_errors=True)


if __name__ == "__main__":
    print(cached_db(sys.argv[1] if len(sys.argv) > 1 else "samples"))
    sys.exit(0)
