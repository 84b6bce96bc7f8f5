"""The fixture of audit round 10 (issue 43): test_audit_round10.py and
test_audit_round10_inputs.py. Every hostile input is built in code, each in a folder of
its own; the check of a case is round 8's (tests/audit8_inputs.py: exit code, the start
of the first error line, one line, no traceback, no raw control character, nothing
written in the current folder, a refused command leaves the database as it was)."""

from __future__ import annotations

import gzip
import io
import json
import os
import pickle
import sqlite3
import struct
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from audit8_inputs import ESC, FR_DUMP, _inspector_line, cli
from conftest import kineto_trace, write_trace

from stepscope.ingest.nccl.safe_pickle import load_plain

ONE = json.dumps(kineto_trace(rank=0, world_size=1))
OSC = "\x1b]8;;http://x\x07link\x1b]8;;\x07"


def _kineto(base: Path, folder: str, edit: Any, name: str = "rank0.json") -> None:
    """A one-rank trace with `edit` applied to the trace dict (which it may replace)."""
    trace = kineto_trace(rank=0, world_size=1)
    trace = edit(trace) or trace
    write_trace(base / folder / name, trace)


def _kernels(field: str, value: Any) -> Any:
    def edit(trace: dict[str, Any]) -> None:
        for e in trace["traceEvents"]:
            if e.get("cat") == "kernel":
                e[field] = value
    return edit


def _kernel_args(field: str, value: Any) -> Any:
    def edit(trace: dict[str, Any]) -> None:
        for e in trace["traceEvents"]:
            if e.get("cat") == "kernel":
                e.setdefault("args", {})[field] = value
    return edit


def _steps_swapped(trace: dict[str, Any]) -> None:
    for e in trace["traceEvents"]:
        if str(e.get("name", "")).startswith("ProfilerStep#"):
            e["name"] = "ProfilerStep#" + str(3 - int(e["name"].split("#")[1]))


def _steps_overlap(trace: dict[str, Any]) -> None:
    for e in trace["traceEvents"]:
        if str(e.get("name", "")).startswith("ProfilerStep#"):
            e["dur"] = e["dur"] * 3


def _steps_negative(trace: dict[str, Any]) -> None:
    for e in trace["traceEvents"]:
        if str(e.get("name", "")).startswith("ProfilerStep#"):
            e["name"] = "ProfilerStep#-" + e["name"].split("#")[1]


def _thread_esc(trace: dict[str, Any]) -> None:
    for e in trace["traceEvents"]:
        if e.get("ph") == "M":
            e["args"]["name"] = f"thread{ESC}{OSC}"
    trace["traceName"] = f"trace{ESC}"
    trace["distributedInfo"]["backend"] = f"nccl{ESC}"


def _traces(base: Path) -> None:
    """Kineto traces of odd shapes not tried by rounds 4 to 9."""
    _kineto(base, "k_ts_neg_zero", _kernels("ts", -0.0))
    _kineto(base, "k_name_empty", _kernels("name", ""))
    _kineto(base, "k_name_null", _kernels("name", None))
    _kineto(base, "k_cat_number", _kernels("cat", 5))
    _kineto(base, "k_ph_lower", _kernels("ph", "x"))
    _kineto(base, "k_ext_string", _kernel_args("External id", "abc"))
    _kineto(base, "k_corr_float", _kernel_args("correlation", 1.5))
    _kineto(base, "k_stream_negative", _kernel_args("stream", -1))
    _kineto(base, "k_device_2_40", _kernel_args("device", 2 ** 40))
    _kineto(base, "k_pid_negative", _kernels("pid", -1))
    _kineto(base, "k_tid_null", _kernels("tid", None))
    _kineto(base, "k_dist_rank_text", lambda t: t["distributedInfo"].update(rank="0"))
    _kineto(base, "k_dist_null", lambda t: t.update(distributedInfo=None))
    _kineto(base, "k_props_10k", lambda t: t.update(deviceProperties=[
        {"id": i, "name": "H100", "totalGlobalMem": 1} for i in range(10_000)]))
    _kineto(base, "k_steps_swapped", _steps_swapped)
    _kineto(base, "k_steps_overlap", _steps_overlap)
    _kineto(base, "k_steps_negative", _steps_negative)
    _kineto(base, "k_dur_tiny", _kernels("dur", 1e-400))
    _kineto(base, "k_schema_text", lambda t: t.update(schemaVersion="abc"))
    _kineto(base, "k_esc_names", _thread_esc)
    _kineto(base, "k_grid_esc", _kernel_args("grid", f"[1,1,1]{ESC}"))
    instants = [{"ph": "i", "name": "mark", "pid": 100, "tid": 100, "ts": 1500.0 + i,
                 "s": "t"} for i in range(200_000)]
    write_trace(base / "k_200k_instants" / "rank0.json.gz",
                kineto_trace(rank=0, world_size=1, extra_events=instants))
    write_trace(base / "k_two_docs" / "rank0.json", ONE + ONE)
    write_trace(base / "k_whitespace" / "rank0.json", " \n\t" * 1000)
    write_trace(base / "k_null" / "rank0.json", "null")
    write_trace(base / "k_utf32" / "rank0.json", ONE.encode("utf-32"))
    write_trace(base / "k_latin1" / "rank0.json",
                ONE.replace("sm90_xmma", "sm90_\u00e9xmma").encode("latin-1"))
    write_trace(base / "k_deep_top" / "rank0.json",
                ONE[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    (base / "k_gz_random").mkdir()
    (base / "k_gz_random" / "rank0.json.gz").write_bytes(b"\x1f\x8b\x08\x00" + os.urandom(4000))
    (base / "k_gz_fextra").mkdir()
    (base / "k_gz_fextra" / "rank0.json.gz").write_bytes(_gz_extra(ONE.encode()))
    (base / "k_empty").mkdir()
    (base / "k_empty" / "rank0.json").write_bytes(b"")
    write_trace(base / "k_esc_file" / "rank0\x1b[31m.json", "{broken")


def _gz_extra(data: bytes) -> bytes:
    """A gzip stream with a 60 KB FEXTRA field before the data."""
    plain = gzip.compress(data, mtime=0)
    extra = b"\x00" * 60_000
    return plain[:3] + bytes([plain[3] | 4]) + plain[4:10] + struct.pack("<H", len(extra)) \
        + extra + plain[10:]


NCCL_HEAD = ("node0:1:1 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.10<0>\n"
             "node0:1:1 [0] NCCL INFO NCCL version {version}\n")
COMM = "node0:1:2 [0] NCCL INFO comm 0x55a0 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0\n"


def _nccl(base: Path) -> None:
    """NCCL_DEBUG logs and Inspector JSONL of shapes rounds 4 to 9 did not try."""
    head = NCCL_HEAD.format(version="2.19.3+cuda12.3")
    write_trace(base / "n_2_19" / "nccl.log", head
                + "node0:1:2 [0] NCCL INFO comm 0x55a0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 "
                "busId 18000 commId 0xabc - Init COMPLETE\n")
    write_trace(base / "n_warn_only" / "nccl.log",
                "node0:1:2 [0] NCCL WARN Cuda failure 'out of memory'\n")
    write_trace(base / "n_long_line" / "nccl.log", head + COMM
                + "node0:1:2 [0] NCCL INFO " + "x" * (1 << 20) + "\n")
    write_trace(base / "n_rank_past" / "nccl.log", head
                + "node0:1:2 [0] NCCL INFO comm 0x55a0 rank 5 nRanks 2 nNodes 1 localRanks 2 "
                "localRank 0\n")
    write_trace(base / "n_v2_99" / "nccl.log", NCCL_HEAD.format(version="2.99.0") + COMM)
    write_trace(base / "n_100k_channels" / "nccl.log", head + COMM + "".join(
        f"node0:1:2 [0] NCCL INFO Channel {i % 64:02d}/0 : 0[0] -> 1[1] via P2P/IPC\n"
        for i in range(100_000)))
    write_trace(base / "n_version_x" / "nccl.log", NCCL_HEAD.format(version="2.x") + COMM)
    (base / "n_empty").mkdir()
    (base / "n_empty" / "nccl.log").write_bytes(b"")
    write_trace(base / "n_osc_warn" / "nccl.log", head + COMM
                + f"node0:1:2 [0] NCCL WARN NET/IB : {OSC} failed\n")
    no_header = json.loads(_inspector_line())
    del no_header["header"]
    write_trace(base / "i_no_header" / "node0-pid1.log", (json.dumps(no_header) + "\n") * 3)
    no_perf = json.loads(_inspector_line())
    del no_perf["coll_perf"]
    write_trace(base / "i_no_perf" / "node0-pid1.log", (json.dumps(no_perf) + "\n") * 3)
    write_trace(base / "i_null_line" / "node0-pid1.log",
                _inspector_line() + "\nnull\n" + _inspector_line() + "\n")
    write_trace(base / "i_long_comm" / "node0-pid1.log",
                (_inspector_line(header__comm_name="c" * (1 << 20)) + "\n") * 2)
    write_trace(base / "i_time_1e308" / "node0-pid1.log",
                (_inspector_line(coll_perf__coll_exec_time_us=1e308) + "\n") * 3)
    write_trace(base / "i_comm_esc" / "node0-pid1.log",
                (_inspector_line(header__comm_name=f"c{ESC}{OSC}") + "\n") * 3)


def _fr(base: Path, folder: str, data: bytes) -> None:
    (base / folder).mkdir()
    (base / folder / "nccl_trace_rank_8").write_bytes(data)


def _flight_recorder(base: Path) -> None:
    """Flight Recorder dumps rounds 4 to 9 did not try."""
    raw = load_plain(FR_DUMP.read_bytes())
    _fr(base, "fr_entries_dict", pickle.dumps({"version": "2.4", "entries": {"a": 1},
                                               "pg_config": {}}, protocol=4))
    _fr(base, "fr_bytearray", pickle.dumps(dict(raw, x=bytearray(b"ab")), protocol=5))
    _fr(base, "fr_long4", b"\x80\x04\x8b" + struct.pack("<i", 2 ** 31 - 1) + b"\x00" * 10 + b".")
    _fr(base, "fr_deep", b"\x80\x04" + b"(" * 50_000 + b"l" * 50_000 + b".")
    _fr(base, "fr_ordered", b"\x80\x04\x8c\x0bcollections\x94\x8c\x0bOrderedDict\x94\x93)R.")
    _fr(base, "fr_pg_text", pickle.dumps(dict(raw, pg_config="nccl"), protocol=4))
    _fr(base, "fr_entry_empty", pickle.dumps(dict(raw, entries=[{}]), protocol=4))
    _fr(base, "fr_entry_esc", pickle.dumps(dict(raw, entries=[
        dict(e, state=f"done{OSC}", frames=[{"name": f"f{ESC}", "filename": f"x{OSC}.py",
                                               "line": 1}])
        for e in raw["entries"]]), protocol=4))


def _tar(path: Path, members: list[tuple[str, bytes]], mode: str = "w") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, mode) as t:  # type: ignore[call-overload]
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))


def _archives(base: Path) -> None:
    """Archives of shapes rounds 4 to 9 did not try."""
    one = ONE.encode()
    (base / "a_dir_entry").mkdir()
    with zipfile.ZipFile(base / "a_dir_entry" / "run.zip", "w") as z:
        z.writestr("rank0.json/", b"")
    (base / "a_nul_name").mkdir()
    with zipfile.ZipFile(base / "a_nul_name" / "run.zip", "w") as z:
        z.writestr("rank0.json", one)
    blob = (base / "a_nul_name" / "run.zip").read_bytes().replace(b"rank0.json", b"ran\x00.json")
    (base / "a_nul_name" / "run.zip").write_bytes(blob)
    (base / "a_big_comment").mkdir()
    with zipfile.ZipFile(base / "a_big_comment" / "run.zip", "w") as z:
        z.writestr("rank0.json", one)
        z.comment = b"c" * 65_000
    _tar(base / "a_tgz_cut" / "run.tar.gz", [("rank0.json", one * 1)], "w:gz")
    data = (base / "a_tgz_cut" / "run.tar.gz").read_bytes()
    (base / "a_tgz_cut" / "run.tar.gz").write_bytes(data[: len(data) // 2])
    (base / "a_size_lies").mkdir()
    with zipfile.ZipFile(base / "a_size_lies" / "run.zip", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("rank0.json", one)
    blob = bytearray((base / "a_size_lies" / "run.zip").read_bytes())
    for sig, at in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        pos = blob.find(sig)
        blob[pos + at: pos + at + 4] = struct.pack("<I", 10)
    (base / "a_size_lies" / "run.zip").write_bytes(bytes(blob))
    (base / "a_zip_as_tar").mkdir()
    with zipfile.ZipFile(base / "a_zip_as_tar" / "run.tar", "w") as z:
        z.writestr("rank0.json", one)
    (base / "a_zeros").mkdir()
    with zipfile.ZipFile(base / "a_zeros" / "run.zip", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("rank0.json", b"\x00" * (50 << 20))
    (base / "a_zip_symlink").mkdir()
    with zipfile.ZipFile(base / "a_zip_symlink" / "run.zip", "w") as z:
        info = zipfile.ZipInfo("rank0.json")
        info.external_attr = (0o120777 << 16)
        info.create_system = 3
        z.writestr(info, "/etc/passwd")
    (base / "a_zip_abs").mkdir()
    with zipfile.ZipFile(base / "a_zip_abs" / "run.zip", "w") as z:
        z.writestr("/tmp/audit10_abs/rank0.json", one)
    _tar(base / "a_tar_dot" / "run.tar", [(".", b"{}")])
    (base / "a_tar_dir_named_json").mkdir()
    with tarfile.open(base / "a_tar_dir_named_json" / "run.tar", "w") as t:
        info = tarfile.TarInfo("rank0.json")
        info.type = tarfile.DIRTYPE
        t.addfile(info)
    _tar(base / "a_member_esc" / "run.tar", [(f"rank0{OSC}.json", b"{bad")])
    (base / "a_gz_of_tar").mkdir()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        info = tarfile.TarInfo("rank0.json")
        info.size = len(one)
        t.addfile(info, io.BytesIO(one))
    (base / "a_gz_of_tar" / "rank0.json.gz").write_bytes(gzip.compress(buf.getvalue()))


def _option_files(base: Path) -> None:
    opts = base / "opt"
    opts.mkdir()
    (opts / "seq10k.yaml").write_text("[" + ", ".join(["1"] * 10_000) + "]\n")
    (opts / "empty.yaml").write_text("")
    (opts / "null.yaml").write_text("null\n")
    (opts / "list.yaml").write_text("- n_layers: 2\n")
    (opts / "layers0.yaml").write_text("n_layers: 0\nhidden: 4096\nn_heads: 32\n")
    (opts / "null_key.yaml").write_text("~: 1\n")
    (opts / "deep.yaml").write_text("[" * 100_000 + "]" * 100_000 + "\n")
    (opts / "latin1.yaml").write_bytes("name: caf\u00e9\n".encode("latin-1"))
    (opts / "gz.yaml").write_bytes(gzip.compress(b"n_layers: 2\n"))
    (opts / "ck_empty_file.json").write_text("")
    (opts / "ck_deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (opts / "ck_utf16.json").write_bytes(json.dumps({"patterns": []}).encode("utf-16"))
    (opts / "ck_null.json").write_text("null")
    (opts / "ck_dir.json").mkdir()


def _databases(base: Path) -> None:
    con = sqlite3.connect(base / "sqlite.duckdb")
    con.execute("CREATE TABLE runs (x)")
    con.commit()
    con.close()
    for name, value in (("v12", "12"), ("v0", "0"), ("vneg", "-1"), ("vspace", " 13"),
                        ("vfloat", "1e1"), ("vnull", None), ("vdot", "13.0")):
        db = base / f"schema_{name}.duckdb"
        (db).write_bytes((base / "db.duckdb").read_bytes())
        con2 = duckdb.connect(str(db))
        con2.execute("UPDATE schema_info SET value = ? WHERE key = 'schema_version'", [value])
        con2.close()
    os.mkfifo(base / "fifo.duckdb")
    os.mkfifo(base / "fifo_out.json")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    base = tmp_path_factory.mktemp("audit10")
    for r in range(2):
        write_trace(base / "t" / f"rank{r}.json.gz", kineto_trace(rank=r, world_size=2))
        write_trace(base / "t2" / f"rank{r}.json.gz", kineto_trace(rank=r, world_size=2))
    _traces(base)
    for folder, run in (("t", "base"), ("t2", "other"), ("k_esc_names", "esc")):
        assert cli(("ingest", str(base / folder), "--db", str(base / "db.duckdb"), "--run",
                    run, "--quiet"))[0] == 0
    _nccl(base)
    _flight_recorder(base)
    _archives(base)
    _option_files(base)
    _databases(base)
    (base / "afile").write_text("x")
    yield base
