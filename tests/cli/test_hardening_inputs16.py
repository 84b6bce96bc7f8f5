"""Hostile inputs found before audit round 16 (issue 43), each failing before its fix:
a tar link named like a trace beside a good rank (skipped without a word: exit 0, the run
`complete` with one rank of two).

Each case pins the exit code, the one line naming the file and its problem, and what
the run holds (status, ranks, failed files).
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
from conftest import kineto_trace, q

from stepscope.cli import main

TWO = [json.dumps(kineto_trace(rank=r, world_size=2)).encode() for r in range(2)]


def _member(name: str, body: bytes | None = None, kind: bytes = tarfile.REGTYPE,
            link: str = "") -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.size = kind, link, len(body or b"")
    return info, body


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w") as tf:
        for info, body in members:
            tf.addfile(info, io.BytesIO(body) if body is not None else None)
    return path


def _ingest(capsys: pytest.CaptureFixture[str], path: Path, db: Path) -> tuple[int, list[str]]:
    rc = main(["ingest", str(path), "--db", str(db), "--run", "r", "--quiet"])
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    return rc, err.splitlines()


LINKS_OUT = {
    "a symbolic link to /etc/passwd": (
        _member("rank0.json", kind=tarfile.SYMTYPE, link="/etc/passwd"),
        "a symbolic link to /etc/passwd"),
    "a symbolic link up and out": (
        _member("d/rank0.json", kind=tarfile.SYMTYPE, link="../../x/rank0.json"),
        "a symbolic link to ../../x/rank0.json"),
    "a hard link to a member the archive lacks": (
        _member("rank0.json", kind=tarfile.LNKTYPE, link="nothere.json"),
        "a hard link to nothere.json"),
    "a symbolic link to a member only after it": (
        _member("rank0.json", kind=tarfile.SYMTYPE, link="later.txt"),
        "a symbolic link to later.txt"),
}


@pytest.mark.parametrize("case", list(LINKS_OUT))
def test_a_tar_link_named_like_a_trace_fails_alone(case: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Before: skipped, exit 0, run complete with rank 1 only. Now its own line, exit 3,
    the run partial with the link listed among its failed files."""
    link, said = LINKS_OUT[case]
    archive = _tar(tmp_path / "t" / "run.tar",
                   [link, _member("rank1.json", TWO[1]), _member("later.txt", b"x")])
    rc, err = _ingest(capsys, archive, tmp_path / "db.duckdb")
    shown = f"{archive}!{link[0].name}"
    assert rc == 3 and err == [f"error: {shown}: not a regular file ({said} in the archive): "
                               "it holds no trace"], err
    db = tmp_path / "db.duckdb"
    assert q(db, "SELECT status, n_ranks FROM runs") == [("partial", 1)]
    failed = json.loads(q(db, "SELECT failed_files FROM runs")[0][0])
    assert [f["file"] for f in failed] == [shown]


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE])
def test_a_tar_link_to_a_member_before_it_is_left_out(kind: bytes, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    """The control: a link to a regular member read before it loses nothing (that member
    is read under its own name), so it is left out as before: exit 0, both ranks."""
    archive = _tar(tmp_path / "t" / "run.tar",
                   [_member("d/real0.json", TWO[0]),
                    _member("d/rank0.json", kind=kind,
                            link="real0.json" if kind == tarfile.SYMTYPE else "d/real0.json"),
                    _member("rank1.json", TWO[1])])
    rc, err = _ingest(capsys, archive, tmp_path / "db.duckdb")
    assert rc == 0 and not err, err
    assert q(tmp_path / "db.duckdb", "SELECT status, n_ranks FROM runs") == [("complete", 2)]
