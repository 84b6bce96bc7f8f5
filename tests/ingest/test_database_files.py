"""What `--db` may point at (docs/schema.md, "Versions and migrations"): stepscope writes
only the tables it owns (stepscope_tables), refuses a file that is not a stepscope
database or is one of a newer version before writing anything, says "not a DuckDB file"
for anything else, and never downloads a DuckDB extension."""

from __future__ import annotations

import ast
import hashlib
import random
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest
from conftest import REPO

from stepscope.cli import main
from stepscope.dashboard.app import data
from stepscope.dashboard.app.uploads import ingest_staged
from stepscope.ingest import UsageError
from stepscope.ingest.db import connect, connect_read_only, connect_write
from stepscope.ingest.merge import delete_run


def _rows(db: Path, query: str) -> list[tuple[object, ...]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(query).fetchall()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def stepscope_db(make_run: Callable[..., Path], tmp_path: Path) -> Path:
    """A stepscope database holding run 'r' and the user's own table experiments(run,
    value), with a row for run 'r'."""
    db = tmp_path / "mine.duckdb"
    assert main(["ingest", str(make_run()), "--db", str(db), "--run", "r", "--quiet"]) == 0
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE experiments (run VARCHAR, value INTEGER)")
        con.execute("INSERT INTO experiments VALUES ('r', 1), ('other', 2)")
    return db


MINE = [("other", 2), ("r", 1)]
EXPERIMENTS = "SELECT run, value FROM experiments ORDER BY run"


@pytest.mark.slow
def test_reingest_merge_and_delete_leave_the_users_table(
        stepscope_db: Path, make_run: Callable[..., Path]) -> None:
    db = stepscope_db
    assert main(["ingest", str(make_run()), "--db", str(db), "--run", "r", "--quiet"]) == 0
    assert _rows(db, EXPERIMENTS) == MINE
    ingest_staged([make_run()], db, "r")             # the dashboard's upload: a merge
    assert _rows(db, EXPERIMENTS) == MINE
    delete_run(db, "r")                              # the dashboard's Runs page
    assert _rows(db, EXPERIMENTS) == MINE
    assert _rows(db, "SELECT count(*) FROM runs") == [(0,)]
    assert _rows(db, "SELECT count(*) FROM ranks") == [(0,)]


@pytest.mark.slow
def test_nightly_keep_prunes_only_owned_tables(
        stepscope_db: Path, make_run: Callable[..., Path], tmp_path: Path) -> None:
    db = stepscope_db
    for night in ("j-1", "j-2"):
        assert main(["nightly", str(make_run()), "--job", "j", "--db", str(db), "--run", night,
                     "--out-dir", str(tmp_path / night), "--keep", "1"]) == 0
    assert _rows(db, "SELECT run FROM runs ORDER BY run") == [("j-2",), ("r",)]
    assert _rows(db, "SELECT count(*) FROM ranks WHERE run = 'j-1'") == [(0,)]
    assert _rows(db, "SELECT run FROM history ORDER BY run") == [("j-1",), ("j-2",)]
    assert _rows(db, EXPERIMENTS) == MINE


def _foreign(path: Path) -> Path:
    """A DuckDB file of someone else's, with its own `runs` table."""
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE runs (id INTEGER, note VARCHAR)")
        con.execute("INSERT INTO runs VALUES (1, 'mine')")
    return path


def _newer(path: Path, make_run: Callable[..., Path]) -> Path:
    assert main(["ingest", str(make_run()), "--db", str(path), "--run", "r", "--quiet"]) == 0
    with duckdb.connect(str(path)) as con:
        con.execute("UPDATE schema_info SET value = '99' WHERE key = 'schema_version'")
    return path


def _sqlite(path: Path) -> Path:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE runs (run TEXT)")
    con.commit()
    con.close()
    return path


def _random_bytes(path: Path) -> Path:
    path.write_bytes(random.Random(7).randbytes(50_000))
    return path


def _truncated(path: Path, make_run: Callable[..., Path]) -> Path:
    whole = path.with_name("whole.duckdb")
    assert main(["ingest", str(make_run()), "--db", str(whole), "--run", "r", "--quiet"]) == 0
    data = whole.read_bytes()
    path.write_bytes(data[:len(data) // 2])
    return path


def _empty(path: Path) -> Path:
    path.write_bytes(b"")
    return path


# kind -> (how to make it, the start of the one line after "error: <path>: ")
BAD_FILES: dict[str, tuple[Callable[[Path, Callable[..., Path]], Path], str]] = {
    "foreign DuckDB": (lambda p, _: _foreign(p),
                       "not a stepscope database (a DuckDB file with other tables: runs)"),
    "newer version": (_newer, "written by a newer stepscope (schema version 99;"),
    "SQLite": (lambda p, _: _sqlite(p), "not a DuckDB file (a SQLite database)"),
    "random bytes": (lambda p, _: _random_bytes(p), "not a DuckDB file (unknown contents)"),
    "truncated DuckDB": (_truncated, "not a readable DuckDB file (truncated:"),
    "empty file": (lambda p, _: _empty(p), "not a DuckDB file (an empty file)"),
}
COMMANDS = {"ingest": ["ingest", "{run}", "--quiet"], "summary": ["summary"],
            "report": ["report", "r"]}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_a_file_stepscope_must_not_touch_is_refused_in_one_line(
        kind: str, command: str, make_run: Callable[..., Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    make, says = BAD_FILES[kind]
    db = make(tmp_path / "x.db", make_run)
    capsys.readouterr()
    before = _digest(db)
    argv = [a.replace("{run}", str(make_run())) for a in COMMANDS[command]]
    assert main([*argv, "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {db}: {says}") and err.count("\n") == 1, err
    assert _digest(db) == before                      # nothing was written


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_the_dashboard_data_layer_says_so(kind: str, make_run: Callable[..., Path],
                                          tmp_path: Path) -> None:
    make, says = BAD_FILES[kind]
    db = make(tmp_path / "x.db", make_run)
    data.forget_tokens(db)
    with pytest.raises(UsageError) as info:
        data.run_tokens(db)
    assert str(info.value).startswith(f"{db}: {says}") and "\n" not in str(info.value)


def test_a_failed_ingest_into_a_foreign_file_creates_nothing(
        make_run: Callable[..., Path], tmp_path: Path) -> None:
    db = _foreign(tmp_path / "theirs.duckdb")
    assert main(["ingest", str(make_run()), "--db", str(db), "--quiet"]) == 2
    assert _rows(db, "SELECT table_name FROM duckdb_tables()") == [("runs",)]
    assert _rows(db, "SELECT * FROM runs") == [(1, "mine")]


def test_every_connection_has_extension_downloads_and_the_progress_bar_off(
        stepscope_db: Path, tmp_path: Path) -> None:
    setting = ("SELECT current_setting('autoinstall_known_extensions'), "
               "current_setting('autoload_known_extensions'), "
               "current_setting('enable_progress_bar')")
    for open_ in (connect, lambda: connect_read_only(stepscope_db),
                  lambda: connect_write(tmp_path / "w.duckdb")):
        con = open_()
        try:
            assert con.execute(setting).fetchall() == [(False, False, False)]
        finally:
            con.close()


def test_duckdb_itself_refuses_a_sqlite_file_without_the_network(tmp_path: Path) -> None:
    """Below the header check: with auto-install off DuckDB does not fetch sqlite_scanner
    (it would name the download URL), it says the extension is not installed."""
    with pytest.raises(duckdb.Error) as info:
        connect(_sqlite(tmp_path / "s.db"), read_only=True)
    assert "sqlite" in str(info.value).lower() and "http" not in str(info.value).lower()


def test_only_ingest_db_calls_duckdb_connect() -> None:
    """One connect function: every other module opens DuckDB through ingest.db.connect."""
    calls = [f"{path.relative_to(REPO)}:{node.lineno}"
             for layer in ("ingest", "analyzers", "dashboard", "stepscope")
             for path in (REPO / layer).rglob("*.py")
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Attribute) and node.attr == "connect"
             and isinstance(node.value, ast.Name) and node.value.id == "duckdb"]
    assert len(calls) == 1 and calls[0].startswith("ingest/db.py:"), calls


def test_a_copy_of_a_stepscope_file_under_another_name_still_opens(
        stepscope_db: Path, tmp_path: Path) -> None:
    """The compatible views name the file's catalog, which follows the file name."""
    copy = tmp_path / 'we"ird name.duckdb'
    shutil.copyfile(stepscope_db, copy)
    with duckdb.connect(str(copy)) as con:
        con.execute("DROP TABLE stepscope_tables")
        con.execute("UPDATE schema_info SET value = '1'")
    con = connect_read_only(copy)
    try:
        assert con.execute("SELECT count(*) FROM runs").fetchall() == [(1,)]
        assert con.execute("SELECT count(*) FROM stepscope_tables").fetchall() == [(0,)]
    finally:
        con.close()
