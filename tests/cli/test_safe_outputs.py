"""Hardening, round 2 (issue 24): outputs never destroy inputs, one bad file or name never
sinks a run, nothing is skipped in silence, every number is honest, every stop signal
cleans up. One test per class of hostile input; each asserts the exit code, that every
message is one line (no traceback, no "internal error") and what is on disk after.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import shutil
import stat
import struct
import subprocess
import sys
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from conftest import SAMPLES, kineto_trace, q, write_trace

import stepscope
from stepscope.cli import main
from stepscope.ingest import limits, read_trace

pytestmark = pytest.mark.slow  # every case runs the CLI end to end on ingested runs

SIM = SAMPLES.parent / "simulated"
START = 1_700_000_000_000_000_000
DAY_NS = 86_400 * 10**9


def cli(*argv: str | Path) -> tuple[int, str, list[str]]:
    """Run the CLI in-process: (exit code, stdout, stderr lines); never a traceback."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in argv])
    lines = err.getvalue().splitlines()
    assert not any("Traceback" in x or "internal error" in x for x in lines), lines
    return rc, out.getvalue(), lines


def job(folder: Path, world: int = 2, base_ns: int = START, **kwargs: Any) -> Path:
    for r in range(world):
        write_trace(folder / f"rank{r}.json.gz",
                    kineto_trace(rank=r, world_size=world, base_ns=base_ns, **kwargs))
    return folder


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database that already holds two good runs, 'a' and 'b' (the audit's setting)."""
    root = tmp_path_factory.mktemp("two_runs")
    db = root / "db.duckdb"
    stepscope.ingest_run([job(root / "a")], db=db, run="a")
    stepscope.ingest_run([job(root / "b", base_ns=START + DAY_NS)], db=db, run="b")
    return db


def _copy_db(two_runs: Path, tmp_path: Path) -> Path:
    db = tmp_path / "db.duckdb"
    shutil.copy(two_runs, db)
    return db


# ------------------------------------------------------------------ §1 nothing lost
def test_an_output_never_replaces_the_database_or_an_input(two_runs: Path,
                                                           tmp_path: Path) -> None:
    db = _copy_db(two_runs, tmp_path)
    trace = write_trace(tmp_path / "r0.json.gz", kineto_trace(rank=0, world_size=1))
    folder = job(tmp_path / "traces")
    (folder / "notes.json").write_text("{}")
    other_db = tmp_path / "other.duckdb"
    shutil.copy(two_runs, other_db)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"n_params": 7e9, "n_layers": 2, "hidden": 2048,
                                "seq_len": 2048, "global_batch_tokens": 65536}))
    kernels = tmp_path / "kernels.json"
    kernels.write_text('{"version": "mine", "patterns": []}')
    nightly_spec = folder / "report.md"  # a --model file where nightly writes
    nightly_spec.write_text(spec.read_text())
    cases = {
        "report --out its --model file": ("report", "a", "--db", db, "--model", spec,
                                          "--out", spec),
        "diff --out its --model file": ("diff", "a", "b", "--db", db, "--model", spec,
                                        "--out", spec),
        "plan --from RUN --out the database": ("plan", "--from", "a", "--db", db, "--out", db),
        "plan --from RUN --out its --model file": ("plan", "--from", "a", "--db", db,
                                                   "--model", spec, "--out", spec),
        "report --out its --comm-kernels file": ("report", "a", "--db", db, "--comm-kernels",
                                                 kernels, "--out", kernels),
        "nightly --out-dir holding its --model file": (
            "nightly", tmp_path / "traces" / "rank0.json.gz", "--job", "j", "--db",
            tmp_path / "n.duckdb", "--model", nightly_spec, "--out-dir", folder),
        "report --out the database": ("report", "a", "--db", db, "--out", db),
        "report --out the database's wal": ("report", "a", "--db", db, "--out",
                                            tmp_path / "db.duckdb.wal"),
        "diff --format json --out the database": ("diff", "a", "b", "--db", db, "--format",
                                                  "json", "--out", db),
        "report TRACE --out TRACE": ("report", trace, "--out", trace),
        "report FOLDER --out a file in it": ("report", folder, "--out", folder / "notes.json"),
        "report --out another DuckDB database": ("report", "a", "--db", db, "--out", other_db),
        "hang FOLDER --out a trace in it": ("hang", folder, "--out", folder / "rank0.json.gz"),
        "plan --out a DuckDB database": ("plan", "--params", "7e9", "--gpus", "8", "--gpu",
                                         "H100", "--seq", "4096", "--out", other_db),
        "nightly --out-dir the input folder": ("nightly", folder, "--job", "j", "--db",
                                               tmp_path / "n.duckdb", "--out-dir", folder),
    }
    (folder / "report.json").write_text("{}")  # nightly would replace it
    guarded = [db, trace, other_db, spec, kernels, *sorted(folder.iterdir())]
    before = {p: p.read_bytes() for p in guarded}
    for name, argv in cases.items():
        rc, out, err = cli(*argv)
        assert rc == 2 and len(err) == 1 and "writing there would" in err[0], (name, err)
    assert {p: p.read_bytes() for p in guarded} == before
    assert not (tmp_path / "db.duckdb.wal").exists()
    assert not (tmp_path / "n.duckdb").exists()  # refused before any work


@pytest.mark.parametrize("out", ["/dev/stdout", "/dev/fd/1"])
def test_stdout_through_a_pipe(two_runs: Path, tmp_path: Path, out: str) -> None:
    """`--out /dev/stdout | less`: /dev/stdout is a link to the pipe (/proc/PID/fd/pipe:[N]),
    which no folder check or probe file may follow (it did: exit 2, 'cannot write there')."""
    db = _copy_db(two_runs, tmp_path)
    done = subprocess.run([sys.executable, "-P", "-m", "stepscope", "report", "a", "--db",
                           str(db), "--out", out], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.startswith("# stepscope report: a")


def test_outputs_are_atomic_and_special_files_are_written_into(
        two_runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    db = _copy_db(two_runs, tmp_path)
    # a link: its target gets the report, the link stays a link
    (tmp_path / "target.md").write_text("old")
    (tmp_path / "link.md").symlink_to("target.md")
    assert main(["report", "a", "--db", str(db), "--out", str(tmp_path / "link.md")]) == 0
    assert (tmp_path / "link.md").is_symlink()
    assert (tmp_path / "target.md").read_text().startswith("# stepscope report: a")
    # a character device is written into, never replaced
    assert main(["report", "a", "--db", str(db), "--out", "/dev/null"]) == 0
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    # /dev/stdout writes to this process's stdout; the link in /dev stays
    capsys.readouterr()
    assert main(["report", "a", "--db", str(db), "--out", "/dev/stdout"]) == 0
    assert capsys.readouterr().out.startswith("# stepscope report: a")
    assert os.path.islink("/dev/stdout")
    # a FIFO receives the report (a reader drains it)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    assert main(["report", "a", "--db", str(db), "--out", str(fifo)]) == 0
    reader.join(timeout=60)
    assert got and got[0].startswith(b"# stepscope report: a") and stat.S_ISFIFO(
        os.stat(fifo).st_mode)
    # a failed write (disk full) leaves the old file as it was and no temporary file
    out = tmp_path / "r.md"
    out.write_text("the old report")

    def full(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    capsys.readouterr()
    assert main(["report", "a", "--db", str(db), "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {out}: could not be written (No space left on device); an "
                   "earlier file there is unchanged"]
    assert out.read_text() == "the old report"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".r.md")) == []


def test_nightly_runs_are_told_apart_by_content_and_replacements_announced(
        tmp_path: Path) -> None:
    night1 = job(tmp_path / "n1")
    night2 = job(tmp_path / "n2")  # same start, other content: slower kernels on rank 1
    slow = kineto_trace(rank=1, world_size=2, base_ns=START)
    for e in slow["traceEvents"]:
        if e.get("cat") == "kernel":
            e["dur"] *= 1.5
    write_trace(night2 / "rank1.json.gz", slow)
    db = tmp_path / "n.duckdb"
    common = ("--job", "llm", "--db", db, "--quiet")
    rc1, _, err1 = cli("nightly", night1, *common, "--out-dir", tmp_path / "o1")
    rc2, _, err2 = cli("nightly", night2, *common, "--out-dir", tmp_path / "o2")
    assert (rc1, rc2, err1, err2) == (0, 0, [], [])
    runs = q(db, "SELECT run FROM history ORDER BY run")
    assert len(runs) == 2 and len({r[0].rsplit("-", 1)[0] for r in runs}) == 1  # same start
    rc, _, err = cli("nightly", night2, *common, "--out-dir", tmp_path / "o3")
    assert rc == 0 and len(err) == 1 and err[0].startswith("note: replaced run 'llm-")
    assert "the same traces were ingested before" in err[0]
    assert len(q(db, "SELECT run FROM history")) == 2
    # `ingest` announces a replaced run too, even with --quiet
    rc, _, err = cli("ingest", night1, "--db", db, "--run", runs[0][0], "--quiet")
    assert rc == 0 and err == [f"note: replaced run '{runs[0][0]}' in {db}: the earlier "
                               f"ingest of that name{err[0].split('name', 1)[1]}"]
    assert "is gone (give another --run to keep both)" in err[0]


# ------------------------------------------------------------ §3 per-file overhead, memory
def test_default_trace_limit_follows_the_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    gib = 1 << 30
    for memory, limit in ((24 * gib, 3 * gib), (128 * gib, 8 * gib), (1 * gib, 256 << 20),
                          (None, 8 * gib)):
        monkeypatch.setattr(limits, "usable_memory_bytes", lambda m=memory: m)
        assert limits.default_max_trace_bytes() == limit
    assert limits.DEFAULT_MAX_TRACE_BYTES <= 8 * gib


def test_parsing_memory_stays_within_the_documented_factor(tmp_path: Path) -> None:
    """Peak RSS of a process reading one trace, measured: below the import baseline plus
    TEXT_MEMORY_FACTOR x the JSON text (what the default limit assumes)."""
    trace = kineto_trace(rank=0, world_size=2, steps=1)
    steps = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    events = [dict(e, ts=e["ts"] + 1000.0 * s,
                   name=f"ProfilerStep#{s + 1}" if e["name"].startswith("ProfilerStep")
                   else e["name"]) for s in range(3000) for e in steps]
    big = write_trace(tmp_path / "big.json", dict(trace, traceEvents=events))
    text = big.stat().st_size
    code = ("import resource, sys; from pathlib import Path; import stepscope.ingest as i; "
            "base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss; "
            "i.read_trace(Path(sys.argv[1])); "
            "print(base, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", code, str(big)], capture_output=True,
                         text=True, check=True, env={**os.environ, "STEPSCOPE_JOBS": "1"})
    base_kb, peak_kb = map(int, out.stdout.split())
    assert text > 5 << 20
    assert (peak_kb - base_kb) * 1024 < limits.TEXT_MEMORY_FACTOR * text, (base_kb, peak_kb)


# ------------------------------------------------------- §4 one bad file never sinks the run
def _zip_with_bad_member(path: Path, bad: str, flag: int = 0, method: int | None = None) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for r in range(2):
            zf.writestr(f"z/rank{r}.json", json.dumps(kineto_trace(rank=r, world_size=4)))
    data = bytearray(path.read_bytes())
    name = bad.encode()
    # (signature, offset of the flags, of the name's length, of the name): local, central
    for sig, flag_at, len_at, name_at in ((b"PK\x03\x04", 6, 26, 30),
                                          (b"PK\x01\x02", 8, 28, 46)):
        i = data.find(sig)
        while i >= 0:
            n = struct.unpack("<H", data[i + len_at:i + len_at + 2])[0]
            if bytes(data[i + name_at:i + name_at + n]) == name:
                old, = struct.unpack("<H", data[i + flag_at:i + flag_at + 2])
                data[i + flag_at:i + flag_at + 2] = struct.pack("<H", old | flag)
                if method is not None:
                    data[i + flag_at + 2:i + flag_at + 4] = struct.pack("<H", method)
            i = data.find(sig, i + 4)
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("kind", ["encrypted", "deflate64"])
def test_an_unreadable_archive_member_fails_alone(kind: str, tmp_path: Path) -> None:
    archive = _zip_with_bad_member(tmp_path / "job.zip", "z/rank1.json",
                                   flag=1 if kind == "encrypted" else 0,
                                   method=9 if kind == "deflate64" else None)
    beside = job(tmp_path / "other", world=4, base_ns=START)
    for r in (0, 1):
        (beside / f"rank{r}.json.gz").unlink()  # ranks 2 and 3 of the same job beside it
    db = tmp_path / "z.duckdb"
    rc, _, err = cli("ingest", archive, beside, "--db", db, "--quiet", "--run", "j")
    assert rc == 3 and len(err) == 1, err
    word = "encrypted" if kind == "encrypted" else "compression method"
    assert err[0].startswith(f"error: {archive}!z/rank1.json: archive member ") and word in err[0]
    assert q(db, "SELECT rank FROM ranks ORDER BY rank") == [(0,), (2,), (3,)]


def test_a_truncated_tar_fails_its_last_member_alone_in_one_line(tmp_path: Path) -> None:
    """A tar.gz cut short: the member it cuts fails (one line, not a second one for the
    archive), the members before it ingest."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for r in range(3):
            data = json.dumps(dict(kineto_trace(rank=r, world_size=3),
                                   pad=os.urandom(100_000).hex())).encode()
            info = tarfile.TarInfo(f"t/rank{r}.json")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    archive = tmp_path / "cut.tar.gz"
    archive.write_bytes(gzip.compress(buf.getvalue())[:-5000])
    db = tmp_path / "t.duckdb"
    rc, _, err = cli("ingest", archive, "--db", db, "--quiet")
    assert rc == 3 and err == [f"error: {archive}!t/rank2.json: unreadable archive member "
                               "(EOFError: Compressed file ended before the end-of-stream "
                               "marker was reached)"]
    assert q(db, "SELECT rank FROM ranks ORDER BY rank") == [(0,), (1,)]


def test_odd_names_and_long_run_names_ingest_and_report(tmp_path: Path) -> None:
    folder = tmp_path / os.fsdecode(b"caf\xe9")
    job(folder)
    os.rename(folder / "rank1.json.gz", folder / os.fsdecode(b"rank1\xff.json.gz"))
    db = tmp_path / "o.duckdb"
    rc, out, err = cli("ingest", folder, "--db", db)
    assert rc == 0 and err == [] and "ingested run 'caf\\xe9': 2 rank(s)" in out
    # stored and shown quoted, with the bytes that are not UTF-8 escaped
    assert q(db, "SELECT count(*) FROM ranks WHERE source_file LIKE "
                 r"'%caf\xe9/rank1\xff.json.gz'''") == [(1,)]
    long = "r" * 300
    assert cli("ingest", folder, "--db", db, "--run", long, "--quiet")[0] == 0
    rc, out, err = cli("report", long, "--db", db)
    assert rc == 0 and out.startswith(f"# stepscope report: {long}"), err
    rc, out, err = cli("diff", long, "caf\\xe9", "--db", db, "--format", "json")
    assert rc == 0 and json.loads(out)["b"]["run"] == "caf\\xe9", err
    rc, _, err = cli("ingest", folder, "--db", db, "--run", "a\nb")
    assert rc == 2 and err == ["error: --run 'a\\nb': a run name must be printable text "
                               "(no newlines, escape codes or bytes that are not UTF-8)"]
    odd_db = tmp_path / os.fsdecode(b"caf\xe9.duckdb")  # DuckDB takes UTF-8 names only
    rc, _, err = cli("ingest", folder, "--db", odd_db, "--quiet")
    assert rc == 2 and err == [f"error: '{tmp_path}/caf\\xe9.duckdb': DuckDB cannot open a "
                               "file whose name is not UTF-8; rename it, or give --db "
                               "another name"]
    assert not odd_db.exists()
    # nightly's report folder is named by the run: too long a name is one usage line,
    # found before the night is ingested
    rc, _, err = cli("nightly", folder, "--job", "j", "--run", long, "--db", db, "--quiet")
    assert rc == 2 and len(err) == 1 and err[0].endswith(
        "cannot create it (File name too long); give a shorter --job or --run, or an "
        "--out-dir"), err
    assert q(db, "SELECT count(*) FROM history") == [(0,)]


def test_shapes_beyond_any_integer_never_crash_a_command(two_runs: Path, tmp_path: Path) -> None:
    trace = kineto_trace(rank=0, world_size=2)
    for e in trace["traceEvents"]:
        if e.get("name") == "aten::mm":
            e["args"]["Input Dims"] = [[2**62, 2**62], [2**62, 2**62]]  # DECIMAL overflow
            break
    folder = tmp_path / "huge"
    write_trace(folder / "rank0.json.gz", trace)
    write_trace(folder / "rank1.json.gz", kineto_trace(rank=1, world_size=2))
    db = _copy_db(two_runs, tmp_path)
    assert cli("ingest", folder, "--db", db, "--quiet")[0] == 0
    for argv in (("report", "huge", "--format", "json"), ("diff", "a", "huge"),
                 ("nightly", folder, "--job", "h", "--out-dir", tmp_path / "out", "--quiet")):
        rc, out, err = cli(*argv, "--db", db)
        assert rc == 0, (argv, err)
    from stepscope.analyzers.report import build_report
    from stepscope.dashboard.app.data import with_connection
    report = with_connection(db, lambda con: build_report(con, "huge", None, None, None))
    assert report.mfu.mfu is not None and 0 < report.mfu.mfu <= 1


def test_the_dashboard_shows_a_run_with_absurd_shapes(two_runs: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The same hostile shape in the dashboard: every run page renders, no error, the
    overview's MFU is the report's (within 100%)."""
    from dashboard_helpers import app_test, no_exception, texts

    from stepscope.dashboard.app.views import RUN_PAGES

    folder = _two_ranks_with_matmul_of(tmp_path / "huge", 2**62)
    db = _copy_db(two_runs, tmp_path)
    assert cli("ingest", folder, "--db", db, "--quiet")[0] == 0
    for page in RUN_PAGES:
        at = app_test(monkeypatch, db, page=page, run="huge").run()
        no_exception(at)
        assert not at.error, (page, [e.value for e in at.error])
    at = app_test(monkeypatch, db, page="overview", run="huge").run()
    shown = [m.value for m in at.metric if m.label.startswith("MFU")]
    assert shown and all(v.endswith("%") and float(v.rstrip("%")) <= 100 for v in shown), \
        texts(at)


@pytest.mark.parametrize(("field", "value"), [("ts", 1e19), ("dur", "NaN"), ("dur", 1e300)])
def test_an_event_time_beyond_64_bits_fails_its_file_alone(field: str, value: object,
                                                           tmp_path: Path) -> None:
    trace = kineto_trace(rank=0, world_size=2)
    next(e for e in trace["traceEvents"] if e.get("cat") == "kernel")[field] = value
    folder = tmp_path / "t"
    write_trace(folder / "rank0.json.gz", trace)
    write_trace(folder / "rank1.json.gz", kineto_trace(rank=1, world_size=2))
    db = tmp_path / "t.duckdb"
    rc, _, err = cli("ingest", folder, "--db", db, "--quiet")
    assert rc == 3 and len(err) == 1, err
    assert err[0].startswith(f"error: {folder}/rank0.json.gz: an event's time (ts or dur) is "
                             "not a number or out of range"), err
    assert q(db, "SELECT rank FROM ranks") == [(1,)]


def test_database_and_disk_failures_are_one_line(two_runs: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    folder = job(tmp_path / "t")
    good = tmp_path / "good.duckdb"
    shutil.copy(two_runs, good)
    half = tmp_path / "half.duckdb"
    half.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    for argv in (("summary",), ("report", "a"), ("ingest", folder, "--quiet")):
        rc, _, err = cli(*argv, "--db", half)
        assert rc == 2 and len(err) == 1 and "not a readable DuckDB file" in err[0], (argv, err)
    for limit in ("4MB", "lots"):  # too small to open a database; not a size
        monkeypatch.setenv("STEPSCOPE_MEMORY_LIMIT", limit)
        rc, _, err = cli("ingest", SIM / "healthy", "--db", tmp_path / "m.duckdb", "--quiet")
        assert rc == 2 and len(err) == 1 and (
            f"cannot open the database with $STEPSCOPE_MEMORY_LIMIT='{limit}'") in err[0], err
        assert err[0].endswith("give a size such as 2GB (default 1GB)")
    # big enough to open, too small to ingest: the query's out-of-memory, one line
    from stepscope.ingest import db_errors

    line = str(db_errors.explain(duckdb.OutOfMemoryException("Out of Memory Error: x\ny"),
                                 tmp_path / "m.duckdb"))
    assert line.startswith("out of memory in the database at its limit "
                           "($STEPSCOPE_MEMORY_LIMIT=lots)") and "\n" not in line
    monkeypatch.delenv("STEPSCOPE_MEMORY_LIMIT")
    assert q(good, "SELECT count(*) FROM runs") == [(2,)]


@contextlib.contextmanager
def _tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A small file system of its own (root, Linux); skips the test where it cannot be."""
    where.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
            capture_output=True).returncode != 0:
        pytest.skip("needs to mount a small tmpfs (root on Linux)")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_full_disk_and_read_only_folders_are_one_line(two_runs: Path, tmp_path: Path) -> None:
    folder = job(tmp_path / "t")
    with _tmpfs(tmp_path / "full", "600k") as full:
        rc, _, err = cli("ingest", SIM / "healthy", "--db", full / "db.duckdb", "--quiet")
        assert rc == 1 and len(err) == 1 and err[0].startswith("error: the disk is full"), err
    with _tmpfs(tmp_path / "ro", "30m") as ro:
        shutil.copy(two_runs, ro / "db.duckdb")
        subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
        rc, _, err = cli("ingest", folder, "--db", ro / "db.duckdb", "--quiet")
        assert rc == 2 and len(err) == 1 and "Read-only file system" in err[0], err
        rc, out, err = cli("report", "a", "--db", ro / "db.duckdb")
        assert rc == 0 and out.startswith("# stepscope report: a")  # reading still works
    db = _copy_db(two_runs, tmp_path)
    with _tmpfs(tmp_path / "out", "20k") as out_dir:
        rc, _, err = cli("nightly", folder, "--job", "j", "--db", db, "--out-dir", out_dir,
                         "--quiet")
        assert rc == 1 and len(err) == 1 and "history committed), but its reports were " \
            "not written" in err[0] and "No space left on device" in err[0], err
    assert len(q(db, "SELECT run FROM history")) == 1


def test_a_damaged_database_is_one_line_in_the_dashboard(
        two_runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dashboard_helpers import app_test

    half = tmp_path / "half.duckdb"
    half.write_bytes(two_runs.read_bytes()[: two_runs.stat().st_size // 2])
    at = app_test(monkeypatch, half).run()
    assert not at.exception
    errors = [str(e.value) for e in at.error]
    assert len(errors) == 1 and "not a readable DuckDB file" in errors[0], errors
    assert "\n" not in errors[0]


# --------------------------------------------------------- §5 nothing skipped in silence
def test_an_unreadable_folder_is_a_failure_not_a_skip(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    folder = job(tmp_path / "j", world=4)
    locked = folder / "more"
    locked.mkdir()
    for r in (2, 3):
        os.rename(folder / f"rank{r}.json.gz", locked / f"rank{r}.json.gz")
    if os.geteuid() == 0:  # root reads every folder: make listing this one fail
        real_scandir = os.scandir

        def scandir(path: Any = ".") -> Any:
            if isinstance(path, str | bytes | os.PathLike) and \
                    Path(os.fsdecode(path)) == locked:
                raise PermissionError(13, "Permission denied", str(path))
            return real_scandir(path)

        monkeypatch.setattr(os, "scandir", scandir)
    else:
        locked.chmod(0)
    try:
        rc, _, err = cli("ingest", folder, "--db", tmp_path / "u.duckdb", "--quiet")
    finally:
        locked.chmod(0o755)
    assert rc == 3 and err == [f"error: {locked}: cannot read this folder (permission "
                               "denied); the traces in it were not ingested (fix its "
                               "permissions, or leave it out)"]
    assert q(tmp_path / "u.duckdb", "SELECT status, n_ranks FROM runs") == [("partial", 2)]


@pytest.mark.parametrize("expr", ["step_time_ms > 1e999", "mfu.mfu < -1e400"])
def test_thresholds_must_be_finite(expr: str, tmp_path: Path) -> None:
    rc, _, err = cli("nightly", job(tmp_path / "t"), "--job", "j", "--db",
                     tmp_path / "n.duckdb", "--fail-if", expr)
    assert rc == 2 and len(err) == 1 and "is not a finite number" in err[0]
    assert not (tmp_path / "n.duckdb").exists()


def test_two_jobs_in_one_folder_are_refused_and_one_folder_twice_is_one(
        two_runs: Path, tmp_path: Path) -> None:
    mixed = tmp_path / "mixed"
    job(mixed / "old", world=2, base_ns=START)
    job(mixed / "new", world=4, base_ns=START + 30 * DAY_NS)
    same_size = tmp_path / "same_size"  # same world size, a month apart
    job(same_size / "old", world=2, base_ns=START)
    job(same_size / "new", world=2, base_ns=START + 30 * DAY_NS)
    db = _copy_db(two_runs, tmp_path)
    for folder in (mixed, same_size):
        rc, _, err = cli("ingest", folder, "--db", db, "--quiet")
        assert rc == 1 and len(err) == 1, err
        assert "the traces are of 2 different jobs" in err[0] and "job 2:" in err[0]
        assert "the database is unchanged" in err[0]
    assert q(db, "SELECT run FROM runs ORDER BY run") == [("a",), ("b",)]
    # one stray file (another job's trace, or a damaged one) never sinks the run
    stray = job(tmp_path / "stray", world=4)
    write_trace(stray / "old" / "rank9.json.gz",
                kineto_trace(rank=9, world_size=16, base_ns=START - 400 * DAY_NS))
    rc, _, err = cli("ingest", stray, "--db", db, "--quiet")
    assert rc == 0 and len(err) == 1, err
    assert err[0].startswith(f"warning: {stray}/old/rank9.json.gz: does not look like the "
                             "other traces of run 'stray' (1 file(s), world size 16")
    assert "the others: 4 file(s), world size 4" in err[0]
    one = job(tmp_path / "one")
    rc, _, err = cli("ingest", one, one, one / "rank0.json.gz", "--db", db, "--quiet",
                     "--run", "twice")
    assert (rc, err) == (0, [])
    assert q(db, "SELECT status, n_ranks FROM runs WHERE run = 'twice'") == [("complete", 2)]


def test_a_file_name_cannot_break_or_forge_a_message_line(tmp_path: Path) -> None:
    folder = job(tmp_path / "n")
    forged = "rank1\nerror: all good\x1b[2K\u202e.json"
    (folder / "rank1.json.gz").rename(folder / forged)
    (folder / forged).write_text('{"traceEvents": [}')
    rc, _, err = cli("ingest", folder, "--db", tmp_path / "f.duckdb", "--quiet")
    assert rc == 3 and len(err) == 1, err
    assert err[0].startswith(f"error: '{folder}/rank1\\nerror: all good\\x1b[2K\\u202e.json': ")
    assert all(ch.isprintable() for ch in err[0])


def test_a_nested_trace_events_key_is_not_the_top_level_one(tmp_path: Path) -> None:
    trace = kineto_trace(rank=0, world_size=1)
    doc = {"schemaVersion": 1, "meta": {"traceEvents": [{"x": 1}]}, **trace}
    path = write_trace(tmp_path / "t.json", json.dumps(doc))
    tables = read_trace(path)
    assert tables.n_events == len(trace["traceEvents"])
    assert tables.distributed_info is not None and tables.distributed_info["world_size"] == 1


def _two_ranks_with_matmul_of(folder: Path, n: int) -> Path:
    """A two-rank run whose rank 0 has one aten::mm of n x n by n x n (`Input Dims`)."""
    trace = kineto_trace(rank=0, world_size=2)
    mm = next(e for e in trace["traceEvents"] if e.get("name") == "aten::mm")
    mm["args"]["Input Dims"] = [[n, n], [n, n]]
    write_trace(folder / "rank0.json.gz", trace)
    write_trace(folder / "rank1.json.gz", kineto_trace(rank=1, world_size=2))
    return folder


def test_impossible_flops_are_named_and_mfu_never_above_100(tmp_path: Path) -> None:
    folder = _two_ranks_with_matmul_of(tmp_path / "absurd", 2**40)
    rc, out, err = cli("report", folder, "--format", "json")
    assert rc == 0, err
    mfu = json.loads(out)["mfu"]
    assert mfu["implausible_op_count"] == 1
    odd = mfu["implausible_ops"][0]
    assert (odd["name"], odd["rank"], odd["step"]) == ("aten::mm", 0, 1)
    assert odd["flops"] == pytest.approx(2.0 * 2**120, rel=1e-9)
    assert odd["kernel_ms"] == pytest.approx(0.2) and odd["times_peak"] > 1e20
    assert "1 op(s) left out of the model FLOPs" in mfu["message"]
    # what remains is the same run's FLOPs less that one matmul (64x128x256) of step 1
    rc, out, _ = cli("report", job(tmp_path / "clean"), "--format", "json")
    good = json.loads(out)
    steps = good["per_rank"][0]["n_steps"]
    assert mfu["model_flops_per_step"] == pytest.approx(
        good["mfu"]["model_flops_per_step"] - 2.0 * 64 * 128 * 256 / steps)
    assert 0 < mfu["mfu"] <= 1 and 0 < mfu["hfu"] <= 1
    spec = tmp_path / "huge.json"
    spec.write_text(json.dumps({"n_params": 1e15, "n_layers": 2, "hidden": 2048,
                                "seq_len": 2048, "global_batch_tokens": 65536}))
    rc, out, err = cli("report", folder, "--format", "json", "--model", spec)
    mfu = json.loads(out)["mfu"]
    assert rc == 0 and mfu["mfu"] is None and mfu["hfu"] is None
    assert mfu["message"].startswith("MFU would be ") and "above 100% of the peak" in \
        mfu["message"] and "the model spec (--model)" in mfu["message"]


# ------------------------------------------------------------- §6 processes and temp files
def _wait_for(check: Any, what: str, proc: subprocess.Popen[str] | None = None,
              limit_s: float = 120) -> None:
    import time

    deadline = time.monotonic() + limit_s
    while not check():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"exited before {what}: {proc.communicate()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"never {what}")
        time.sleep(0.05)


@pytest.mark.parametrize(("sig", "code"), [("SIGTERM", 143), ("SIGHUP", 129)])
def test_a_stop_signal_during_an_ingest_leaves_no_temporary_files(
        sig: str, code: int, tmp_path: Path) -> None:
    import signal

    folder = job(tmp_path / "many", world=24)
    archive = tmp_path / "many.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for f in sorted(folder.iterdir()):
            zf.write(f, f.name)
    temp = tmp_path / "temp"
    temp.mkdir()
    db = tmp_path / "s.duckdb"
    env = {**os.environ, "TMPDIR": str(temp), "STEPSCOPE_JOBS": "2"}
    for argv, marker in ((["ingest", str(archive), "--db", str(db)], "stepscope-stage-"),
                         (["report", str(archive)], "stepscope-unpack-")):
        proc = subprocess.Popen([sys.executable, "-m", "stepscope", *argv, "--quiet"]
                                if argv[0] == "ingest" else
                                [sys.executable, "-m", "stepscope", *argv],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                env=env, start_new_session=True)
        try:
            _wait_for(lambda m=marker: any(p.name.startswith(m) for p in temp.iterdir()),
                      f"made its {marker} folder", proc)
            os.kill(proc.pid, getattr(signal, sig))
            _, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == code, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"interrupted by {sig}: "), lines
        assert sorted(p.name for p in temp.iterdir()) == []
    assert not db.exists() or q(db, "SELECT count(*) FROM runs") == [(0,)]


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as fh:
        return [int(p) for p in fh.read().split()]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[-1].startswith("Z")  # a zombie serves nothing
    except OSError:
        return True


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc")
@pytest.mark.parametrize("how", ["SIGTERM", "SIGHUP", "SIGINT with SIGINT ignored",
                                 "SIGKILL"])
def test_every_stop_signal_stops_the_dashboard_server(how: str, tmp_path: Path) -> None:
    import signal
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    def ignore_sigint() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # what `cmd &` in a script does

    proc = subprocess.Popen(
        [sys.executable, "-m", "stepscope", "dashboard", "--port", str(port), "--db",
         str(tmp_path / "d.duckdb")], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
        preexec_fn=ignore_sigint if "ignored" in how else None)

    def serving() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health",
                                        timeout=2) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    try:
        _wait_for(serving, "served", proc)
        server = _children(proc.pid)
        assert server
        os.kill(proc.pid, getattr(signal, how.split()[0]))
        _, err = proc.communicate(timeout=60)
        _wait_for(lambda: all(_gone(p) for p in server), "stopped its server", limit_s=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not serving()
    if how != "SIGKILL":
        assert proc.returncode == 0 and err.strip().endswith("stepscope dashboard stopped"), err


def test_the_dashboard_upload_names_a_bad_member_and_announces_a_replace(
        two_runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same inputs through the Upload page: an encrypted archive member fails alone
    (named as uploaded), a stray trace is a warning, re-using a run's name says so."""
    from dashboard_helpers import app_test, no_exception, texts, upload

    from stepscope.dashboard.app.widgets import plain

    archive = _zip_with_bad_member(tmp_path / "job.zip", "z/rank1.json", flag=1)
    stray = json.dumps(kineto_trace(rank=9, world_size=16, base_ns=START - 400 * DAY_NS))
    db = _copy_db(two_runs, tmp_path)
    at = app_test(monkeypatch, db, page="upload").run()
    beside = [(f"rank{r}.json", json.dumps(kineto_trace(rank=r, world_size=4)).encode())
              for r in (2, 3)]
    upload(at, [("job.zip", archive.read_bytes()), *beside, ("old.json", stray.encode())],
           "a")
    no_exception(at)
    shown = texts(at)
    assert ("Run 'a' ingested PARTIALLY: 4 rank(s); 1 of 5 file(s) failed (it replaced the "
            "earlier run of that name)") in shown, shown
    assert "upload:job.zip!z/rank1.json" in shown and "encrypted" in shown
    warnings = [str(w.value) for w in at.warning]  # Markdown: the file name escaped
    assert any(w.startswith(f"{plain('upload:old.json')}: does not look like the other "
                            "traces") and
               "\n" not in w for w in warnings), warnings
    assert q(db, "SELECT run, n_ranks FROM runs ORDER BY run") == [("a", 4), ("b", 2)]
