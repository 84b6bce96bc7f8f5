"""The report's DuckDB memory bound (analyzers/_memory.py, docs/scale.md "Memory"): the
report runs at REPORT_MEMORY_LIMIT, the critical-path graph build at GRAPH_MEMORY_LIMIT,
the connection's own limit is back afterwards, and a bound too small for a query makes
that part run again at the connection's limit with the same report, to the byte."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from identity import report_text

import stepscope
from stepscope.analyzers import _memory, report
from stepscope.analyzers.critical_path import analysis as critical_path
from stepscope.analyzers.critical_path import graph as cp_graph

RUN = "pipeline_imbalance"


def _limit(con: duckdb.DuckDBPyConnection) -> str:
    (value,), = con.execute("SELECT current_setting('memory_limit')").fetchall()
    return str(value)


def _printed(limit: int) -> str:
    """How DuckDB prints a memory limit of `limit` bytes (on a scratch connection)."""
    con = duckdb.connect()
    con.execute("SET memory_limit = $limit", {"limit": f"{limit}B"})
    return _limit(con)


def test_the_report_runs_within_its_bounds_and_restores_the_limit(
        sample_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STEPSCOPE_MEMORY_LIMIT", raising=False)
    seen: dict[str, str] = {}
    real_section, real_build = critical_path.critical_path_section, cp_graph.run_script

    def section(ctx, *args):  # type: ignore[no-untyped-def]
        seen["report"] = _limit(ctx.con)
        return real_section(ctx, *args)

    def build(con, name, params):  # type: ignore[no-untyped-def]
        if name == "critical_path/graph.sql":
            seen["graph"] = _limit(con)
        return real_build(con, name, params)

    monkeypatch.setattr(report, "critical_path_section", section)
    monkeypatch.setattr(cp_graph, "run_script", build)
    with stepscope.open(sample_db) as store:
        before = _limit(store.con)
        report_text(store.con, RUN)
        after = _limit(store.con)
        tables = {t for (t,) in store.con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE temporary").fetchall()}
    assert after == before
    assert seen["report"] == _printed(_memory.REPORT_MEMORY_LIMIT) != before
    assert seen["graph"] == _printed(_memory.GRAPH_MEMORY_LIMIT)
    assert not {t for t in tables if t.startswith("cp_")}  # the graph's tables are dropped


def test_a_bound_too_small_gives_the_same_report(
        sample_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At a 4 MiB bound DuckDB runs out of memory in the graph build and the report's
    sections: each runs again at the connection's limit, and the report is the one built
    without bounds, to the byte."""
    failures: list[str] = []
    real_fit = _memory.Bound.fit

    def fit(self, work):  # type: ignore[no-untyped-def]
        def noted():  # type: ignore[no-untyped-def]
            try:
                return work()
            except duckdb.OutOfMemoryException:
                failures.append(self.limit)
                raise
        return real_fit(self, noted)

    monkeypatch.delenv("STEPSCOPE_MEMORY_LIMIT", raising=False)
    with monkeypatch.context() as tiny:
        tiny.setattr(_memory.Bound, "fit", fit)
        tiny.setattr(report, "REPORT_MEMORY_LIMIT", 4 << 20)
        tiny.setattr(cp_graph, "GRAPH_MEMORY_LIMIT", 4 << 20)
        with stepscope.open(sample_db) as store:  # a fresh database instance
            got = report_text(store.con, RUN)
    monkeypatch.setenv("STEPSCOPE_MEMORY_LIMIT", "4GB")  # no bound at all
    with stepscope.open(sample_db) as store:
        want = report_text(store.con, RUN)
    assert failures, "a 4 MiB bound should not fit the graph build"
    assert got == want


def _connection_at(limit: str | None, monkeypatch: pytest.MonkeyPatch
                   ) -> duckdb.DuckDBPyConnection:
    """A fresh connection at DuckDB's memory limit `limit` (None: its default), with no
    $STEPSCOPE_MEMORY_LIMIT set."""
    monkeypatch.delenv("STEPSCOPE_MEMORY_LIMIT", raising=False)
    con = duckdb.connect()
    if limit is not None:
        con.execute("SET memory_limit = $limit", {"limit": limit})
    return con


@pytest.mark.parametrize("limit", [None, "1GB", "777.7 MiB"])
def test_the_limit_before_comes_back_unchanged_however_often(
        limit: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """DuckDB prints a limit with one decimal, cut: set back as printed it would shrink a
    little on every report of a long-lived connection (the dashboard's)."""
    con = _connection_at(limit, monkeypatch)
    before = _limit(con)
    for _ in range(5):
        with _memory.Bound(con, 64 << 20):
            assert _limit(con) == _printed(64 << 20)
    assert _limit(con) == before


@pytest.mark.parametrize("limit", [None, "1GB", "777.7 MiB", "64MiB"])
def test_releasing_memory_leaves_the_limit_as_it_was(
        limit: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """release() sets the limit again to flush DuckDB's allocator: after any number of
    batches the limit prints as before (it never creeps down as a printed value set back
    would), and a user's $STEPSCOPE_MEMORY_LIMIT is never touched."""
    con = _connection_at(limit, monkeypatch)
    before = _limit(con)
    for _ in range(20):
        _memory.release(con)
    assert _limit(con) == before
    spy = _Statements(con)
    _memory.release(spy)  # type: ignore[arg-type]
    assert spy.sets == 1
    monkeypatch.setenv("STEPSCOPE_MEMORY_LIMIT", "2GB")
    _memory.release(spy)  # type: ignore[arg-type]
    assert spy.sets == 1  # the user's limit: not set again


class _Statements:
    """A connection that counts the SET statements run on it."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con, self.sets = con, 0

    def execute(self, query: str, *args: object) -> duckdb.DuckDBPyConnection:
        self.sets += "SET memory_limit" in query
        return self.con.execute(query, *args)
