"""Audit round 11 (issue 43), third part: the dashboard's upload handling through
streamlit.testing's AppTest (no browser, no server): hostile file names (paths out,
Windows paths, escapes, names past the file system's limit, a NUL), archives whose
members point or lead outside, run names with escapes or past 1,024 characters, the
upload size limit. Each upload must write nothing outside its temporary folder, raise
nothing on the page, show any name escaped, and say what failed in one message.

First run against the unchanged code: see FIRST_RUN_FAILED and the count in
test_audit_round11_inputs.py's docstring.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import pickle
import sqlite3
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import duckdb
import pytest
from audit8_inputs import params, raw_controls
from conftest import kineto_trace
from dashboard_helpers import app_test, button, texts

ESC = "\x1b]0;owned\x07\x1b[2J"


def _rank(rank: int, world: int = 2) -> bytes:
    return gzip.compress(json.dumps(kineto_trace(rank=rank, world_size=world)).encode(),
                         mtime=0)


def _tar_link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        info = tarfile.TarInfo(name)
        info.type = kind
        info.linkname = target
        t.addfile(info)
    return buf.getvalue()


MARKER = Path("/tmp/audit11_pwned")


class _System:
    """Pickles as a call of os.system: a dump that runs a command if it is unpickled."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {MARKER}",))


def _system_pickle() -> bytes:
    return pickle.dumps({"version": "2.4", "entries": [], "x": _System()})


def _sqlite() -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        con = sqlite3.connect(Path(tmp) / "x.db")
        con.execute("CREATE TABLE t (x)")
        con.commit()
        con.close()
        return (Path(tmp) / "x.db").read_bytes()


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def _runs(db: Path) -> dict[str, tuple[str, list[str]]]:
    if not db.exists():
        return {}
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute("SELECT run, status FROM runs").fetchall()
        sources = con.execute("SELECT run, list(source_file ORDER BY source_file) FROM ranks "
                              "GROUP BY run").fetchall()
    finally:
        con.close()
    files = dict(sources)
    return {r[0]: (r[1], files.get(r[0], [])) for r in rows}


# name -> (uploaded files, run name typed or None, environment, what must hold)
Upload = list[tuple[str, bytes]]
CASES: dict[str, tuple[Upload, str | None, dict[str, str], str]] = {
    "a name climbing out with ../": (
        [("../../../../../tmp/audit11_escape.json.gz", _rank(0, 1))], "up1", {}, "ok"),
    "a Windows path as the name": (
        [("C:\\Users\\x\\..\\rank0.json.gz", _rank(0, 1))], "up2", {}, "ok"),
    "a name with a DEL": ([("rank\x7f0.json.gz", _rank(0, 1))], "up3", {}, "ok"),
    "a name of 300 characters": ([("r" * 290 + "0.json.gz", _rank(0, 1))], "up4", {},
                                 "handled"),
    "a broken file named with ESC beside two ranks": (
        [("rank0.json.gz", _rank(0)), ("rank1.json.gz", _rank(1)),
         (f"x{ESC}.json", b"{broken")], "up5", {}, "partial"),
    "a tar.gz whose member links to /etc/shadow": (
        [("run.tar.gz", _tar_link("rank0.json", "/etc/shadow"))], "up6", {}, "refused"),
    "a zip whose member climbs out with ../": (
        [("run.zip", _zip({"../../../../../tmp/audit11_zip_escape/rank0.json":
                           json.dumps(kineto_trace(rank=0, world_size=1)).encode()}))],
        "up7", {}, "refused"),
    "a run name with ESC": ([("rank0.json.gz", _rank(0, 1))], f"r{ESC}", {}, "escaped"),
    "a run name of 2,000 characters": ([("rank0.json.gz", _rank(0, 1))], "r" * 2000, {},
                                       "refused"),
    "files over the upload limit together": (
        [("a.json", b" " * 700_000), ("b.json", b" " * 700_000)], "up10",
        {"STEPSCOPE_MAX_UPLOAD_MB": "1"}, "refused"),
    "a name of dots then json": ([("...json", _rank(0, 1))], "up11", {}, "handled"),
    "two files of one name": ([("rank.json.gz", _rank(0)), ("rank.json.gz", _rank(1))],
                              "up12", {}, "ok"),
    # ---- batch 2 (run once after the first)
    "a run name with a newline": ([("rank0.json.gz", _rank(0, 1))], "a\nb", {}, "escaped"),
    "an SQLite file named rank0.json": ([("rank0.json", _sqlite())], "up14", {}, "refused"),
    "a Flight Recorder pickle calling os.system": (
        [("nccl_trace_rank_0.json", _system_pickle())], "up15", {}, "refused"),
    "a tar.gz whose member hard-links /etc/passwd": (
        [("run.tar.gz", _tar_link("rank0.json", "/etc/passwd", tarfile.LNKTYPE))], "up16", {},
        "refused"),
    "a run name of spaces around a name": ([("rank0.json.gz", _rank(0, 1))], "  up17  ", {},
                                           "handled"),
}

OUTSIDE = (Path("/tmp/audit11_escape.json.gz"), Path("/tmp/audit11_zip_escape"), MARKER)

FIRST_RUN_FAILED: dict[str, str] = {}


def _upload(at: Any, files: Upload, run: str | None) -> None:
    at.file_uploader(key="upload_files").set_value(
        [(name, content, "application/octet-stream") for name, content in files])
    at.run()
    if run is not None:
        next(t for t in at.text_input if t.label == "Run name").set_value(run)
        at.run()
    button(at, "ingest_uploads").click()
    at.run()


@pytest.mark.slow
@pytest.mark.parametrize("name", params(CASES, FIRST_RUN_FAILED))
def test_upload(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One hostile upload: no exception on the page, no raw control character in what it
    shows, nothing written outside, and the outcome the docs promise."""
    files, run, env, want = CASES[name]
    db = tmp_path / "db.duckdb"
    at = app_test(monkeypatch, db, page="upload", **env)
    at.run()
    _upload(at, files, run)
    assert not at.exception, [e.value for e in at.exception]
    shown = texts(at)
    assert "Internal error" not in shown and not raw_controls(shown), shown[:2000]
    assert not any(p.exists() for p in OUTSIDE)
    assert "root:" not in shown
    runs = _runs(db)
    errors = [str(e.value) for e in at.error]
    if want == "ok":
        assert run in runs and runs[run][0] == "complete", (runs, shown[:2000])
        assert all(s.startswith("upload:") and "/" not in s[7:] for s in runs[run][1]), runs
    elif want == "partial":
        assert runs[run][0] == "partial", runs
    elif want == "refused":
        assert not runs and len(errors) == 1, (runs, errors)
    elif want in ("escaped", "handled"):
        assert len(runs) == 1 or len(errors) == 1, (runs, errors)
