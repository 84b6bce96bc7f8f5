"""A trace may claim any rank number (issue 42 §4): one claiming rank 2,147,483,646 of a
world of 2**31 - 1 ingests, and the critical path and its what-ifs then sized numpy
arrays by the rank number (16 GiB for a table per rank, 208 GiB for ranks x steps) and
every report died with an internal MemoryError. They are sized by the ranks present."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SIM

import stepscope

RANK = 2**31 - 2
# the report runs in a process that may not map more than this: an array sized by the
# rank number fails at once instead of swapping (the report needs well under 1 GiB)
ADDRESS_SPACE = 6 << 30
RUN_CLI = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, ({0}, {0})); "
           "from stepscope.cli import main; sys.exit(main(sys.argv[1:]))")


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """host_bound's rank 0 (simulated) claiming to be rank 2**31 - 2 of 2**31 - 1."""
    folder = tmp_path_factory.mktemp("huge_rank")
    with gzip.open(SIM / "host_bound" / "rank0.json.gz", "rt") as f:
        doc = json.load(f)
    doc["distributedInfo"].update(rank=RANK, world_size=RANK + 1)
    (folder / "trace").mkdir()
    with gzip.open(folder / "trace" / "rank.json.gz", "wt") as f:
        json.dump(doc, f)
    path = folder / "huge.duckdb"
    stepscope.ingest_run(folder / "trace", db=path, run="huge")
    return path


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", RUN_CLI.format(ADDRESS_SPACE), *args],
                          capture_output=True, text=True, timeout=600, check=False)


def test_report_sizes_by_the_ranks_present(db: Path) -> None:
    """Before: "internal error: MemoryError: Unable to allocate 16.0 GiB" (exit 1)."""
    done = _cli("report", "huge", "--db", str(db), "--format", "json")
    assert done.returncode == 0, done.stderr[-500:]
    cp = json.loads(done.stdout)["critical_path"]
    assert [s["reference_rank"] for s in cp["steps"]] == [RANK] * len(cp["steps"])
    assert cp["steps"] and all(s["path_ms"] == pytest.approx(s["window_ms"], abs=1e-6)
                               for s in cp["steps"])


def test_whatif_on_the_huge_rank(db: Path) -> None:
    done = _cli("whatif", "huge", "--db", str(db), "--rank", str(RANK), "--speedup", "2")
    assert done.returncode == 0, done.stderr[-500:]
    assert "predicted" in done.stdout
