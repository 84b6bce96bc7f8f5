"""The calibrated plan is the same, to the last bit, whatever order DuckDB holds a run's
rows in: a re-ingest (parallel workers finish in any order) must not change a digit of
`stepscope plan --from`. Floating-point sums depend on their order, so the calibration
SQL (analyzers/sql/planner/) sums doubles in a fixed order; this test stores the same run
twice, once with the tables the calibration reads rewritten in reverse row order, and
compares the two plans byte for byte."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest
from conftest import SIM

from stepscope.cli import main

# Tables the calibration aggregates over; each is rewritten in reverse physical order.
SHUFFLED = ("gpu_ops", "cpu_ops", "collectives", "collective_waits", "collective_exposure")


def _reverse_rows(db: Path) -> None:
    """Rewrite each table of SHUFFLED with its rows in the opposite order."""
    con = duckdb.connect(str(db))
    try:
        for table in SHUFFLED:
            con.execute(f"CREATE TEMP TABLE t AS SELECT * FROM {table}")
            con.execute(f"DELETE FROM {table}")
            con.execute(
                f"INSERT INTO {table} SELECT * EXCLUDE (rn) FROM "
                "(SELECT *, row_number() OVER () AS rn FROM t) ORDER BY rn DESC")
            con.execute("DROP TABLE t")
    finally:
        con.close()


def _plan(db: Path, out: Path) -> bytes:
    assert main(["plan", "--from", "plan_mb4", "--db", str(db), "--format", "json",
                 "--out", str(out)]) == 0
    return out.read_bytes()


def test_plan_from_does_not_depend_on_row_order(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "plan_mb4"
    shutil.copytree(SIM / "plan_mb4", folder)
    db = tmp_path / "a.duckdb"
    assert main(["ingest", str(folder), "--db", str(db)]) == 0
    first = _plan(db, tmp_path / "a.json")
    _reverse_rows(db)
    assert _plan(db, tmp_path / "b.json") == first
