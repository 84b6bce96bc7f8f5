"""Byte-identical results: every simulated set, ingested into the session's sample
database, gives exactly the JSON report and the table rows recorded in
tests/snapshots/identity.json (tests/identity.py: the report's SHA-256, and per table the
row count and an order-free digest of every row's exact text). A speed or memory change
of the ingest or the attribution must leave both unchanged to the nanosecond and the last
bit of every float; a change meant to alter results regenerates the file with
`pytest tests/e2e/test_identity.py --update-snapshots` (review which sets and tables moved).

The recorded fingerprints were first taken from the pipeline before issue 25's changes
(`python tests/identity.py DB OUT` over a database that checkout built)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest
from conftest import REPO
from filelock import FileLock
from identity import fingerprint, report_text, simulated_sets

import stepscope
from stepscope.analyzers.breakdown.attribution import materialize, rank_batches

SNAPSHOT = REPO / "tests" / "snapshots" / "identity.json"


def _recorded() -> dict[str, dict[str, object]]:
    return json.loads(SNAPSHOT.read_text()) if SNAPSHOT.exists() else {}


def _record(name: str, got: dict[str, object]) -> None:
    with FileLock(str(SNAPSHOT) + ".lock"):
        prints = _recorded()
        prints[name] = got
        SNAPSHOT.write_text(json.dumps(prints, indent=1, sort_keys=True) + "\n")


@pytest.mark.parametrize("name", simulated_sets())
def test_identical_results(name: str, sample_db: Path, update_snapshots: bool,
                           tmp_path: Path) -> None:
    with stepscope.open(sample_db) as store:
        got = fingerprint(store.con, name)
        if update_snapshots:
            _record(name, got)
            return
        want = _recorded().get(name)
        assert want is not None, f"{name} has no fingerprint: run pytest --update-snapshots"
        moved = sorted(t for t, d in got["tables"].items()  # type: ignore[attr-defined]
                       if want["tables"].get(t) != d)  # type: ignore[attr-defined]
        if got["report_sha256"] != want["report_sha256"]:
            (tmp_path / f"{name}.json").write_text(report_text(store.con, name))
    assert not moved, f"{name}: rows changed in {', '.join(moved)}"
    assert got["report_sha256"] == want["report_sha256"], (
        f"{name}: the JSON report changed (now in {tmp_path / (name + '.json')})")


def test_every_set_recorded() -> None:
    """The snapshot covers exactly the simulated sets (a new set needs its fingerprint)."""
    assert sorted(_recorded()) == simulated_sets()


BATCHED = ("straggler", "pipeline_imbalance", "moe_ep", "recompute_reentrant", "tp_across_nodes")


@pytest.mark.parametrize("batch_ranks", [1, 3])
def test_batched_attribution_is_identical(batch_ranks: int, sample_db: Path,
                                          tmp_path: Path) -> None:
    """The per-rank attribution on batches of 1 or 3 ranks (analyzers/breakdown/attribution.py)
    gives the recorded rows and report of sets with stragglers, pipelines, expert
    all-to-alls, recompute and groups across nodes: nothing in a batch depends on another
    (the cross-rank part runs once over every rank's collectives)."""
    db = tmp_path / "copy.duckdb"
    shutil.copyfile(sample_db, db)
    recorded = _recorded()
    con = duckdb.connect(str(db))
    try:
        for name in BATCHED:
            assert len(rank_batches(con, name, batch_ranks, 10**12)) > 1, name
            con.execute("BEGIN TRANSACTION")
            materialize(con, name, batch_ranks=batch_ranks)
            con.execute("COMMIT")
            assert fingerprint(con, name) == recorded[name], name
    finally:
        con.close()
