"""Builds the suite's shared sample database: every bundled run ingested once, each
simulated set under its own name, each real CPU sample as `cpu-<name>`.

Run by tests/conftest.py as a background process when the session starts, so tests that
do not need the database run while it is built:

    python tests/sample_db.py FOLDER     # writes FOLDER/samples.duckdb, then FOLDER/complete

On failure it writes FOLDER/failed and exits 1; the traceback is on stderr. It holds
FOLDER/build.lock while it works (FOLDER/building says it has started).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_traces" / "cpu"
SIM = REPO / "sample_traces" / "simulated"
DB_NAME = "samples.duckdb"
COMPLETE, FAILED, BUILDING = "complete", "failed", "building"
BUILD_LOCK = "build.lock"


def build(folder: Path) -> Path:
    import stepscope

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / DB_NAME
    for sample in sorted(p for p in SAMPLES.iterdir() if p.is_dir()):
        stepscope.ingest_run(sample, db=path, run=f"cpu-{sample.name}")
    for sim in sorted(p for p in SIM.iterdir() if p.is_dir()):
        stepscope.ingest_run(sim, db=path, run=sim.name)
    (folder / COMPLETE).touch()
    return path


def main(argv: list[str]) -> int:
    """Build under BUILD_LOCK: the lock dies with this process, so the tests waiting for
    the database see a builder that was killed (no FAILED marker) as a free lock."""
    from filelock import FileLock

    folder = Path(argv[0])
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(folder / BUILD_LOCK):
        (folder / BUILDING).touch()
        try:
            build(folder)
        except BaseException:
            (folder / FAILED).touch()
            raise
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
