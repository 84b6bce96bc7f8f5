"""A fresh adversarial audit of issue 43's classes (writes outside their place, machine
failures, bounded inputs, signals, Ray addresses, terminal escapes, databases and option
validation), with cases that test_hardening_round3.py does not hold: each case is one
command line and what the README's exit-code table promises for it (the code and the one
line on stderr, or a clean run). Kept as tests, so a regression in any class fails here.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import pickle
import signal
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest
from conftest import kineto_trace, write_trace

from stepscope.cli import main
from stepscope.ingest.nccl import safe_pickle

P61 = (1 << 61) - 1


def cli(*argv: str | Path) -> tuple[int, str, list[str]]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in argv])
    lines = err.getvalue().splitlines()
    assert not any("Traceback" in x or "internal error" in x for x in lines), lines
    return rc, out.getvalue(), lines


def job(folder: Path, world: int = 2) -> Path:
    for r in range(world):
        write_trace(folder / f"rank{r}.json.gz", kineto_trace(rank=r, world_size=world))
    return folder


def expect(rc: int, err: list[str], code: int, said: str | None) -> None:
    assert rc == code, (rc, err)
    if said is None:
        assert err == [], err
    else:
        assert len(err) == 1 and said in err[0], err


# ---------------------------------------------------------------- usage errors (exit 2)
def _sparse(path: Path, size: int) -> Path:
    with open(path, "wb") as fh:
        fh.truncate(size)
    return path


def _foreign(path: Path, version: str, tables: tuple[str, ...]) -> Path:
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE schema_info(key VARCHAR, value VARCHAR)")
    con.execute("INSERT INTO schema_info VALUES ('schema_version', ?)", [version])
    for table in tables:
        con.execute(f"CREATE TABLE {table}(run VARCHAR, rank INTEGER)")
    con.close()
    return path


def _alias_merge(path: Path) -> Path:
    path.write_text("base: &b {n_layers: 2}\nspec:\n  <<: *b\n")
    return path


def _big_alternation(path: Path) -> Path:
    patterns = [{"pattern": f"(?:[a-z]{{1,50}}x{i:05d}){{1,20}}", "library": "l",
                 "collective": "send", "op": "o"} for i in range(2000)]
    path.write_text(json.dumps({"patterns": patterns}))
    return path


USAGE: list[tuple[str, Callable[[Path], list[str | Path]], str]] = [
    ("nightly run with ..", lambda t: ["nightly", "T", "--job", "j", "--run", "x/../../y"],
     "--run 'x/../../y'"),
    ("nightly run with ~", lambda t: ["nightly", "T", "--job", "j", "--run", "~root"],
     "without --out-dir, the reports' folder"),
    ("nightly empty path", lambda t: ["nightly", "", "--job", "j"], "an empty argument"),
    ("diff empty run", lambda t: ["diff", "", "b"], "an empty argument"),
    ("report empty --out", lambda t: ["report", "T", "--out", ""], "an empty argument for --out"),
    ("report --model=", lambda t: ["report", "T", "--model="], "empty argument for --model"),
    ("comm-kernels /dev/null", lambda t: ["ingest", "T", "--comm-kernels", "/dev/null"],
     "--comm-kernels: not a regular file"),
    ("comm-kernels 16 MiB + 1", lambda t: ["ingest", "T", "--comm-kernels",
                                           _sparse(t / "k.json", (16 << 20) + 1)],
     "--comm-kernels: larger than 16M"),
    ("model link to /dev/zero", lambda t: ["report", "T", "--model", _link(t / "m.yaml",
                                                                        "/dev/zero")],
     "--model: not a regular file"),
    ("model link to a folder", lambda t: ["report", "T", "--model", _link(t / "m.json", t)],
     "--model: a folder, not a file"),
    ("yaml merge key alias", lambda t: ["report", "T", "--model", _alias_merge(t / "m.yml")],
     "YAML alias *b at line 3"),
    ("patterns too big together", lambda t: ["ingest", "T", "--comm-kernels",
                                             _big_alternation(t / "k.json")],
     "patterns together are too large for one RE2 expression"),
    ("ray://host:abc", lambda t: ["ingest", "T", "--executor", "ray://host:abc"],
     "give the Ray cluster's address"),
    ("ray:[::1]: no port", lambda t: ["ingest", "T", "--executor", "ray:[::1]:"],
     "give the Ray cluster's address"),
    ("foreign db version 2", lambda t: ["summary", "--db", _foreign(t / "f.duckdb", "2",
                                                                    ("runs", "ranks"))],
     "lack their keys"),
    ("foreign db history only", lambda t: ["ingest", "T", "--db",
                                           _foreign(t / "h.duckdb", "1", ("history",))],
     "history, schema_info are named like stepscope's"),
    ("dashboard --db /dev/null", lambda t: ["dashboard", "--db", "/dev/null"],
     "not a database file"),
    ("ingest --db a folder", lambda t: ["ingest", "T", "--db", t], "not a DuckDB file"),
    ("--db x.duckdb//", lambda t: ["ingest", "T", "--db", "x.duckdb//"], "ends with '/'"),
    ("report --db x/", lambda t: ["report", "nope", "--db", "x/"], "ends with '/'"),
    ("step marker with tab", lambda t: ["ingest", "T", "--step-marker", "a\tb"],
     "an annotation name is printable text"),
    ("step marker spaces", lambda t: ["ingest", "T", "--step-marker", "   "],
     "an annotation name is printable text"),
    ("stage dir is a file", lambda t: ["ingest", "T", "--stage-dir", "T/rank0.json.gz"],
     "not a folder"),
    ("stage dir /sys", lambda t: ["ingest", "T", "--stage-dir", "/sys"],
     "cannot make a folder there"),
]


def _link(path: Path, target: str | Path) -> Path:
    path.symlink_to(target)
    return path


@pytest.mark.parametrize(("name", "argv", "said"), USAGE, ids=[u[0] for u in USAGE])
def test_usage_errors(name: str, argv: Callable[[Path], list[str | Path]], said: str,
                      tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    job(tmp_path / "T")
    rc, _, err = cli(*argv(tmp_path))
    expect(rc, err, 2, said)
    assert not (tmp_path / "stepscope.duckdb").exists()


# "1TB " was accepted until issue 43's one grammar of numbers (docs/cli.md "Numbers"): a
# value is read whole, a trailing space included
@pytest.mark.parametrize(("value", "ok"), [("   ", False), ("2gb", True), ("1e3MB", False),
                                           ("1TB ", False), ("12 KiB", True), ("0.5GB", True)])
def test_memory_limit_values(value: str, ok: bool, tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEPSCOPE_MEMORY_LIMIT", value)
    rc, _, err = cli("summary", "--db", tmp_path / "none.duckdb")
    if ok:
        expect(rc, err, 2, "no stepscope database here")  # the value passed; no database
    else:
        expect(rc, err, 2, "cannot open the database with $STEPSCOPE_MEMORY_LIMIT=")


def test_ray_auto_still_parses() -> None:
    from stepscope.ingest.executors import parse_executor

    assert parse_executor("ray:auto") == ("ray", "auto")
    assert parse_executor("ray:[::1]:6379") == ("ray", "[::1]:6379")


@pytest.mark.parametrize("spec", ["ray://127.0.0.1:1", "ray:[::1]:1", "ray:localhost:1"])
def test_unreachable_ray_addresses(spec: str, tmp_path: Path) -> None:
    pytest.importorskip("ray")
    rc, _, err = cli("ingest", job(tmp_path / "t"), "--db", tmp_path / "db.duckdb",
                     "--executor", spec, "--quiet")
    expect(rc, err, 2, "cannot reach a Ray cluster at")


# ---------------------------------------------------------------- machine failures (exit 1)
def _raise(exc: BaseException) -> Callable[..., object]:
    def fail(*args: object, **kwargs: object) -> object:
        raise exc
    return fail


@pytest.mark.parametrize(("where", "exc", "said"), [
    ("_gunzip", OSError(errno.ENOSPC, "No space left on device"), "no space left on the disk"),
    ("_write_events_file", OSError(errno.EDQUOT, "Disk quota exceeded"), "disk quota"),
    ("_load_events", MemoryError(), "out of memory"),
    ("_load_events", duckdb.IOException("IO Error: No space left on device"), "no space left"),
    ("_document_bounds", OSError(errno.EMFILE, "Too many open files"), "too many open files"),
])
def test_machine_failures_in_the_reader(where: str, exc: BaseException, said: str,
                                        tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from stepscope.ingest import json_split, kineto_text, reader

    module = {"_gunzip": kineto_text, "_document_bounds": json_split}.get(where, reader)
    monkeypatch.setattr(module, where, _raise(exc))
    db = tmp_path / "db.duckdb"
    rc, _, err = cli("ingest", job(tmp_path / "t"), "--db", db, "--executor", "inline")
    expect(rc, err, 1, said)
    assert "nothing was committed" in err[0] and not db.exists() or _no_runs(db)


def _no_runs(db: Path) -> bool:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT count(*) FROM runs").fetchone() == (0,)
    finally:
        con.close()


def test_a_machine_failure_reading_a_flight_recorder_dump(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from stepscope.ingest.nccl import flight_recorder

    folder = job(tmp_path / "t")
    (folder / "nccl_trace_rank_0").write_bytes(pickle.dumps(
        {"version": "2.4", "pg_config": {}, "entries": []}))
    monkeypatch.setattr(flight_recorder, "_read_capped",
                        _raise(OSError(errno.ENOSPC, "No space left on device")))
    rc, _, err = cli("ingest", folder, "--db", tmp_path / "db.duckdb", "--executor", "inline")
    expect(rc, err, 1, "nccl_trace_rank_0: no space left on the disk")


def test_a_full_disk_in_a_tar_member(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from stepscope.ingest import sources

    src = job(tmp_path / "src")
    archive = tmp_path / "job.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        for f in sorted(src.iterdir()):
            tf.add(f, arcname=f.name)
    monkeypatch.setattr(sources, "_copy_capped", _raise(OSError(errno.EDQUOT, "quota")))
    rc, _, err = cli("ingest", archive, "--db", tmp_path / "db.duckdb")
    expect(rc, err, 1, "job.tar.gz!rank0.json.gz: the disk quota is exceeded")


# ---------------------------------------------------------------- file failures (exit 3)
@pytest.mark.parametrize("name", ["rank1.json", "rank1.zip", "rank1.tar.gz"])
def test_dangling_links_named_like_traces_are_reported(name: str, tmp_path: Path) -> None:
    folder = job(tmp_path / "t", world=1)
    (folder / name).symlink_to("missing-target")
    rc, _, err = cli("ingest", folder, "--db", tmp_path / "db.duckdb", "--quiet")
    expect(rc, err, 3, f"{name}: a symbolic link to missing-target, which does not exist")


def test_a_dangling_link_of_another_kind_is_not_a_trace(tmp_path: Path) -> None:
    folder = job(tmp_path / "t", world=1)
    (folder / "README.txt").symlink_to("missing-target")
    rc, _, err = cli("ingest", folder, "--db", tmp_path / "db.duckdb", "--quiet")
    expect(rc, err, 0, None)


@pytest.mark.parametrize(("lead", "said"), [
    (b" " * (2 << 20) + b"[1, 2]", "the JSON is a list"),
    (b"\n" * (1 << 20) + b"\x00\x01\x02binary", "binary data"),
    (b"\t" * 10000 + b"hello", "not JSON at all (it starts with 'hello')"),
])
def test_leading_whitespace_then_something_else(lead: bytes, said: str, tmp_path: Path) -> None:
    folder = tmp_path / "t"
    job(folder, world=1)
    write_trace(folder / "rank1.json.gz", lead)
    rc, _, err = cli("ingest", folder, "--db", tmp_path / "db.duckdb", "--quiet")
    expect(rc, err, 3, said)


def test_a_tar_of_whitespace_bombs_is_bounded(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from stepscope.ingest import sources

    monkeypatch.setattr(sources, "ARCHIVE_FLOOR_BYTES", 512 << 10)
    archive = tmp_path / "b.tar.gz"
    with tarfile.open(archive, "w:gz") as tf:
        for r in range(3):
            data = b" " * (400 << 10) + json.dumps(kineto_trace(rank=r, world_size=3)).encode()
            info = tarfile.TarInfo(f"rank{r}.json")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    rc, _, err = cli("ingest", archive, "--db", tmp_path / "db.duckdb", "--quiet")
    assert rc == 3 and len(err) == 2 and all("a zip bomb?" in e for e in err), err


def test_an_ordinary_zip_is_within_its_budget(tmp_path: Path) -> None:
    archive = tmp_path / "ok.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for r in range(4):
            zf.writestr(f"rank{r}.json", json.dumps(kineto_trace(rank=r, world_size=4)))
    rc, _, err = cli("ingest", archive, "--db", tmp_path / "db.duckdb", "--quiet")
    expect(rc, err, 0, None)


# ---------------------------------------------------------------- bounded pickles
@pytest.mark.parametrize("make", [
    lambda: {frozenset({i * P61}): 1 for i in range(1, 5000)},
    lambda: {"s": {i * P61 for i in range(1, 5000)}},
    lambda: {-(i * P61): 1 for i in range(1, 5000)},
    lambda: {(i * P61, "x"): 1 for i in range(1, 5000)},
])
def test_colliding_keys_in_other_shapes(make: Callable[[], object]) -> None:
    with pytest.raises(safe_pickle.TooLargeError, match="dict keys that are neither"):
        safe_pickle.load_plain(pickle.dumps(make()))


def test_bools_and_none_as_a_few_keys_still_load() -> None:
    value = {True: 1, None: 2, 1.5: 3, b"x": 4, (1, 2): 5}
    assert safe_pickle.load_plain(pickle.dumps(value)) == value


# ---------------------------------------------------------------- signals
@pytest.mark.parametrize(("sig", "code", "line"), [
    (signal.SIGHUP, 129, "interrupted by SIGHUP: nothing was written"),
    (signal.SIGTERM, 143, "interrupted by SIGTERM: nothing was written"),
])
def test_stop_signals_in_summary(sig: int, code: int, line: str, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from stepscope.commands import summary_cmd

    def hit(*args: object, **kwargs: object) -> object:
        try:
            os.kill(os.getpid(), sig)
        except KeyboardInterrupt:
            raise duckdb.InterruptException("INTERRUPT Error: Interrupted!") from None
        raise AssertionError("no signal")

    monkeypatch.setattr(summary_cmd, "Store", hit)
    rc, _, err = cli("summary", "--db", tmp_path / "db.duckdb")
    assert rc == code and err == [line], err


@pytest.mark.parametrize("shadow", ["re.py", "typing.py", "argparse.py"])
def test_shadowing_modules_in_the_current_folder(shadow: str, tmp_path: Path) -> None:
    (tmp_path / shadow).write_text("raise SystemExit(3)\n")
    proc = subprocess.run([sys.executable, "-m", "stepscope", "--version"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("stepscope "), proc


# ---------------------------------------------------------------- terminal escapes
def test_a_file_name_with_escapes_never_reaches_stdout_raw(tmp_path: Path) -> None:
    folder = job(tmp_path / "t")
    write_trace(folder / "rank9\x1b]0;x\x07.json", b"not json")
    rc, out, err = cli("report", folder)
    assert rc == 3 and "\x1b" not in out and "\x07" not in out
    assert all("\x1b" not in e for e in err)


def test_dashboard_links_chained_through_the_root_are_refused(tmp_path: Path) -> None:
    from stepscope.dashboard.app.uploads import links_outside

    root = tmp_path / "root"
    folder = job(root / "j")
    (root / "hop").symlink_to(tmp_path / "outside.json")
    (folder / "rank5.json").symlink_to(root / "hop")
    (folder / "rank6.json").symlink_to("../../outside.json")
    assert links_outside(folder, root.resolve()) == [folder / "rank5.json",
                                                     folder / "rank6.json"]
