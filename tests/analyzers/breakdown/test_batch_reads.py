"""A batch of ranks reads its own ranks' rows, not the run's (issue 44).

The idle split runs per batch of ranks and reads the blocking async copies of its ranks
(`blocking_copies`, analyzers/sql/waits/macros.sql, shared with the critical path). A
caller's `WHERE rank BETWEEN` stayed above the macro's name-list join and EXISTS, so the
scans of `cpu_ops` and `gpu_ops` handed up every rank's rows: each batch of a 2,048-rank
run read blocks of the whole run. The macro takes the ranks and filters them in its scans
(where DuckDB's zone maps skip the other ranks' row groups). Measured with DuckDB's
profiler: the rows each table scan returns for one rank of a 12-rank run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest
from conftest import kineto_trace, write_trace

from stepscope.analyzers._sql import run_script
from stepscope.ingest import ingest

WORLD = 12


@pytest.fixture(scope="module")
def twelve_ranks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("twelve")
    for rank in range(WORLD):
        trace = kineto_trace(rank=rank, world_size=WORLD)
        trace["traceEvents"] += _blocking_copy(rank)
        write_trace(root / "job" / f"rank{rank}.json.gz", trace)
    db = root / "t.duckdb"
    assert not ingest([root / "job"], db=db, run="t", jobs=1).failures
    return db


def _blocking_copy(rank: int) -> list[dict[str, Any]]:
    """A cudaMemcpyAsync that returns after its own device-to-host copy ended."""
    corr = 90_000 + rank
    return [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 100,
         "tid": 100, "ts": 50_000.0, "dur": 40.0, "args": {"correlation": corr}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pageable)",
         "pid": 0, "tid": 7, "ts": 50_010.0, "dur": 20.0,
         "args": {"device": 0, "stream": 7, "correlation": corr}},
    ]


def _scanned_rows(con: duckdb.DuckDBPyConnection, query: str, out: Path) -> dict[str, int]:
    """The rows each base table's scans returned while running `query`, by table."""
    con.execute("PRAGMA enable_profiling = 'json'")
    con.execute(f"PRAGMA profiling_output = '{out}'")
    con.execute(query).fetchall()
    con.execute("PRAGMA disable_profiling")
    rows: dict[str, int] = {}

    def walk(node: dict[str, Any]) -> None:
        table = (node.get("extra_info") or {}).get("Table")
        if node.get("type") == "TABLE_SCAN" and table:
            name = str(table).rsplit(".", 1)[-1]
            rows[name] = rows.get(name, 0) + int(node["intermediate_rows"])
        for child in node.get("children", []):
            walk(child)

    for root in json.loads(out.read_text())["operator"]:
        walk(root)
    return rows


def test_blocking_copies_of_one_rank_scan_only_that_rank(twelve_ranks: Path,
                                                          tmp_path: Path) -> None:
    con = duckdb.connect(str(twelve_ranks), read_only=True)
    try:
        run_script(con, "waits/macros.sql", {})
        copies = con.execute("SELECT rank FROM blocking_copies('t', 3, 3)").fetchall()
        assert copies == [(3,)]  # the copy is found, for its rank only
        own = dict(con.execute(
            "SELECT 'cpu_ops', count(*) FROM cpu_ops WHERE rank = 3 UNION ALL "
            "SELECT 'gpu_ops', count(*) FROM gpu_ops WHERE rank = 3").fetchall())
        scanned = _scanned_rows(con, "SELECT * FROM blocking_copies('t', 3, 3)",
                                tmp_path / "profile.json")
    finally:
        con.close()
    assert set(scanned) == {"cpu_ops", "gpu_ops"}
    for table, n in scanned.items():
        assert 0 < n <= own[table], (table, n, own[table])  # the run holds 12x that
