"""A failed ingest leaves no new database behind, and never removes one that existed
before or that another process created and filled meanwhile (issue 43;
ingest/db_file.py NewFile)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import duckdb
import pytest

import stepscope
from stepscope.ingest import NothingIngestedError
from stepscope.ingest import db as db_module
from stepscope.ingest.db import connect_write
from stepscope.ingest.db_file import NewFile


def _junk(tmp_path: Path) -> Path:
    """A trace input that fails: a FIFO (no trace file)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    return fifo


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_failed_ingest_leaves_no_new_file(tmp_path: Path) -> None:
    db = tmp_path / "new.duckdb"
    with pytest.raises(NothingIngestedError):
        stepscope.ingest_run([_junk(tmp_path)], db=db, run="r")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo"]  # no .wal, no .tmp


def test_a_failed_ingest_keeps_an_existing_empty_database(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    connect_write(db).close()  # schema only, made before the ingest
    before = _digest(db)
    with pytest.raises(NothingIngestedError):
        stepscope.ingest_run([_junk(tmp_path)], db=db, run="r")
    assert db.is_file() and _digest(db) == before


def _filled_by_another(db: Path, sql: str) -> None:
    con = connect_write(db)
    con.execute(sql)
    con.close()


@pytest.mark.parametrize("sql", [
    "CREATE TABLE mine (x INTEGER); INSERT INTO mine VALUES (1)",
    "INSERT INTO runs (run, ingested_at, status) VALUES ('theirs', now(), 'complete')",
], ids=["a user's table", "a run"])
def test_a_file_another_process_filled_meanwhile_is_kept(tmp_path: Path, sql: str) -> None:
    """Nothing at the path when this ingest looked, then another process created and
    filled the database before this one took its lock: it is kept."""
    db = tmp_path / "race.duckdb"
    new = NewFile.before_connecting(db)
    assert new is not None
    _filled_by_another(db, sql)
    con = connect_write(db)
    assert not new.remove_unused(con)
    con.close()
    assert db.is_file()


def test_an_existing_file_is_never_a_new_one(tmp_path: Path) -> None:
    db = tmp_path / "x.duckdb"
    db.write_bytes(b"")
    assert NewFile.before_connecting(db) is None
    (tmp_path / "link.duckdb").symlink_to(tmp_path / "nowhere")
    assert NewFile.before_connecting(tmp_path / "link.duckdb") is None


def test_a_writer_reopens_a_name_removed_while_it_waited(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The name was removed (a failed ingest's unused file) between this writer's open
    and its lock: it opens the name again and writes a file that exists."""
    db = tmp_path / "w.duckdb"
    opened: list[int] = []
    real_open = db_module._open

    def open_then_removed(path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
        con = real_open(path, read_only)
        opened.append(1)
        if len(opened) == 1:
            path.unlink()
        return con

    monkeypatch.setattr(db_module, "_open", open_then_removed)
    con = connect_write(db)
    con.close()
    assert len(opened) == 2 and db.is_file()
