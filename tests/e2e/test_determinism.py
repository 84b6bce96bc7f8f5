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

pytestmark = pytest.mark.slow  # ingests sets, writes reports twice

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


def _before_and_after_reversal(tmp_path: Path, name: str, *command: str) -> tuple[bytes, bytes]:
    """The JSON `stepscope COMMAND --db DB` writes for the sample set `name`, once as
    ingested and once after its tables are rewritten in reverse row order."""
    folder = tmp_path / name
    shutil.copytree(SIM / name, folder)
    db = tmp_path / "a.duckdb"
    assert main(["ingest", str(folder), "--db", str(db)]) == 0
    outputs = []
    for out in (tmp_path / "a.json", tmp_path / "b.json"):
        assert main([*command, "--db", str(db), "--format", "json", "--out", str(out)]) == 0
        outputs.append(out.read_bytes())
        _reverse_rows(db)
    return outputs[0], outputs[1]


def test_plan_from_does_not_depend_on_row_order(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    first, reversed_ = _before_and_after_reversal(tmp_path, "plan_mb4",
                                                  "plan", "--from", "plan_mb4")
    assert reversed_ == first


def test_report_does_not_depend_on_row_order(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranks that arrive at a collective together (same duration) tie for "arrived
    last": the straggler record, the kernels' slowest rank and the critical path break
    such ties by rank, never by row order (moe_roofline has such ties)."""
    monkeypatch.chdir(tmp_path)
    first, reversed_ = _before_and_after_reversal(tmp_path, "moe_roofline",
                                                  "report", "moe_roofline")
    assert reversed_ == first
