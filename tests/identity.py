"""Fingerprints of what an ingest produces, for tests/e2e/test_identity.py: the SHA-256 of a
run's JSON report and, per table of the run, its row count and an order-free digest of
its rows (MD5 of the sorted MD5s of each row's text, DuckDB's shortest exact text of
every value, so a float that moves by one bit changes it).

Columns that differ between two ingests of the same files are left out: when and from
which absolute path (ingested_at, sources, source_file, failed_files) and the version.

Also a script: `python tests/identity.py DB OUT.json` writes the fingerprints of every
simulated set in DB (each ingested under its folder's name), e.g. from a database built
by another stepscope checkout (PYTHONPATH=that/checkout) to compare pipelines.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

REPO = Path(__file__).resolve().parent.parent
SIM = REPO / "sample_traces" / "simulated"
VOLATILE = frozenset({"run", "ingested_at", "sources", "source_file", "failed_files",
                      "stepscope_version"})

Fingerprint = dict[str, object]


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def table_digests(con: duckdb.DuckDBPyConnection, run: str) -> dict[str, str]:
    """Per table of the run (stepscope_tables with per_run): 'ROWS DIGEST', or '0'."""
    tables = [t for (t,) in con.execute(
        "SELECT table_name FROM stepscope_tables WHERE per_run ORDER BY table_name").fetchall()]
    out: dict[str, str] = {}
    for table in tables:
        cols = [c for (c,) in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
            "AND table_schema = 'main' ORDER BY ordinal_position", [table]).fetchall()]
        keep = ", ".join(_q(c) for c in cols if c not in VOLATILE)
        (n, digest), = con.execute(
            f"SELECT count(*), md5(coalesce(string_agg(h, '' ORDER BY h), '')) FROM "
            f"(SELECT md5(CAST(s AS VARCHAR)) AS h FROM "
            f"(SELECT {keep} FROM {_q(table)} WHERE run = ?) s)", [run]).fetchall()
        out[table] = f"{n} {digest}" if n else "0"
    return out


def report_text(con: duckdb.DuckDBPyConnection, run: str) -> str:
    """The run's JSON report as `stepscope report --json` builds it, with the set's
    model.json as spec when it has one."""
    from stepscope.analyzers.flops.model_spec import load_spec
    from stepscope.analyzers.report import build_report
    from stepscope.analyzers.results import to_json

    model = SIM / run / "model.json"
    spec = load_spec(model) if model.exists() else None
    return to_json(build_report(con, run, spec))


def fingerprint(con: duckdb.DuckDBPyConnection, run: str) -> Fingerprint:
    text = report_text(con, run)
    return {"report_sha256": hashlib.sha256(text.encode()).hexdigest(),
            "tables": table_digests(con, run)}


def simulated_sets() -> list[str]:
    return sorted(p.name for p in SIM.iterdir() if p.is_dir())


def main(argv: list[str]) -> int:
    import stepscope

    db, out = argv
    with stepscope.open(db) as store:
        prints = {name: fingerprint(store.con, name) for name in simulated_sets()}
    Path(out).write_text(json.dumps(prints, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


def assert_close(got: Any, want: Any, where: str = "$") -> None:
    """Equal structure and strings; numbers to 1e-9 relative."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), where
        for key in want:
            assert_close(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_close(g, w, f"{where}[{i}]")
    elif isinstance(want, float) or (isinstance(got, float) and isinstance(want, int)):
        assert got == pytest.approx(want, rel=1e-9, abs=1e-12), where
    else:
        assert got == want, where
