"""Archive members whose paths no file system takes (issue 43, audit round 9 "tar member
with a 5,000-char folder", "pax size of 10^20"): each member is read from a short staged
name, lines show long names cut with their length, and a damaged size header is the
archive's one line."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path, PurePosixPath

import duckdb
import pytest
from conftest import kineto_trace

from stepscope.cli import main
from stepscope.ingest.archive_names import NAME_BYTES, PATH_BYTES, member_display, stage_path


def _tar(path: Path, members: dict[str, bytes], pax: dict[str, str] | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            if pax:
                info.pax_headers = pax
            tf.addfile(info, io.BytesIO(data))
    return path


def _trace(rank: int) -> bytes:
    return json.dumps(kineto_trace(rank=rank, world_size=2)).encode()


def _ingest(capsys: pytest.CaptureFixture[str], folder: Path, db: Path) -> tuple[int, list[str]]:
    rc = main(["ingest", str(folder), "--db", str(db), "--run", "r", "--quiet"])
    return rc, capsys.readouterr().err.splitlines()


LONG_PATHS = {
    "a 5,000-character folder": ("d" * 5000 + "/rank0.json", "e" * 5000 + "/rank1.json"),
    "folders sharing their first 5,000 characters": ("d" * 5000 + "x/rank0.json",
                                                     "d" * 5000 + "y/rank1.json"),
    "a 300-character file name": ("f" * 290 + "rank0.json", "g" * 290 + "rank1.json"),
    "40 folders of 200 characters": ("/".join(["h" * 200] * 40) + "/rank0.json",
                                     "/".join(["h" * 200] * 40) + "/z/rank1.json"),
    "names of multibyte characters": ("\u00e9" * 200 + "/rank0.json",
                                      "\u4e2d" * 100 + "/rank1.json"),
}


@pytest.mark.parametrize("case", list(LONG_PATHS))
def test_members_with_long_paths_are_read(case: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Both ranks ingest (exit 0, no line): before, the archive failed with a raw 'File
    name too long' line as long as the name."""
    first, second = LONG_PATHS[case]
    _tar(tmp_path / "t" / "run.tar", {first: _trace(0), second: _trace(1)})
    rc, err = _ingest(capsys, tmp_path / "t", tmp_path / "db.duckdb")
    assert rc == 0 and not err, err
    with duckdb.connect(str(tmp_path / "db.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(DISTINCT rank) FROM gpu_ops").fetchone() == (2,)


def test_a_long_member_that_fails_has_a_short_line(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A member under a 5,000-character folder that is no trace fails alone, its line
    under 200 characters, saying the folder's length."""
    archive = _tar(tmp_path / "t" / "run.tar", {"d" * 5000 + "/rank0.json": b"not json",
                                                "rank1.json": _trace(1)})
    rc, err = _ingest(capsys, tmp_path / "t", tmp_path / "db.duckdb")
    assert rc == 3 and len(err) == 1, err
    assert err[0].startswith(f"error: {archive}!{'d' * 24}...(5,000 characters)...")
    assert len(err[0]) < 200 + len(str(archive)), err


def test_a_pax_size_of_10_20_is_the_archives_one_line(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    archive = _tar(tmp_path / "t" / "run.tar", {"rank0.json": _trace(0)},
                   pax={"size": str(10 ** 20)})
    rc, err = _ingest(capsys, tmp_path / "t", tmp_path / "db.duckdb")
    assert rc == 1 and len(err) == 2, err
    assert err[0] == (f"error: {archive}: unreadable archive (a member's header declares "
                      "100,000,000,000,000,000,000 bytes, more than any file holds: a "
                      "damaged header)")
    assert err[1].startswith("error: nothing ingested")


def test_stage_paths_are_short_and_distinct(tmp_path: Path) -> None:
    members = [PurePosixPath(p) for pair in LONG_PATHS.values() for p in pair]
    staged = [stage_path(tmp_path, m) for m in members]
    assert len(set(staged)) == len(members)
    for path in staged:
        rel = path.relative_to(tmp_path)
        assert all(len(part.encode()) <= 255 for part in rel.parts), rel
        assert len(str(rel.parent).encode()) <= PATH_BYTES + NAME_BYTES
        assert path.name.endswith(".json")


def test_plain_paths_are_staged_and_shown_as_they_are(tmp_path: Path) -> None:
    member = PurePosixPath("job/traces/rank0.json")
    assert stage_path(tmp_path, member) == tmp_path / "job" / "traces" / "rank0.json"
    assert member_display("run.tar", member) == "run.tar!job/traces/rank0.json"


def test_deep_long_paths_are_shown_with_their_folder_count() -> None:
    member = PurePosixPath("/".join(["h" * 200] * 40) + "/rank0.json")
    shown = member_display("run.tar", member)
    assert shown == f"run.tar!{'h' * 24}...(200 characters)...{'h' * 16}/...(39 folders)..." \
        "/rank0.json"
