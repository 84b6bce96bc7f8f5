"""Hardening, round 3 (issue 43): nothing written outside its place, the machine's
failures are not a file's, bounded work on every input, Ray that stays local, terminal
escapes, validation. Each test pins the one line on stderr and the exit code of the
README's table (0 ok, 1 nothing done, 2 usage, 3 partial, 143 SIGTERM), with fixtures of
its own; the disk-full and out-of-memory cases raise the error where the machine would
(monkeypatched, inline executor), never by filling a disk.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import io
import json
import os
import pickle
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import duckdb
import pytest
from conftest import kineto_trace, write_trace

from stepscope.cli import main
from stepscope.ingest import sources
from stepscope.ingest.errors import terminal_safe
from stepscope.ingest.nccl import safe_pickle

START = 1_700_000_000_000_000_000


def cli(*argv: str | Path) -> tuple[int, str, list[str]]:
    """Run the CLI in-process: (exit code, stdout, stderr lines); never a traceback."""
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


def runs_in(db: Path) -> list[tuple[str, str]]:
    if not db.exists():
        return []
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT run, status FROM runs ORDER BY run").fetchall()
    finally:
        con.close()


# ------------------------------------------------------------ writes outside their place
@pytest.mark.parametrize("out_dir", [False, True])
@pytest.mark.parametrize("run", ["../../x", "/abs/night", "a/b", "..", ".", ".hidden", "./..",
                                 "a b", "r\n"])
def test_nightly_run_must_be_one_folder_name(run: str, out_dir: bool, tmp_path: Path) -> None:
    """With or without --out-dir (issue 43): a run name is one folder name."""
    more = ["--out-dir", tmp_path / "n"] if out_dir else []
    rc, _, err = cli("nightly", job(tmp_path / "t"), "--job", "j", "--run", run,
                     "--db", tmp_path / "db.duckdb", "--quiet", *more)
    assert rc == 2 and len(err) == 1 and err[0].startswith("error: --run '") \
        and "one folder name, no '/', not '.' or '..'" in err[0], err
    assert not (tmp_path / "db.duckdb").exists() and not (tmp_path / "n").exists()


def test_dashboard_refuses_a_folder_linking_outside_the_traces_root(tmp_path: Path) -> None:
    from stepscope.dashboard.app.uploads import links_outside, resolve_under

    root = tmp_path / "root"
    folder = job(root / "job")
    secret = tmp_path / "secret.json"
    secret.write_text('{"password": 1}')
    (folder / "rank2.json").symlink_to(secret)
    (folder / "inside.json").symlink_to(folder / "rank0.json.gz")  # stays inside: fine
    assert links_outside(folder, root.resolve()) == [folder / "rank2.json"]
    with pytest.raises(Exception, match=r"rank2.json is a link to outside the traces root"):
        resolve_under(root, "job")
    (folder / "rank2.json").unlink()
    assert resolve_under(root, "job") == folder.resolve()


def test_dashboard_db_must_be_a_file_and_server_runs_with_safe_path(tmp_path: Path) -> None:
    rc, _, err = cli("dashboard", "--db", tmp_path)
    assert rc == 2 and len(err) == 1 and "not a database file" in err[0], err
    from stepscope.commands.dashboard_cmd import streamlit_command
    from stepscope.dashboard.app.config import DashboardConfig

    cmd = streamlit_command(DashboardConfig(db=tmp_path / "x.duckdb", traces_root=None,
                                            max_upload_mb=10), "127.0.0.1", 8501)
    assert cmd[1:4] == ["-P", "-m", "streamlit"]


# ------------------------------------------------------- the machine's failures
MACHINE = [
    (OSError(errno.ENOSPC, "No space left on device"), "no space left on the disk"),
    (OSError(errno.EDQUOT, "Disk quota exceeded"), "the disk quota is exceeded"),
    (OSError(errno.ENOMEM, "Cannot allocate memory"), "out of memory"),
    (OSError(errno.EMFILE, "Too many open files"), "too many open files in this process"),
    (OSError(errno.ENFILE, "Too many open files in system"), "too many open files on this"),
    (OSError(errno.EFBIG, "File too large"), "the file size limit is reached"),
    (MemoryError(), "out of memory"),
    (duckdb.OutOfMemoryException("Out of Memory Error: failed to allocate"), "out of memory"),
]


@pytest.mark.parametrize(("exc", "said"), MACHINE, ids=[m[1][:20] for m in MACHINE])
def test_a_machine_failure_in_a_reader_stops_the_ingest(exc: BaseException, said: str,
                                                        tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from stepscope.ingest import reader

    real = reader.mapped_json

    def failing(path: Path, display: str, *args: object, **kwargs: object) -> object:
        if "rank1" in display:
            raise exc
        return real(path, display, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(reader, "mapped_json", failing)
    db = tmp_path / "db.duckdb"
    folder = job(tmp_path / "t", world=3)
    rc, _, err = cli("ingest", folder, "--db", db, "--executor", "inline", "--quiet")
    assert rc == 1 and len(err) == 1, err
    assert err[0].startswith("error: ") and "rank1.json.gz: " + said in err[0] \
        and "(the machine's failure, not the file's)" in err[0] \
        and "nothing was committed" in err[0], err
    assert runs_in(db) == []


def test_a_file_problem_still_fails_that_file_alone(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from stepscope.ingest import reader

    real = reader.mapped_json

    def failing(path: Path, display: str, *args: object, **kwargs: object) -> object:
        if "rank1" in display:
            raise OSError(errno.EIO, "Input/output error")
        return real(path, display, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(reader, "mapped_json", failing)
    db = tmp_path / "db.duckdb"
    rc, _, err = cli("ingest", job(tmp_path / "t"), "--db", db, "--executor", "inline",
                     "--quiet")
    assert rc == 3 and len(err) == 1 and "cannot read the file (Input/output error)" in err[0]
    assert runs_in(db) == [("t", "partial")]


def test_a_full_disk_while_unpacking_an_archive_stops_the_ingest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = tmp_path / "job.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for r in range(2):
            zf.writestr(f"rank{r}.json", json.dumps(kineto_trace(rank=r, world_size=2)))

    def full(*args: object) -> bool:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(sources, "_copy_capped", full)
    db = tmp_path / "db.duckdb"
    rc, _, err = cli("ingest", archive, "--db", db, "--quiet")
    assert rc == 1 and len(err) == 1 and "job.zip!rank0.json: no space left on the disk" \
        in err[0] and "before anything was written" in err[0], err
    assert runs_in(db) == []


def test_a_dangling_rank_link_is_reported(tmp_path: Path) -> None:
    folder = job(tmp_path / "t", world=1)
    (folder / "rank1.json.gz").symlink_to(tmp_path / "gone" / "rank1.json.gz")
    (folder / "notes.txt").symlink_to(tmp_path / "gone.txt")  # not a trace name: ignored
    db = tmp_path / "db.duckdb"
    rc, _, err = cli("ingest", folder, "--db", db, "--quiet")
    assert rc == 3 and len(err) == 1 and "rank1.json.gz: a symbolic link to" in err[0] \
        and "which does not exist" in err[0], err
    assert runs_in(db) == [("t", "partial")]


# ------------------------------------------------------- bounded work on every input
@pytest.mark.parametrize("keys", [
    [i * ((1 << 61) - 1) for i in range(1, 6000)],           # ints that hash alike
    [(i, -i) for i in range(6000)],                            # tuples
    [float(i) + 0.5 for i in range(6000)],                     # floats
    [i.to_bytes(4, "big") for i in range(6000)],               # bytes
])
def test_a_pickle_of_many_odd_dict_keys_is_refused_before_the_dict_is_built(
        keys: list[object]) -> None:
    data = pickle.dumps({"entries": [], "pg_config": dict.fromkeys(keys, 1)})
    with pytest.raises(safe_pickle.TooLargeError, match="dict keys that are neither strings"):
        safe_pickle.load_plain(data)
    # a few such keys, and any number of string or small-int keys, still load
    few = {"a": dict.fromkeys(keys[:100], 1), "b": {str(i): i for i in range(20000)},
           "c": {i: i for i in range(20000)}}
    assert safe_pickle.load_plain(pickle.dumps(few)) == few


def test_a_pickle_with_many_tuples_as_values_still_loads() -> None:
    value = {"entries": [{"input_sizes": (i, i + 1), "state": "completed"}
                         for i in range(6000)]}
    assert safe_pickle.load_plain(pickle.dumps(value)) == value


def test_a_flight_recorder_dump_with_colliding_keys_fails_alone(tmp_path: Path) -> None:
    folder = job(tmp_path / "t")
    dump = {"version": "2.4", "pg_config": {}, "entries": [],
            "junk": dict.fromkeys((i * ((1 << 61) - 1) for i in range(1, 8000)), 0)}
    (folder / "nccl_trace_rank_0").write_bytes(pickle.dumps(dump))
    db = tmp_path / "db.duckdb"
    rc, _, err = cli("ingest", folder, "--db", db, "--quiet")
    assert rc == 3 and len(err) == 1 and "nccl_trace_rank_0" in err[0] \
        and "dict keys that are neither strings nor small integers" in err[0], err


YAML_BOMB = ("a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\nb: &b [*a, *a, *a, *a, *a, *a]\n"
             "n_params: [*b, *b, *b, *b, *b, *b]\n")


@pytest.mark.parametrize("suffix", [".yaml", ".yml"])
def test_a_yaml_alias_in_a_model_spec_is_refused(suffix: str, tmp_path: Path) -> None:
    spec = tmp_path / f"m{suffix}"
    spec.write_text(YAML_BOMB)
    rc, _, err = cli("report", job(tmp_path / "t"), "--model", spec)
    assert rc == 2 and len(err) == 1 and "YAML alias *a at line 2: aliases are not " \
        "accepted in a model spec" in err[0], err


def test_a_long_spec_value_is_shown_short(tmp_path: Path) -> None:
    spec = tmp_path / "m.json"
    spec.write_text(json.dumps({"n_params": list(range(50_000)), "n_layers": 2,
                                "hidden": 8, "seq_len": 8, "global_batch_tokens": 8}))
    rc, _, err = cli("report", job(tmp_path / "t"), "--model", spec)
    assert rc == 2 and len(err) == 1 and "n_params must be a number, not [0, 1, 2, 3, ...]" \
        in err[0] and len(err[0]) < 200, err


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(("make", "said"), [
    (lambda p: Path("/dev/zero"), "not a regular file (a FIFO, socket or device)"),
    (lambda p: _fifo(p / "k.json"), "not a regular file (a FIFO, socket or device)"),
    (lambda p: p, "a folder, not a file"),
    (lambda p: p / "none.json", "no such file"),
    (lambda p: _sparse(p / "big.json", 17 << 20), "larger than 16M"),
])
@pytest.mark.parametrize("option", ["--comm-kernels", "--model"])
def test_option_files_are_type_and_size_checked_without_reading_them(
        make: object, said: str, option: str, tmp_path: Path) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    if option == "--model" and said.startswith("larger"):
        path, said = _sparse(tmp_path / "big.yaml", 2 << 20), "larger than 1M"
    argv = (["ingest", job(tmp_path / "t"), "--db", tmp_path / "db.duckdb"]
            if option == "--comm-kernels" else ["report", job(tmp_path / "t")])
    rc, _, err = cli(*argv, option, path, "--quiet") if option == "--comm-kernels" \
        else cli(*argv, option, path)
    assert rc == 2 and len(err) == 1 and f"{option}: {said}" in err[0], err


def _sparse(path: Path, size: int) -> Path:
    with open(path, "wb") as fh:
        fh.truncate(size)  # a hole: no disk is filled
    return path


def _table(n: int, bad: int | None = None) -> dict[str, object]:
    patterns = [{"pattern": f"^my_kernel_{i}_", "library": "mine", "collective": "send",
                 "op": "send"} for i in range(n)]
    if bad is not None:
        patterns[bad]["pattern"] = "(unclosed"
    return {"patterns": patterns}


def test_many_comm_kernel_patterns_are_checked_on_one_connection(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from stepscope.ingest import comm_kernels

    opened = []
    real = comm_kernels.connect
    monkeypatch.setattr(comm_kernels, "connect", lambda: opened.append(1) or real())
    path = tmp_path / "k.json"
    path.write_text(json.dumps(_table(5000)))
    assert len(comm_kernels.load_user_table(path).patterns) == 5000
    assert len(opened) == 1  # was one connection per pattern: 17 s for 1,000
    path.write_text(json.dumps(_table(3000, bad=2999)))
    with pytest.raises(Exception, match=r"patterns\[2999\]: pattern '\(unclosed' is not"):
        comm_kernels.load_user_table(path)
    path.write_text(json.dumps(_table(comm_kernels.MAX_USER_PATTERNS + 1)))
    rc, _, err = cli("ingest", job(tmp_path / "t"), "--db", tmp_path / "db.duckdb",
                     "--comm-kernels", path)
    assert rc == 2 and len(err) == 1 and "10001 patterns, more than 10,000" in err[0], err


@pytest.mark.parametrize("argv", [
    ["ingest", ""], ["report", ""], ["hang", ""], ["whatif", "", "--rank", "0"],
    ["ingest", "x", "--stage-dir", ""], ["ingest", "x", "--stage-dir="],
    ["ingest", "x", "--db="], ["summary", "--db", ""], ["ingest", "x", "--step-marker", ""],
    ["nightly", "x", "--job", ""], ["ingest", "x", "--ranks", ""],
])
def test_an_empty_argument_is_a_usage_error(argv: list[str], tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    job(tmp_path / "x")
    rc, _, err = cli(*argv)
    assert rc == 2 and len(err) == 1 and err[0].startswith("error: an empty argument") \
        and "(an unset shell variable?)" in err[0], err
    assert not (tmp_path / "stepscope.duckdb").exists()


def test_an_empty_path_in_the_api_is_a_usage_error(tmp_path: Path) -> None:
    import stepscope

    with pytest.raises(stepscope.UsageError, match="an empty trace path"):
        stepscope.ingest_run([""], db=tmp_path / "db.duckdb")


def test_an_archive_unpacks_to_a_bounded_total(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources, "ARCHIVE_FLOOR_BYTES", 1 << 20)
    archive = tmp_path / "bomb.zip"
    pad = b" " * (600 << 10)  # each member 600 KiB of spaces, then a real trace
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for r in range(4):
            zf.writestr(f"rank{r}.json",
                        pad + json.dumps(kineto_trace(rank=r, world_size=4)).encode())
    assert archive.stat().st_size * sources.ARCHIVE_RATIO < 1 << 20  # the floor holds
    db = tmp_path / "db.duckdb"
    rc, _, err = cli("ingest", archive, "--db", db, "--quiet")
    assert rc == 3 and len(err) == 3, err  # 1 MiB: the first member fits, no second one
    assert all("unpacks to more than 100 times its own size (at least 1M): a zip bomb?"
               in line for line in err), err
    assert err[0].startswith("error: ") and "bomb.zip!rank1.json" in err[0]
    assert runs_in(db) == [("bomb", "partial")]


@pytest.mark.parametrize(("lead", "name"), [
    (b" " * (3 << 20), "rank0.json"),            # a MiB boundary is crossed
    (b"\n\t\r " * 5000, "rank0.json.gz"),
    (b"\xef\xbb\xbf" + b" " * 5000, "rank0.json"),  # a BOM, then whitespace
])
def test_a_trace_behind_leading_whitespace_is_read(lead: bytes, name: str,
                                                   tmp_path: Path) -> None:
    folder = tmp_path / "t"
    write_trace(folder / name, lead + json.dumps(kineto_trace(rank=0, world_size=1)).encode())
    db = tmp_path / "db.duckdb"
    rc, _, err = cli("ingest", folder, "--db", db, "--quiet")
    assert rc == 0 and err == [], err
    assert runs_in(db) == [("t", "complete")]


def test_only_whitespace_past_a_mib_is_still_an_empty_file(tmp_path: Path) -> None:
    folder = tmp_path / "t"
    folder.mkdir()
    with gzip.open(folder / "rank0.json.gz", "wb") as fh:
        fh.write(b" " * (2 << 20))
    rc, _, err = cli("ingest", folder, "--db", tmp_path / "db.duckdb", "--quiet")
    assert rc == 1 and "empty file (no JSON in it)" in err[0], err


# ------------------------------------------------------- signals and exit codes
def test_sigterm_during_a_query_of_report_exits_143(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """DuckDB answers a signal that arrives mid-query with its own "Query interrupted"
    error; the command still stops as the signal asked: 143 and one line."""
    from stepscope.commands import report_cmd

    def query_hit_by_sigterm(*args: object, **kwargs: object) -> object:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
        except KeyboardInterrupt:
            raise RuntimeError("Query interrupted") from None
        raise AssertionError("SIGTERM did not arrive")

    monkeypatch.setattr(report_cmd, "report", query_hit_by_sigterm)
    rc, _, err = cli("report", job(tmp_path / "t"))
    assert rc == 143 and err == ["interrupted by SIGTERM: nothing was written"], err


def test_sigterm_in_report_is_not_taken_for_ctrl_c(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from stepscope.commands import report_cmd

    def hit(*args: object, **kwargs: object) -> object:
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("SIGTERM did not arrive")

    monkeypatch.setattr(report_cmd, "report", hit)
    rc, _, err = cli("report", job(tmp_path / "t"))
    assert rc == 143 and err == ["interrupted by SIGTERM: nothing was written"], err


@pytest.mark.parametrize("shadow", ["inspect.py", "json.py", "enum.py"])
def test_python_m_stepscope_ignores_modules_in_the_current_folder(shadow: str,
                                                                  tmp_path: Path) -> None:
    (tmp_path / shadow).write_text("raise SystemExit(3)\n")
    proc = subprocess.run([sys.executable, "-m", "stepscope", "summary", "--db", "x.duckdb"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.strip() == (
        "error: x.duckdb: no stepscope database here; run `stepscope ingest` first"), proc


# ------------------------------------------------------- Ray
@pytest.mark.parametrize("spec", ["ray:", "ray://", "ray:host", "ray://host:0",
                                  "ray:host:70000", "ray://:10001"])
def test_a_ray_executor_without_an_address_is_a_usage_error(spec: str, tmp_path: Path) -> None:
    rc, _, err = cli("ingest", job(tmp_path / "t"), "--db", tmp_path / "db.duckdb",
                     "--executor", spec)
    assert rc == 2 and len(err) == 1 and "give the Ray cluster's address as ray:HOST:PORT" \
        in err[0], err


def test_an_unreachable_ray_address_fails_at_once_naming_it(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    with socket_free_port() as port:
        rc, _, err = cli("ingest", job(tmp_path / "t"), "--db", tmp_path / "db.duckdb",
                         "--executor", f"ray:127.0.0.1:{port}", "--quiet")
    assert rc == 2 and len(err) == 1 and \
        f"cannot reach a Ray cluster at 127.0.0.1:{port} (Connection refused)" in err[0], err
    assert runs_in(tmp_path / "db.duckdb") == []


@contextlib.contextmanager
def socket_free_port() -> contextlib.AbstractContextManager[int]:  # type: ignore[misc]
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    yield port


def test_the_ray_extra_installs_the_client() -> None:
    text = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    assert 'ray = ["ray[client]>=2.9"]' in text


# ------------------------------------------------------- terminal escapes
@pytest.mark.parametrize("raw", ["\x1b[2J", "\x1b]0;owned\x07", "\x9b31m", "\u202etxt",
                                 "\x00", "\x7f"])
def test_terminal_safe_escapes_every_control_but_newline_and_tab(raw: str) -> None:
    text = f"a\tb\n{raw}c"
    safe = terminal_safe(text)
    assert safe.startswith("a\tb\n") and safe.endswith("c")
    assert not any(ch in safe for ch in raw if not ch.isprintable() or ch == "\u202e")
    assert json.loads(terminal_safe(json.dumps({"k": raw}, ensure_ascii=False))) == {"k": raw}


def test_kernel_names_with_escapes_never_reach_the_terminal_raw(tmp_path: Path) -> None:
    hostile = "evil\x1b]0;pwned\x07\x1b[2J\x9bkernel"
    folder = tmp_path / "t"
    for r in range(2):
        trace = kineto_trace(rank=r, world_size=2)
        for ev in trace["traceEvents"]:
            if ev.get("cat") == "kernel" and "gemm" in str(ev.get("name", "")).lower():
                ev["name"] = hostile
        write_trace(folder / f"rank{r}.json.gz", trace)
    db = tmp_path / "db.duckdb"
    assert cli("ingest", folder, "--db", db, "--quiet")[0] == 0
    for argv in (["report", "t"], ["report", "t", "--format", "json"], ["summary"],
                 ["report", "t", "--format", "html"]):
        rc, out, err = cli(*argv, "--db", db)
        assert rc == 0 and "\x1b" not in out and "\x9b" not in out and "\x07" not in out
    md = tmp_path / "r.md"
    assert cli("report", "t", "--db", db, "--out", md)[0] == 0
    assert "\x1b" not in md.read_text() and "\\u001b" in md.read_text()


# ------------------------------------------------------- databases and validation
def test_a_foreign_duckdb_file_with_our_table_names_is_not_a_stepscope_database(
        tmp_path: Path) -> None:
    db = tmp_path / "other.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE schema_info(key VARCHAR, value VARCHAR)")
    con.execute("INSERT INTO schema_info VALUES ('schema_version', '1')")
    con.execute("CREATE TABLE runs(run VARCHAR, note VARCHAR)")
    con.close()
    before = db.read_bytes()
    for argv in (["ingest", job(tmp_path / "t"), "--quiet"], ["summary"]):
        rc, _, err = cli(*argv, "--db", db)
        assert rc == 2 and len(err) == 1 and "not a stepscope database (a DuckDB file " \
            "whose tables runs, schema_info are named like stepscope's but lack their " \
            "keys)" in err[0], err
    assert db.read_bytes() == before


@pytest.mark.parametrize(("argv", "said"), [
    (["ingest", "T", "--stage-dir", "/proc"], "--stage-dir /proc: cannot make a folder there"),
    (["ingest", "T", "--stage-dir", "T/rank0.json.gz"], "rank0.json.gz: not a folder"),
    (["ingest", "T", "--step-marker", "a\nb"], "--step-marker 'a\\nb': an annotation name"),
    (["ingest", "T", "--step-marker", "x\x1b[2J"], "an annotation name is printable"),
    (["ingest", "T", "--db", "x.duckdb/"], "--db 'x.duckdb/': ends with '/'"),
    (["summary", "--db", "x.duckdb/"], "ends with '/', so it names a folder"),
])
def test_option_values_are_checked_before_any_work(argv: list[str], said: str,
                                                   tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    job(tmp_path / "T")
    rc, _, err = cli(*argv)
    assert rc == 2 and len(err) == 1 and said in err[0], err
    assert not (tmp_path / "x.duckdb").exists() and not (tmp_path / "stepscope.duckdb").exists()


@pytest.mark.parametrize("value", ["-1GB", "abc", "0GB", "100000", "1.5", "GB"])
@pytest.mark.parametrize("command", ["ingest", "report", "summary"])
def test_the_memory_limit_variable_is_checked_by_every_command(
        value: str, command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEPSCOPE_MEMORY_LIMIT", value)
    folder = job(tmp_path / "t")
    argv = {"ingest": ["ingest", folder], "report": ["report", folder],
            "summary": ["summary"]}[command]
    rc, _, err = cli(*argv, "--db", tmp_path / "db.duckdb")
    assert rc == 2 and len(err) == 1 and \
        f"cannot open the database with $STEPSCOPE_MEMORY_LIMIT='{value}'" in err[0], err


@pytest.mark.parametrize("value", ["2GB", "512MiB", "1 GB", "1.5G"])
def test_sizes_duckdb_reads_are_accepted(value: str, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STEPSCOPE_MEMORY_LIMIT", value)
    rc, _, err = cli("ingest", job(tmp_path / "t"), "--db", tmp_path / "db.duckdb", "--quiet")
    assert rc == 0 and err == [], err


def test_a_reader_holding_the_database_is_named(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    folder = job(tmp_path / "t")
    assert cli("ingest", folder, "--db", db, "--quiet")[0] == 0
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1], "
         "read_only=True); print('open', flush=True); time.sleep(60)", str(db)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "open\n"
        rc, _, err = cli("ingest", folder, "--db", db, "--run", "again", "--quiet")
    finally:
        holder.kill()
        holder.wait()
    assert rc == 2 and len(err) == 1 and \
        f"the database is locked by process {holder.pid} (" in err[0] \
        and "read_only=True" in err[0] and err[0].endswith("use another --db"), err


def test_a_stopped_worker_is_killed_and_the_ingest_stops(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker stopped by SIGSTOP used to stall the ingest forever; its heartbeat (the
    process state, polled while it owes an outcome) kills it after STOPPED_LIMIT_S."""
    from stepscope.ingest import executors

    monkeypatch.setattr(executors, "STOPPED_LIMIT_S", 0.5)
    real_start = executors._Worker.start
    stopped: list[int] = []

    def start_then_stop(self: executors._Worker, task: object) -> None:
        real_start(self, task)  # type: ignore[arg-type]
        if "rank1" in task.display and not stopped:  # type: ignore[attr-defined]
            os.kill(self.proc.pid, signal.SIGSTOP)
            stopped.append(self.proc.pid)

    monkeypatch.setattr(executors._Worker, "start", start_then_stop)
    db = tmp_path / "db.duckdb"
    rc, _, err = cli("ingest", job(tmp_path / "t", world=3), "--db", db,
                     "--executor", "process", "--jobs", "2", "--quiet")
    assert stopped and rc == 1 and len(err) == 1, (stopped, err)
    # the file it owed first (rank0 or rank1: tasks are sent ahead) is named
    assert ".json.gz: the worker process reading it was stopped (SIGSTOP, a debugger?) " \
        "for 0.5 s and was killed (the machine's failure, not the file's)" in err[0], err
    assert runs_in(db) == []
