"""Hardening of the CLI before audit round 16 (issue 43): shapes next to those rounds
4-15 tried, each of which failed before its fix.

* signals: Ctrl-C that lands inside a DuckDB query of `report` / `export` / `whatif` of a
  trace path came back as DuckDB's RuntimeError("Query interrupted"), shown as
  "internal error", exit 1 (SIGTERM and SIGHUP were already 143 / 129);
* `dashboard`'s $STEPSCOPE_DB was not checked as --db is: `x.duckdb/` served `x.duckdb`;
* names on stdout: the dashboard's banner showed its database's name raw, `nightly`'s
  last line its --out-dir (ESC, BEL reached the terminal; stderr's lines were escaped).
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from test_adversarial_audit import cli, job

from stepscope.cli import main
from stepscope.commands import dashboard_cmd, export_cmd, report_cmd

RAW = {chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]} - {"\n"}


def _query_hit_by_ctrl_c(*args: object, **kwargs: object) -> object:
    """A real DuckDB query far longer than the test, with SIGINT sent 0.2 s into it:
    DuckDB interrupts the query and raises its own RuntimeError in place of the
    KeyboardInterrupt."""
    con = duckdb.connect()
    timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
    # never longer than 60 s: a SIGINT that does not stop the query fails the test
    guard = threading.Timer(60, con.interrupt)
    timer.start()
    guard.start()
    try:
        con.execute("SELECT count(*) FROM range(1000000000000) t(i) WHERE i % 7 = 3"
                    ).fetchall()
    finally:
        timer.cancel()
        guard.cancel()
    raise AssertionError("the query ended before SIGINT")


@pytest.fixture
def python_sigint() -> Iterator[None]:
    """Python's own Ctrl-C handler, as a terminal's process has it (a pytest-xdist worker
    ignores SIGINT, and the CLI leaves an ignored SIGINT alone)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize(("module", "name", "argv"), [
    (report_cmd, "report", ("report", "{t}", "--format", "json", "--out", "{o}")),
    (export_cmd, "export_chrome", ("export", "{t}", "--out", "{o}")),
])
def test_ctrl_c_inside_a_duckdb_query_is_an_interrupt(module: object, name: str,
                                                      argv: tuple[str, ...], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      python_sigint: None) -> None:
    monkeypatch.setattr(module, name, _query_hit_by_ctrl_c)
    out = tmp_path / "out.json"
    args = [a.format(t=job(tmp_path / "t"), o=out) for a in argv]
    rc, _, err = cli(*args)
    assert rc == 130 and err == ["interrupted: nothing was written"], (rc, err)
    assert not out.exists()


def test_a_query_interrupted_without_a_signal_is_not_taken_for_ctrl_c(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a Ctrl-C this command received makes "Query interrupted" a stop."""
    def interrupted(*args: object, **kwargs: object) -> object:
        raise RuntimeError("Query interrupted")

    monkeypatch.setattr(report_cmd, "report", interrupted)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["report", str(job(tmp_path / "t"))])
    assert rc == 1 and err.getvalue().startswith("internal error: RuntimeError"), err


def test_the_sigint_handler_is_given_back(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGINT)
    cli("summary", "--db", tmp_path / "none.duckdb")
    assert signal.getsignal(signal.SIGINT) is before


@pytest.mark.parametrize(("value", "why"), [
    ("{d}/x.duckdb/", "ends with '/', so it names a folder"),
    ("{d}/x.duckdb/.", "ends with '/.', so it names a folder"),
    (":memory:", "DuckDB's in-memory database"),
    ("{d}/" + "n" * 300 + ".duckdb", "longer than 255 bytes"),
])
def test_dashboard_checks_stepscope_db_as_it_checks_db(value: str, why: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEPSCOPE_DB", value.format(d=tmp_path))
    monkeypatch.setattr(dashboard_cmd, "start_server", _no_server)
    rc, out, err = cli("dashboard", "--port", "1")
    assert rc == 2 and out == "" and len(err) == 1, (rc, out, err)
    assert err[0].startswith("error: $STEPSCOPE_DB ") and why in err[0], err
    assert list(tmp_path.iterdir()) == []


def _no_server(cmd: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """In place of Streamlit: a process that ends at once, as a server stopped at start."""
    return subprocess.Popen(["true"])


def test_the_dashboard_banner_escapes_the_database_name(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "\x1b]0;owned\x07\x9b2J.duckdb"
    monkeypatch.setattr(dashboard_cmd, "start_server", _no_server)
    monkeypatch.setattr(dashboard_cmd, "check_port_free", lambda host, port: None)
    rc, out, err = cli("dashboard", "--db", db, "--port", "18599")
    assert rc == 0 and err == [], err
    assert out.startswith("stepscope dashboard: http://127.0.0.1:18599/  (database '")
    assert "\\x1b]0;owned\\x07\\x9b2J.duckdb" in out and not RAW & set(out), out


def test_nightly_escapes_its_out_dir_on_stdout(tmp_path: Path) -> None:
    out_dir = tmp_path / "o\x1b[2J\x07ut"
    rc, out, err = cli("nightly", job(tmp_path / "t"), "--job", "j", "--run", "r1",
                       "--db", tmp_path / "db.duckdb", "--out-dir", out_dir)
    assert rc == 0 and err == [], err
    assert (out_dir / "report.md").is_file()
    assert out.rstrip().endswith(f"reports in '{tmp_path}/o\\x1b[2J\\x07ut/'"), out
    assert not RAW & set(out), out


def test_a_long_db_name_is_cut_in_the_middle_with_its_length(tmp_path: Path) -> None:
    """Audit round 16: the line showed the first 80 characters of the name, no mark of
    the cut, losing the file name and the trailing '/' the message is about."""
    db = f"{tmp_path}/{'d' * 200}/x.duckdb/"
    rc, _, err = cli("summary", "--db", db)
    assert rc == 2 and len(err) == 1, err
    assert "…" in err[0] and f"/x.duckdb/ ({len(db):,} characters): ends with '/'" in err[0]
