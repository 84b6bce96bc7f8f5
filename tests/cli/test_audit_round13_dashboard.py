"""Audit round 13 (issue 43), third part: the dashboard through streamlit.testing's
AppTest (no browser, no server): uploads not tried in rounds 11-12 (a tar hard link to
/etc/passwd, a gzip bomb of spaces, an SQLite file and a Flight Recorder pickle that would
run a command, a zip member named with ESC, `./`-prefixed members, two files of one name,
a plain JSON named .gz, run names that climb out (`../`) or are over 1,024 characters),
and folders under --traces-root holding file links that lead out (to a trace, to
/etc/passwd, `../../../` from a subfolder) or named with ESC. Each must write nothing
outside its temporary folder, raise nothing on the page, show any name escaped, and say
what failed.

First run against the final code: see FIRST_RUN_FAILED and the count in
test_audit_round13_inputs.py's docstring.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import pickle
import sqlite3
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import duckdb
import pytest
from audit8_inputs import params, raw_controls
from conftest import kineto_trace
from dashboard_helpers import app_test, button, texts

ESC = "\x1b]0;owned\x07\x1b[2J"
MARKER = Path("/tmp/audit13_dash_pwned")
OUT = Path("/tmp/audit13_climb")


def _rank(rank: int, world: int = 2) -> bytes:
    return gzip.compress(json.dumps(kineto_trace(rank=rank, world_size=world)).encode(),
                         mtime=0)


def _tar(members: list[tarfile.TarInfo], data: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for info in members:
            body = data.get(info.name, b"")
            info.size = len(body) if info.isfile() else 0
            t.addfile(info, io.BytesIO(body) if info.isfile() else None)
    return buf.getvalue()


def _hardlink() -> bytes:
    info = tarfile.TarInfo("rank0.json")
    info.type = tarfile.LNKTYPE
    info.linkname = "/etc/passwd"
    return _tar([info], {})


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, body in members.items():
            z.writestr(name, body)
    return buf.getvalue()


def _sqlite(tmp: Path) -> bytes:
    path = tmp / "x.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (a)")
    con.commit()
    con.close()
    return path.read_bytes()


class _System:
    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {MARKER}",))


ONE = json.dumps(kineto_trace(rank=0, world_size=1)).encode()
Upload = list[tuple[str, bytes]]
CASES: dict[str, tuple[Upload, str, str]] = {
    "a tar.gz whose rank0.json is a hard link to /etc/passwd": (
        [("run.tar.gz", _hardlink())], "d13a", "refused"),
    "a .json.gz of 64 MiB of spaces": (
        [("rank0.json.gz", gzip.compress(b" " * (64 << 20), mtime=0))], "d13b", "refused"),
    "an SQLite file named rank0.json": ([("rank0.json", b"")], "d13c", "sqlite"),
    "a Flight Recorder pickle that runs a command": (
        [("nccl_trace_rank_0", pickle.dumps({"version": "2.4", "entries": [],
                                             "x": _System()}))], "d13d", "streamlit"),
    "a zip member named with ESC": ([("run.zip", _zip({f"rank0{ESC}.json": ONE}))], "d13e",
                                    "ok"),
    "tar members with ./ before their names": (
        [("run.tar.gz", _tar([tarfile.TarInfo("./rank0.json.gz"),
                              tarfile.TarInfo("./rank1.json.gz")],
                             {"./rank0.json.gz": _rank(0), "./rank1.json.gz": _rank(1)}))],
        "d13f", "ok"),
    "two uploads of one name": ([("rank0.json.gz", _rank(0, 1)),
                                 ("rank0.json.gz", _rank(0, 1))], "d13g", "handled"),
    "a plain JSON trace named .json.gz": ([("rank0.json.gz", ONE)], "d13h", "handled"),
    "a run name that climbs out with ../": ([("rank0.json.gz", _rank(0, 1))],
                                            f"../../../..{OUT}", "handled"),
    "a run name of 1,100 characters": ([("rank0.json.gz", _rank(0, 1))], "r" * 1100,
                                       "handled"),
}

FIRST_RUN_FAILED: dict[str, str] = {}


def _runs(db: Path) -> dict[str, str]:
    if not db.exists():
        return {}
    con = duckdb.connect(str(db), read_only=True)
    try:
        return dict(con.execute("SELECT run, status FROM runs").fetchall())
    finally:
        con.close()


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
    shows, nothing written outside, no command run, and the outcome the docs promise
    ("ok": the run is complete; "refused": no run and an error shown; "handled": either,
    but never an exception)."""
    files, run, want = CASES[name]
    if want == "sqlite":
        files, want = [("rank0.json", _sqlite(tmp_path))], "refused"
    db = tmp_path / "db.duckdb"
    at = app_test(monkeypatch, db, page="upload")
    at.run()
    _upload(at, files, run)
    if want == "streamlit":  # Streamlit's uploader refuses a name without an extension
        assert [e.value for e in at.exception] and all(
            str(e.value).startswith("Invalid file extension") for e in at.exception)
        assert not _runs(db) and not MARKER.exists()
        return
    assert not at.exception, [e.value for e in at.exception]
    shown = texts(at)
    assert "Internal error" not in shown and not raw_controls(shown), shown[:2000]
    assert "root:" not in shown and not MARKER.exists() and not OUT.exists()
    runs = _runs(db)
    if want == "ok":
        assert runs.get(run) == "complete", (runs, shown[:2000])
    elif want == "refused":
        assert run not in runs and at.error, (runs, shown[:2000])


def _server_root(base: Path) -> Path:
    """A --traces-root with folders whose file links lead outside it, and one named with
    ESC; the outside trace is a good one, so a link that is followed would ingest it."""
    outside = base / "outside"
    outside.mkdir()
    (outside / "rank1.json.gz").write_bytes(_rank(1))
    root = base / "served"
    for name in ("link_to_trace", "link_to_passwd", "relative_climb", f"esc{ESC}"):
        (root / name).mkdir(parents=True)
        (root / name / "rank0.json.gz").write_bytes(_rank(0))
    (root / "link_to_trace" / "rank1.json.gz").symlink_to(outside / "rank1.json.gz")
    (root / "link_to_passwd" / "rank1.json").symlink_to("/etc/passwd")
    (root / "relative_climb" / "sub").mkdir()
    (root / "relative_climb" / "sub" / "rank1.json.gz").symlink_to(
        "../../../outside/rank1.json.gz")
    (root / f"esc{ESC}" / "rank1.json.gz").write_bytes(_rank(1))
    return root


SERVER_CASES = {
    "a served folder with a file link to a trace outside": ("link_to_trace", "refused"),
    "a served folder with a file link to /etc/passwd": ("link_to_passwd", "refused"),
    "a served folder whose subfolder links ../../../ out": ("relative_climb", "refused"),
    "a served folder named with ESC": (f"esc{ESC}", "refused"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", params(SERVER_CASES, FIRST_RUN_FAILED))
def test_server_folder(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder under --traces-root (docs/dashboard.md: "a folder holding a file link that
    leads outside it is refused whole"): a folder with such a link is not offered, or its
    ingest is refused with an error and no run; nothing of the link's target is shown; a
    folder named with ESC ingests and its name is shown escaped."""
    folder, want = SERVER_CASES[name]
    served = _server_root(tmp_path)
    db = tmp_path / "db.duckdb"
    at = app_test(monkeypatch, db, page="upload", STEPSCOPE_TRACES_ROOT=str(served))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    boxes = [b for b in at.selectbox if b.key == "server_folder"]
    offered = [str(o) for o in boxes[0].options] if boxes else []
    shown = texts(at)
    assert not raw_controls(shown) and "root:" not in shown, shown[:2000]
    match = [o for o in offered if o == folder]
    if want == "refused" and not match:
        return  # not offered at all
    assert match, offered
    boxes[0].set_value(match[0])
    at.run()
    button(at, "ingest_folder").click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    shown = texts(at)
    assert "Internal error" not in shown and not raw_controls(shown), shown[:2000]
    assert "root:" not in shown, shown[:2000]
    runs = _runs(db)
    if want == "ok":
        assert list(runs.values()) == ["complete"], (runs, shown[:2000])
    else:
        assert not runs and at.error, (runs, shown[:2000])
