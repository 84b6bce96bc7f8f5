"""Results do not depend on the order DuckDB holds a run's rows in: a re-ingest (parallel
workers finish in any order) must not change a digit of `stepscope plan --from` or of the
report. Floating-point sums depend on their order, so the calibration SQL
(analyzers/sql/planner/) sums doubles in a fixed order, and ties (ranks arriving at a
collective together) are broken by rank. Each test stores a run, rewrites the tables the
analyses read in reverse row order, and compares the outputs byte for byte."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest
from conftest import SIM

from stepscope.cli import main

# Tables the calibration aggregates over; each is rewritten in reverse physical order.
SHUFFLED = ("gpu_ops", "cpu_ops", "collectives", "collective_waits", "collective_exposure",
            "step_attribution")


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


def _report(db: Path, out: Path) -> bytes:
    assert main(["report", "moe_roofline", "--db", str(db), "--format", "json",
                 "--out", str(out)]) == 0
    return out.read_bytes()


def test_report_does_not_depend_on_row_order(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranks that arrive at a collective together (same duration) tie for "arrived
    last": the straggler record, the kernels' slowest rank and the critical path break
    such ties by rank, never by row order (moe_roofline has such ties)."""
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "moe_roofline"
    shutil.copytree(SIM / "moe_roofline", folder)
    db = tmp_path / "a.duckdb"
    assert main(["ingest", str(folder), "--db", str(db)]) == 0
    first = _report(db, tmp_path / "a.json")
    _reverse_rows(db)
    assert _report(db, tmp_path / "b.json") == first
