"""Audit round 12 (issue 43), third part: the dashboard's upload handling through
streamlit.testing's AppTest (no browser, no server), cases not tried in round 11: names
that are only dots or a slash, a NUL, a bidi override; tar members with `..` or absolute
paths (docs/dashboard.md: "members with absolute or `..` paths are skipped"), a zip member
that is a symbolic link, an empty file, run names with C1 controls or empty. Each upload
must write nothing outside its temporary folder, raise nothing on the page, show any name
escaped, and say what failed.

First run against the unchanged code: see FIRST_RUN_FAILED and the count in
test_audit_round12_inputs.py's docstring.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import duckdb
import pytest
from audit8_inputs import params, raw_controls
from conftest import kineto_trace
from dashboard_helpers import app_test, button, texts

C1 = "\x9b2J\x9d0;t\x9c"
OSC = "\x1b]0;owned\x07"
ABS = Path("/tmp/audit12_abs")
UP = Path("/tmp/audit12_up")
STREAMLIT_REFUSALS = ("Invalid file extension", "Filename cannot contain null bytes")


def _rank(rank: int, world: int = 2) -> bytes:
    return gzip.compress(json.dumps(kineto_trace(rank=rank, world_size=world)).encode(),
                         mtime=0)


def _tar(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _zip_symlink(name: str, target: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        info = zipfile.ZipInfo(name)
        info.create_system = 3
        info.external_attr = (0o120777 << 16)
        z.writestr(info, target)
    return buf.getvalue()


def _runs(db: Path) -> dict[str, str]:
    if not db.exists():
        return {}
    con = duckdb.connect(str(db), read_only=True)
    try:
        return dict(con.execute("SELECT run, status FROM runs").fetchall())
    finally:
        con.close()


Upload = list[tuple[str, bytes]]
CASES: dict[str, tuple[Upload, str, str]] = {
    "a name that is only ..": ([("..", _rank(0, 1))], "d1", "streamlit"),
    "a name that is only /": ([("/", _rank(0, 1))], "d2", "streamlit"),
    "a name with a NUL": ([("rank\x000.json.gz", _rank(0, 1))], "d3", "streamlit"),
    "a name with a bidi override": ([("rank0\u202egnp.json.gz", _rank(0, 1))], "d4", "ok"),
    "a name with OSC beside a good rank": (
        [("rank0.json.gz", _rank(0)), (f"rank1{OSC}.json.gz", _rank(1))], "d5", "ok"),
    "a tar.gz whose only member climbs out with ../": (
        [("run.tar.gz", _tar({f"../../../..{UP}/rank0.json":
                              json.dumps(kineto_trace(rank=0, world_size=1)).encode()}))],
        "d6", "refused"),
    "a tar.gz whose only member is an absolute path": (
        [("run.tar.gz", _tar({f"{ABS}/rank0.json":
                              json.dumps(kineto_trace(rank=0, world_size=1)).encode()}))],
        "d7", "refused"),
    "an empty rank0.json": ([("rank0.json", b"")], "d8", "refused"),
    "a zip member that is a link to /etc/passwd": (
        [("run.zip", _zip_symlink("rank0.json", "/etc/passwd"))], "d9", "refused"),
    "a run name with C1 controls": ([("rank0.json.gz", _rank(0, 1))], f"r{C1}", "handled"),
}

FIRST_RUN_FAILED: dict[str, str] = {}


def _upload(at: Any, files: Upload, run: str) -> None:
    at.file_uploader(key="upload_files").set_value(
        [(name, content, "application/octet-stream") for name, content in files])
    at.run()
    field = [t for t in at.text_input if t.label == "Run name"]
    if not field:  # the page refused the files before asking for a run name
        return
    field[0].set_value(run)
    at.run()
    button(at, "ingest_uploads").click()
    at.run()


@pytest.mark.slow
@pytest.mark.parametrize("name", params(CASES, FIRST_RUN_FAILED))
def test_upload(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One hostile upload: no exception on the page, no raw control character in what it
    shows, nothing written outside, and the outcome the docs promise ("ok": the run is
    complete; "refused": no run and an error shown; "streamlit": Streamlit's own uploader
    refuses the name, nothing is ingested)."""
    files, run, want = CASES[name]
    db = tmp_path / "db.duckdb"
    at = app_test(monkeypatch, db, page="upload")
    at.run()
    _upload(at, files, run)
    if want == "streamlit":  # Streamlit's uploader refuses the name itself (no browser
        # sends it); nothing may reach stepscope's code or the database
        assert [e.value for e in at.exception] and all(
            str(e.value).startswith(STREAMLIT_REFUSALS) for e in at.exception)
        assert not _runs(db)
        return
    assert not at.exception, [e.value for e in at.exception]
    shown = texts(at)
    assert "Internal error" not in shown and not raw_controls(shown), shown[:2000]
    assert not ABS.exists() and not UP.exists() and "root:" not in shown
    runs = _runs(db)
    if want == "ok":
        assert runs.get(run) == "complete", (runs, shown[:2000])
    elif want == "refused":
        assert run not in runs and at.error, (runs, shown[:2000])
