"""The fixture and the check of audit round 8 (issue 43): test_audit_round8.py and
test_audit_round8_more.py. Every hostile input is built in code (the Flight Recorder dumps
from a real one in tests/data, changed), each in a folder of its own."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import pickle
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from conftest import REAL_TRACES, kineto_trace, write_trace

from stepscope.cli import main
from stepscope.ingest.nccl.safe_pickle import load_plain

Case = tuple[tuple[str, ...], dict[str, str] | None, int, str]

FR_DUMP = (REAL_TRACES / "nvidia-resiliency-ext" / "tests" / "attribution" / "unit"
           / "fr_traces" / "lock_gil_1st" / "_dump_8")
ESC = "\x1b]0;owned\x07\x1b[2J"
RAW = {chr(c) for c in range(32) if chr(c) != "\t"} | {chr(c) for c in range(0x7F, 0xA0)} \
    | {"\u202e", "\u202d", "\u2066", "\u2067", "\u2068", "\u2069"}


def cli(argv: tuple[str, ...], env: dict[str, str] | None = None
        ) -> tuple[int, list[str], str]:
    """Run the CLI in this process with `env` set: (exit code, stderr lines, stdout)."""
    saved = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(list(argv))
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return rc, err.getvalue().splitlines(), out.getvalue()


def raw_controls(text: str) -> bool:
    """Whether `text` holds a character that drives a terminal (newlines aside)."""
    return any(ch in RAW for ch in text.replace("\n", ""))


def _kineto(base: Path, folder: str, edit: Any, name: str = "rank0.json") -> None:
    """A one-rank trace with `edit` applied to the trace dict (which it may replace)."""
    trace = kineto_trace(rank=0, world_size=1)
    trace = edit(trace) or trace
    write_trace(base / folder / name, trace if isinstance(trace, dict | str | bytes)
                else json.dumps(trace))


def _on_kernels(field: str, value: Any) -> Any:
    def edit(trace: dict[str, Any]) -> None:
        for e in trace["traceEvents"]:
            if e.get("cat") == "kernel":
                e[field] = value
    return edit


def _named_kernels(name: str, pg: str | None = None) -> Any:
    def edit(trace: dict[str, Any]) -> None:
        for e in trace["traceEvents"]:
            if e.get("cat") == "kernel" and e["name"].startswith("sm90"):
                e["name"] = name
            if pg is not None and e["name"] == "record_param_comms":
                e["args"]["Process Group Description"] = pg
    return edit


def _traces(base: Path) -> None:
    """Kineto traces of odd shapes: odd types in fields, duplicate keys, odd gzip."""
    _kineto(base, "k_args_list", _on_kernels("args", [1, 2, 3]))
    _kineto(base, "k_name_number", _on_kernels("name", 12345))
    _kineto(base, "k_ts_string", _on_kernels("ts", "soon"))
    _kineto(base, "k_dur_bool", _on_kernels("dur", True))
    _kineto(base, "k_pid_object", _on_kernels("pid", {"a": 1}))
    _kineto(base, "k_dur_negative", _on_kernels("dur", -5.0))
    _kineto(base, "k_ts_1e308", _on_kernels("ts", 1e308))
    _kineto(base, "k_device_props_string", lambda t: t.update(deviceProperties="H100"))
    _kineto(base, "k_dist_list", lambda t: t.update(distributedInfo=[1, 2]))
    _kineto(base, "k_args_10k_keys", _on_kernels("args", {f"k{i}": i for i in range(10_000)}))
    _kineto(base, "k_top_array", lambda t: t["traceEvents"])
    _kineto(base, "k_events_null", lambda t: t.update(traceEvents=None))
    one = json.dumps(kineto_trace(rank=0, world_size=1))
    write_trace(base / "k_dup_key" / "rank0.json", one[:-1] + ', "traceEvents": []}')
    write_trace(base / "k_dup_key_first" / "rank0.json",
                '{"traceEvents": 7, ' + one[1:])
    same_ts = [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 100, "tid": 100,
                "ts": 1500.0, "dur": 1.0, "args": {}} for _ in range(100_000)]
    write_trace(base / "k_100k_same_ts" / "rank0.json.gz",
                kineto_trace(rank=0, world_size=1, extra_events=same_ts))
    (base / "gz_multi").mkdir()
    half = len(one) // 2
    (base / "gz_multi" / "rank0.json.gz").write_bytes(
        gzip.compress(one[:half].encode(), mtime=0) + gzip.compress(one[half:].encode(), mtime=0))
    (base / "gz_trailing").mkdir()
    (base / "gz_trailing" / "rank0.json.gz").write_bytes(
        gzip.compress(one.encode(), mtime=0) + b"garbage after the stream")
    write_trace(base / "gz_plain" / "rank0.json.gz.txt", one)
    (base / "gz_plain" / "rank0.json.gz.txt").rename(base / "gz_plain" / "rank0.json.gz")
    (base / "gz_empty").mkdir()
    (base / "gz_empty" / "rank0.json.gz").write_bytes(b"")
    (base / "gz_empty_stream").mkdir()
    (base / "gz_empty_stream" / "rank0.json.gz").write_bytes(gzip.compress(b"", mtime=0))
    ordered = kineto_trace(rank=0, world_size=2)
    write_trace(base / "ordered" / "rank0.json", ordered)
    write_trace(base / "ordered" / "rank1.json", kineto_trace(rank=1, world_size=2))
    rev = kineto_trace(rank=0, world_size=2)
    rev["traceEvents"].reverse()
    write_trace(base / "reversed" / "rank0.json", rev)
    write_trace(base / "reversed" / "rank1.json", kineto_trace(rank=1, world_size=2))
    for r in range(2):
        write_trace(base / "esc" / f"rank{r}.json.gz", _esc_trace(r))


def _esc_trace(rank: int) -> dict[str, Any]:
    trace = kineto_trace(rank=rank, world_size=2)
    _named_kernels(f"gemm{ESC}\u202ekernel", pg=f"pg{ESC}x")(trace)
    return trace


def _fr(base: Path, folder: str, data: bytes) -> None:
    (base / folder).mkdir()
    (base / folder / "nccl_trace_rank_8").write_bytes(data)


class _System:
    """Pickles as a call of os.system: a dump that runs a command if it is unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def _flight_recorder(base: Path) -> None:
    raw = load_plain(FR_DUMP.read_bytes())
    good = pickle.dumps(raw, protocol=4)
    _fr(base, "fr_system", pickle.dumps({"version": "2.4", "entries": [],
                                         "x": _System(base / "PWNED")}))
    _fr(base, "fr_eval", b"cbuiltins\neval\n(S'1+1'\ntR.")
    _fr(base, "fr_truncated", good[: len(good) // 2])
    _fr(base, "fr_list", pickle.dumps([1, 2, 3]))
    _fr(base, "fr_protocol0", pickle.dumps(raw, protocol=0))
    big = dict(raw)
    big["entries"] = [dict(e, profiling_name="n" * (1 << 20)) for e in raw["entries"][:2]]
    _fr(base, "fr_long_name", pickle.dumps(big, protocol=4))
    odd = dict(raw, version=2.4)
    _fr(base, "fr_version_number", pickle.dumps(odd, protocol=4))
    _fr(base, "fr_set", pickle.dumps({"version": "2.4", "entries": {1, 2}}))
    _fr(base, "fr_bytes", pickle.dumps(b"\x00" * 100))


def _inspector_line(**change: Any) -> str:
    line: dict[str, Any] = {
        "header": {"id": "0x7f8c496ae9f661", "comm_name": "", "rank": 0, "n_ranks": 1,
                   "nnodes": 1},
        "metadata": {"inspector_output_format_version": "v4.0", "git_rev": "",
                     "rec_mechanism": "nccl_profiler_interface",
                     "dump_timestamp_us": 1748030377748202, "hostname": "node0", "pid": 1},
        "coll_perf": {"coll": "AllReduce", "coll_sn": 1, "coll_msg_size_bytes": 1024,
                      "coll_exec_time_us": 10, "coll_timing_source": "kernel_gpu",
                      "coll_algobw_gbs": 1.0, "coll_busbw_gbs": 1.0}}
    for key, value in change.items():
        section, field = key.split("__")
        line[section][field] = value
    return json.dumps(line)


def _nccl(base: Path) -> None:
    """NCCL_DEBUG logs and Inspector JSONL of odd shapes."""
    write_trace(base / "n_binary" / "nccl.log", bytes(range(256)) * 100)
    write_trace(base / "n_crlf" / "nccl.log", "\r\n".join(
        f"node0:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 1 nNodes 1 localRanks 1 line {i}"
        for i in range(100)))
    for folder, change in (("i_time_string", {"coll_perf__coll_exec_time_us": "fast"}),
                           ("i_size_2_70", {"coll_perf__coll_msg_size_bytes": 2 ** 70}),
                           ("i_coll_esc", {"coll_perf__coll": f"All{ESC}"}),
                           ("i_host_esc", {"metadata__hostname": f"node{ESC}"}),
                           ("i_rank_negative", {"header__rank": -3})):
        write_trace(base / folder / "node0-pid1.log",
                    "\n".join([_inspector_line(**change)] * 3) + "\n")
    write_trace(base / "i_dup_keys" / "node0-pid1.log",
                _inspector_line()[:-1] + ', "coll_perf": 5}\n')
    write_trace(base / "i_half_line" / "node0-pid1.log",
                _inspector_line() + "\n" + _inspector_line()[:40] + "\n")


def _archives(base: Path, one: bytes) -> None:
    (base / "a_dup_member").mkdir()
    with zipfile.ZipFile(base / "a_dup_member" / "run.zip", "w") as z, \
            pytest.warns(UserWarning):
        z.writestr("rank0.json", one)
        z.writestr("rank0.json", b"{broken")
    (base / "a_newline_member").mkdir()
    with tarfile.open(base / "a_newline_member" / "run.tar", "w") as t:
        info = tarfile.TarInfo("rank\n0\x1b[2J.json")
        info.size = 5
        t.addfile(info, io.BytesIO(b"{bad}"))
    (base / "a_10k_empty").mkdir()
    with tarfile.open(base / "a_10k_empty" / "run.tar", "w") as t:
        for i in range(10_000):
            t.addfile(tarfile.TarInfo(f"m{i}.json"), io.BytesIO(b""))
    (base / "a_nested_gz").mkdir()
    with tarfile.open(base / "a_nested_gz" / "run.tar.gz", "w:gz") as t:
        data = gzip.compress(one, mtime=0)
        info = tarfile.TarInfo("rank0.json.gz")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    (base / "a_bad_crc").mkdir()
    with zipfile.ZipFile(base / "a_bad_crc" / "run.zip", "w", zipfile.ZIP_STORED) as z:
        z.writestr("rank0.json", one)
    blob = bytearray((base / "a_bad_crc" / "run.zip").read_bytes())
    at = blob.find(b'"traceEvents"')
    blob[at + 1] = ord("T")
    (base / "a_bad_crc" / "run.zip").write_bytes(bytes(blob))
    (base / "a_plain_tgz").mkdir()
    with tarfile.open(base / "a_plain_tgz" / "run.tgz", "w") as t:
        info = tarfile.TarInfo("rank0.json")
        info.size = len(one)
        t.addfile(info, io.BytesIO(one))
    (base / "a_encrypted").mkdir()
    with zipfile.ZipFile(base / "a_encrypted" / "run.zip", "w") as z:
        z.writestr("rank0.json", one)
    blob = bytearray((base / "a_encrypted" / "run.zip").read_bytes())
    for sig in (b"PK\x03\x04", b"PK\x01\x02"):  # set the "encrypted" flag bit
        at = blob.find(sig)
        flag = 6 if sig == b"PK\x03\x04" else 8
        blob[at + flag] |= 1
    (base / "a_encrypted" / "run.zip").write_bytes(bytes(blob))


def _option_files(base: Path) -> None:
    opts = base / "opt"
    opts.mkdir()
    (opts / "long_value.yaml").write_text("name: " + "v" * (1 << 20) + "\n")
    (opts / "merge.yaml").write_text("base: &b {n_layers: 2}\nspec:\n  <<: *b\n")
    (opts / "dup.json").write_text('{"n_layers": 2, "n_layers": 3}')
    (opts / "binary.yaml").write_text("n_layers: !!binary aGVsbG8=\n")
    (opts / "cycle.yaml").write_text("a: &a [*a]\n")
    (opts / "ck_string.json").write_text('"patterns"')
    (opts / "ck_no_library.json").write_text(json.dumps({"patterns": [
        {"pattern": "x", "collective": "all_reduce", "op": "o"}]}))
    (opts / "ck_empty.json").write_text(json.dumps({"patterns": []}))
    (opts / "ck.yaml").write_text("patterns:\n  - pattern: x\n")
    (opts / "zero_link.yaml").symlink_to("/dev/zero")
    (opts / "folder.json").mkdir()
    (opts / "esc\x1b[2J.yaml").write_text("- 1\n")


def _databases(base: Path) -> None:
    con = duckdb.connect(str(base / "foreign.duckdb"))
    con.execute("CREATE TABLE users (id INTEGER, name VARCHAR)")
    con.close()
    duckdb.connect(str(base / "emptyduck.duckdb")).close()
    with zipfile.ZipFile(base / "zip.duckdb", "w") as z:
        z.writestr("x", "y")
    con = duckdb.connect()
    con.execute(f"COPY (SELECT 1 AS a) TO '{base / 'pq.duckdb'}' (FORMAT parquet)")
    con.close()
    (base / "dbdir.duckdb").mkdir()


def esc_kernels(name: str, pg: str) -> Any:
    """A builder of a rank's trace whose kernels are named `name`, its process group `pg`."""
    def build(rank: int) -> dict[str, Any]:
        trace = kineto_trace(rank=rank, world_size=2)
        _named_kernels(name, pg=pg)(trace)
        return trace
    return build


def base_database(base: Path, esc_folder: str, esc_trace: Any) -> None:
    """The base database every audit round reads, `base/db.duckdb`: runs `base` (folder t)
    and `other` (t2), two plain ranks each, and a run named like `esc_folder` whose two
    ranks `esc_trace(rank)` builds (names with escapes; None: the folder is already
    there)."""
    for r in range(2):
        write_trace(base / "t" / f"rank{r}.json.gz", kineto_trace(rank=r, world_size=2))
        write_trace(base / "t2" / f"rank{r}.json.gz", kineto_trace(rank=r, world_size=2))
        if esc_trace is not None:
            write_trace(base / esc_folder / f"rank{r}.json.gz", esc_trace(r))
    for folder, run in (("t", "base"), ("t2", "other"), (esc_folder, esc_folder)):
        assert cli(("ingest", str(base / folder), "--db", str(base / "db.duckdb"), "--run",
                    run, "--quiet"))[0] == 0


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    base = tmp_path_factory.mktemp("audit8")
    _traces(base)
    base_database(base, "esc", None)
    _flight_recorder(base)
    _nccl(base)
    _archives(base, json.dumps(kineto_trace(rank=0, world_size=1)).encode())
    _option_files(base)
    _databases(base)
    (base / "afile").write_text("x")
    yield base


def params(cases: dict[str, Case], failed: dict[str, str]) -> list[Any]:
    """The case names, those in `failed` marked xfail (strict) with their reason."""
    return [pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=failed[name]))
            if name in failed else name for name in cases]


NOTHING = "error: nothing ingested into run"


def check_case(root: Path, case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
               file_case: bool = False) -> None:
    """Run one case: its exit code and the start of its first error line; one line (two
    for a file case: its file's and "nothing ingested"); no traceback, internal error or
    raw control character on stderr or stdout; nothing written in the current folder and
    no command run from a dump; a refused command leaves the database as it was."""
    argv, env, want_rc, want_line = case
    monkeypatch.chdir(tmp_path)
    if argv[0] == "dashboard":
        import stepscope.commands.dashboard_cmd as dashboard_cmd

        def no_server(*args: object, **kwargs: object) -> None:
            raise AssertionError("the dashboard started its server")

        monkeypatch.setattr(dashboard_cmd, "start_server", no_server)
    fill = {"db": str(root / "db.duckdb"), "t": str(root / "t"), "root": str(root)}
    before = (root / "db.duckdb").stat().st_mtime_ns
    rc, err, out = cli(tuple(a.format(**fill) if "{" in a else a for a in argv), env)
    errors = [x for x in err if not x.startswith(("warning:", "note:", "export:"))]
    assert not any("Traceback" in x or "internal error" in x for x in err), err
    assert not raw_controls("\n".join(err)) and not raw_controls(out), (err, out[:2000])
    assert not list(tmp_path.iterdir()) and not (root / "PWNED").exists()
    if want_rc == 0:
        assert rc == 0 and not any(x.startswith("error") for x in err), (rc, err)
        return
    assert rc == want_rc and errors and errors[0].startswith(want_line.format(**fill)), \
        (rc, err)
    if file_case:
        assert len(errors) == 2 and errors[1].startswith(NOTHING), err
    else:
        assert len(errors) == 1, err
    if want_rc == 2:
        assert (root / "db.duckdb").stat().st_mtime_ns == before
