"""The paths that name tables without SQL text (ingest.db.insert_by_name, run_summary's
attributed columns, an empty history), on small databases built in code."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from conftest import SAMPLES

from stepscope.analyzers._sql import sql
from stepscope.analyzers.nightly.history import read_history
from stepscope.analyzers.summary import (
    ATTRIBUTED,
    AttributedRow,
    IngestedRow,
    RunSummary,
    run_summary,
    summary_records,
    summary_rows,
)
from stepscope.dashboard.render.summary import summary_markdown, summary_text
from stepscope.ingest import connect_read_only, ingest
from stepscope.ingest.db import insert_by_name


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("CREATE TABLE t (run VARCHAR, rank INTEGER, x DOUBLE, y VARCHAR)")
    return con


def test_insert_by_name_matches_like_the_sql_statement(con: duckdb.DuckDBPyConnection) -> None:
    """Names match case-insensitively, in any order; constants win over columns; a
    column neither given nor staged is NULL; values are cast to the table's types."""
    rows = pa.table({"Y": ["a", "b"], "x": [1, 2], "run": ["ignored", "ignored"]})
    insert_by_name(con, "t", con.from_arrow(rows), {"run": "r", "RANK": 3})
    insert_by_name(con, "t", con.from_arrow(pa.table({"x": [0.5]})))
    assert con.execute("FROM t ORDER BY x").fetchall() == [
        (None, None, 0.5, None), ("r", 3, 1.0, "a"), ("r", 3, 2.0, "b")]


def test_insert_by_name_refuses_a_column_the_table_lacks(
        con: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(duckdb.BinderException, match=r"table t has no column\(s\) \['z'\]"):
        insert_by_name(con, "t", con.from_arrow(pa.table({"x": [1.0], "z": [1]})))
    assert con.execute("SELECT count(*) FROM t").fetchall() == [(0,)]


def test_summary_and_history_of_a_database_the_analyzers_never_saw(tmp_path: Path) -> None:
    """`ingest.ingest` alone leaves the derived tables and the history empty: the summary
    has the same columns with the attributed ones NULL, and the history is empty, on a
    read-only connection."""
    db = tmp_path / "raw.duckdb"
    ingest([SAMPLES / "ddp"], db=db, run="raw")
    con = connect_read_only(db)
    try:
        frame = run_summary(con)
        records = summary_records(con, ["raw"])
        history = read_history(con, "nightly-job")
    finally:
        con.close()
    assert frame.columns == [f for f in RunSummary.__dataclass_fields__]
    row = frame.row(0, named=True)
    assert row["run"] == "raw" and row["n_ranks"] == 4
    assert [row[c] for c in ("attributed_step_ms", "compute_share", "top_loss",
                             "top_loss_share")] == [None] * 4
    assert records == summary_rows(frame)  # the CLI's rows, read without polars
    assert history.height == 0
    assert {"mfu_change_points", "step_time_change_ms", "in_db"} <= set(history.columns)
    with duckdb.connect(str(db), read_only=True) as raw:
        assert raw.execute("SELECT count(*) FROM step_attribution").fetchall() == [(0,)]


def test_summary_of_a_run_that_loses_nothing_on_unknown_hosts(tmp_path: Path) -> None:
    """Every loss zero: the largest loss is none (not an arbitrary zero category); no
    trace naming its host: hosts unknown, '?' as the report's '? host(s)', not 0."""
    db = tmp_path / "zero.duckdb"
    ingest([SAMPLES / "ddp"], db=db, run="zero")
    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE ranks SET host = NULL")
        con.execute("""INSERT INTO step_attribution (run, rank, step, has_successor, step_ns,
                           compute_ns, recompute_ns, exposed_comm_ns, straggler_wait_ns,
                           bubble_ns, memory_ns, idle_ns)
                       SELECT 'zero', r, 1, true, 1000000, 1000000, 0, 0, 0, 0, 0, 0
                       FROM range(4) t(r)""")
        (row,) = summary_records(con, ["zero"])
    assert (row.hosts, row.attributed_step_ms, row.compute_share) == (None, 1.0, 1.0)
    assert (row.top_loss, row.top_loss_share) == (None, None)
    header, _, line = summary_text([row]).splitlines()
    cells = dict(zip(header.split(), line.split(), strict=False))
    assert cells["hosts"] == "?"
    assert line.endswith("  100%     none")
    assert "| zero | complete | 4 | 4 | ? |" in summary_markdown([row])


def test_summary_columns_have_one_source(tmp_path: Path) -> None:
    """RunSummary's fields are the summary's columns: summary/runs.sql returns those
    not marked attributed, summary/attributed.sql `run` and the ATTRIBUTED ones."""
    db = tmp_path / "cols.duckdb"
    ingest([SAMPLES / "ddp"], db=db, run="cols")
    names = [f.name for f in dataclasses.fields(RunSummary)]
    with duckdb.connect(str(db), read_only=True) as con:
        runs = con.execute(sql("summary/runs.sql"), {"runs": None}).description or []
        attributed = con.execute(sql("summary/attributed.sql"), {"runs": None}).description
    assert [d[0] for d in runs] == [n for n in names if n not in ATTRIBUTED]
    assert [d[0] for d in attributed or []] == ["run", *ATTRIBUTED]
    # the queries' typed rows name the same columns, with RunSummary's types
    assert list(IngestedRow.__annotations__) == [d[0] for d in runs]
    assert list(AttributedRow.__annotations__) == [d[0] for d in attributed or []]
    types = typing.get_type_hints(RunSummary)
    for row in (IngestedRow, AttributedRow):
        assert all(types[k] == v for k, v in typing.get_type_hints(row).items()), row
    assert ATTRIBUTED == ("attributed_step_ms", "compute_share", "top_loss", "top_loss_share")
