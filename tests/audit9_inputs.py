"""The fixture of audit round 9 (issue 43): test_audit_round9.py and
test_audit_round9_inputs.py. Every hostile input is built in code, each in a folder of its
own; the check of one case is round 8's (tests/audit8_inputs.py: exit code, the start of
the first error line, one line, no traceback, no raw control character, nothing written
in the current folder, a refused command leaves the database as it was)."""

from __future__ import annotations

import codecs
import gzip
import io
import json
import os
import pickle
import socket
import struct
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from audit8_inputs import (
    ESC,
    FR_DUMP,
    _inspector_line,
    _named_kernels,
    base_database,
    cli,
    esc_kernels,
)
from conftest import kineto_trace, write_trace

from stepscope.ingest.nccl.safe_pickle import load_plain

ONE = json.dumps(kineto_trace(rank=0, world_size=1))


def _kineto(base: Path, folder: str, edit: Any, name: str = "rank0.json") -> None:
    """A one-rank trace with `edit` applied (it may return a replacement: dict, str or
    bytes, written as they are)."""
    trace = kineto_trace(rank=0, world_size=1)
    got = edit(trace)
    if isinstance(got, bytes):
        (base / folder).mkdir(parents=True, exist_ok=True)
        (base / folder / name).write_bytes(got)
    else:
        write_trace(base / folder / name, trace if got is None else got)


def _kernels(field: str, value: Any) -> Any:
    def edit(trace: dict[str, Any]) -> None:
        for e in trace["traceEvents"]:
            if e.get("cat") == "kernel":
                e[field] = value
    return edit


def _without_kernel_ph(trace: dict[str, Any]) -> None:
    for e in trace["traceEvents"]:
        if e.get("cat") == "kernel":
            e.pop("ph", None)


def _dist(field: str, value: Any) -> Any:
    def edit(trace: dict[str, Any]) -> None:
        trace["distributedInfo"][field] = value
    return edit


def _deep_args(trace: dict[str, Any]) -> str:
    deep = "[" * 3000 + "1" + "]" * 3000
    for e in trace["traceEvents"]:
        if e.get("cat") == "kernel":
            e["args"]["deep"] = "@DEEP@"
            break
    return json.dumps(trace).replace('"@DEEP@"', deep)


def _shift_ts(trace: dict[str, Any]) -> None:
    for e in trace["traceEvents"]:
        if "ts" in e:
            e["ts"] = e["ts"] - 10_000_000.0


def _gz_header_flag(data: bytes) -> bytes:
    blob = bytearray(gzip.compress(data, mtime=0))
    blob[3] |= 0x80   # a reserved FLG bit: RFC 1952 says a reader must refuse it
    return bytes(blob)


def _gz_bad_crc(data: bytes) -> bytes:
    blob = bytearray(gzip.compress(data, mtime=0))
    blob[-8] ^= 0xFF
    return bytes(blob)


def _gz_named(data: bytes, name: str) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(filename=name, mode="wb", fileobj=buf, mtime=0) as gz:
        gz.write(data)
    return buf.getvalue()


def _traces(base: Path) -> None:
    """Kineto traces of odd shapes: encodings, gzip faults, odd numbers and types."""
    one = ONE.encode()
    _kineto(base, "k9_bom_valid", lambda t: codecs.BOM_UTF8 + one)
    _kineto(base, "k9_utf16_bom", lambda t: ONE.encode("utf-16"))
    _kineto(base, "k9_utf16_nobom", lambda t: ONE.encode("utf-16-le"))
    _kineto(base, "k9_gz_truncated", lambda t: gzip.compress(one, mtime=0)[:300],
            "rank0.json.gz")
    _kineto(base, "k9_gz_bad_crc", lambda t: _gz_bad_crc(one), "rank0.json.gz")
    _kineto(base, "k9_gz_double", lambda t: gzip.compress(gzip.compress(one, mtime=0),
                                                          mtime=0), "rank0.json.gz")
    _kineto(base, "k9_gz_reserved_flag", lambda t: _gz_header_flag(one), "rank0.json.gz")
    _kineto(base, "k9_gz_name_esc", lambda t: _gz_named(one, f"r{ESC}.json"), "rank0.json.gz")
    _kineto(base, "k9_gzip_named_json", lambda t: gzip.compress(one, mtime=0))
    _kineto(base, "k9_dur_nan", lambda t: json.dumps(_kernels("dur", float("nan"))(t) or t))
    _kineto(base, "k9_ts_infinity",
            lambda t: json.dumps(_kernels("ts", float("inf"))(t) or t))
    _kineto(base, "k9_dur_text_number", _kernels("dur", "50"))
    _kineto(base, "k9_dur_text_abc", _kernels("dur", "abc"))
    _kineto(base, "k9_ts_text_1e400", _kernels("ts", "1e400"))
    _kineto(base, "k9_dur_1e30", _kernels("dur", 1e30))
    _kineto(base, "k9_args_string", _kernels("args", "x"))
    _kineto(base, "k9_args_null", _kernels("args", None))
    _kineto(base, "k9_ph_missing", _without_kernel_ph)
    _kineto(base, "k9_events_object", lambda t: t.update(traceEvents={"a": 1}))
    _kineto(base, "k9_events_empty", lambda t: t.update(traceEvents=[]))
    _kineto(base, "k9_trailing_comma", lambda t: ONE[:-1] + ",}")
    _kineto(base, "k9_comment", lambda t: "// a comment\n" + ONE)
    _kineto(base, "k9_rank_2_31", _dist("rank", 2 ** 31))
    _kineto(base, "k9_world_negative", _dist("world_size", -1))
    _kineto(base, "k9_base_negative", lambda t: t.update(baseTimeNanoseconds=-1))
    _kineto(base, "k9_base_string", lambda t: t.update(baseTimeNanoseconds="abc"))
    _kineto(base, "k9_args_deep", _deep_args)
    _kineto(base, "k9_key_1mib", _kernels("args", {"k" * (1 << 20): 1}))
    _kineto(base, "k9_crlf", lambda t: json.dumps(t, indent=1).replace("\n", "\r\n"))
    _kineto(base, "k9_nul_in_name", _kernels("name", "gemm\x00kernel"))
    _kineto(base, "k9_lone_surrogate", lambda t: json.dumps(_kernels("name", "\ud800")(t) or t))
    _kineto(base, "k9_pid_2_64", _kernels("pid", 2 ** 64))
    _kineto(base, "k9_ts_negative", _shift_ts)
    _kineto(base, "k9_only_metadata", lambda t: t.update(
        traceEvents=[e for e in t["traceEvents"] if e.get("ph") == "M"]))


NCCL_HEAD = ("node0:1:1 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.10<0>\n"
             "node0:1:1 [0] NCCL INFO NCCL version {version}\n")


def _nccl_log(comm: str, version: str = "2.21.5+cuda12.4", extra: str = "") -> str:
    return (NCCL_HEAD.format(version=version) + extra
            + f"node0:1:2 [0] NCCL INFO {comm}\n")


def _nccl(base: Path) -> None:
    """NCCL_DEBUG logs of the shapes 2.2 to 2.28 wrote, with odd numbers and bytes, and
    NCCL Inspector JSONL with odd values."""
    ok = "comm 0x55a0 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0"
    write_trace(base / "n9_version_only" / "nccl.log", NCCL_HEAD.format(version="2.21.5"))
    write_trace(base / "n9_nranks_zero" / "nccl.log",
                _nccl_log("comm 0x55a0 rank 0 nRanks 0 nNodes 1 localRanks 2 localRank 0"))
    write_trace(base / "n9_nranks_2_31" / "nccl.log",
                _nccl_log("comm 0x55a0 rank 0 nRanks 2147483648 nNodes 1 localRanks 2"))
    write_trace(base / "n9_rank_negative" / "nccl.log",
                _nccl_log("comm 0x55a0 rank -1 nRanks 2 nNodes 1 localRanks 2"))
    write_trace(base / "n9_utf16" / "nccl.log", _nccl_log(ok).encode("utf-16"))
    write_trace(base / "n9_nul_bytes" / "nccl.log",
                _nccl_log(ok).replace("Bootstrap", "Boot\x00strap").encode())
    write_trace(base / "n9_ib_dev_esc" / "nccl.log", _nccl_log(
        ok, extra=f"node0:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5{ESC}:1/IB [RO]; OOB "
        "eth0:10.0.0.10<0>\n"))
    write_trace(base / "n9_huge_channel" / "nccl.log", _nccl_log(
        ok, extra="node0:1:2 [0] NCCL INFO Channel 99999999999999999999/0 : 0[0] -> 1[1] "
        "via P2P/IPC\n"))
    write_trace(base / "n9_v2_28" / "nccl.log", _nccl_log(
        "comm 0x55a0 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0",
        version="2.28.3+cuda12.9",
        extra="node0:1:2 [0] NCCL INFO ncclCommInitRankConfig comm 0x55a0 rank 0 nranks 2 "
        "cudaDev 0 nvmlDev 0 busId 18000 commId 0x1 - Init COMPLETE\n"
        "node0:1:2 [0] NCCL INFO Init timings - ncclCommInitRankConfig: rank 0 nranks 2 "
        "total 0.50 (kernels 0.20, alloc 0.01, bootstrap 0.20, allgathers 0.02, topo 0.05, "
        "graphs 0.01, connections 0.01, rest 0.00)\n"))
    write_trace(base / "n9_v2_2" / "nccl.log",
                "node0:1:1 [0] NCCL INFO NCCL version 2.2.13+cuda9.2\n"
                "node0:1:2 [0] NCCL INFO Ring 00 :    0   1\n"
                "node0:1:2 [0] NCCL INFO comm 0x7f00 rank 0 nranks 2 cudaDev 0 nvmlDev 0 - "
                "Init COMPLETE\n")
    write_trace(base / "n9_named_binary" / "nccl.h9.77.log", bytes(range(256)) * 40)
    for folder, change in (("i9_nranks_zero", {"header__n_ranks": 0}),
                           ("i9_time_negative", {"coll_perf__coll_exec_time_us": -10}),
                           ("i9_coll_perf_list", {"coll_perf__coll": ["AllReduce"]}),
                           ("i9_coll_sn_2_70", {"coll_perf__coll_sn": 2 ** 70}),
                           ("i9_n_ranks_2_40", {"header__n_ranks": 2 ** 40})):
        write_trace(base / folder / "node0-pid1.log",
                    "\n".join([_inspector_line(**change)] * 3) + "\n")
    nan_line = _inspector_line(coll_perf__coll_exec_time_us=float("nan"))
    write_trace(base / "i9_time_nan" / "node0-pid1.log", (nan_line + "\n") * 3)
    inf_line = _inspector_line(coll_perf__coll_busbw_gbs=float("inf"))
    write_trace(base / "i9_busbw_inf" / "node0-pid1.log", (inf_line + "\n") * 3)
    write_trace(base / "i9_bom" / "node0-pid1.log",
                "\ufeff" + "\n".join([_inspector_line()] * 3) + "\n")
    write_trace(base / "i9_10k_lines" / "node0-pid1.log",
                "\n".join(_inspector_line(coll_perf__coll_sn=i) for i in range(10_000)) + "\n")


def _fr(base: Path, folder: str, data: bytes) -> None:
    (base / folder).mkdir()
    (base / folder / "nccl_trace_rank_8").write_bytes(data)


def _flight_recorder(base: Path) -> None:
    """Flight Recorder dumps with pickle opcodes a plain-data reader must refuse, odd
    entries, a JSON dump with NaN, one past the 64 MiB dump limit."""
    raw = load_plain(FR_DUMP.read_bytes())
    proto = b"\x80\x05"
    _fr(base, "fr9_oob_buffer", proto + b"\x97.")                    # NEXT_BUFFER
    _fr(base, "fr9_persid", b"\x80\x02Pabc\n.")                       # PERSID
    _fr(base, "fr9_bad_memo", b"\x80\x02h\x07.")                       # BINGET 7, never put
    _fr(base, "fr9_ext1", b"\x80\x02\x82\x01.")                       # EXT1 1
    _fr(base, "fr9_getattr", b"\x80\x02cbuiltins\ngetattr\nq\x00.")
    _fr(base, "fr9_entries_ints", pickle.dumps({"version": "2.10", "pg_config": {},
                                                "entries": [1, 2]}))
    _fr(base, "fr9_empty", b"")
    jraw = json.loads(json.dumps(raw, default=lambda o: o.decode("latin-1")
                                 if isinstance(o, bytes) else str(o)))
    jraw["entries"][0]["time_created_ns"] = float("nan")
    _fr(base, "fr9_json_nan", json.dumps(jraw).encode())
    _fr(base, "fr9_over_64mib", pickle.dumps({"version": "2.10", "entries": [],
                                              "pad": b"\0" * (65 << 20)}, protocol=4))
    frames = dict(raw)
    frames["entries"] = [dict(e, frames=[{"name": f"fn{ESC}", "filename": f"f{ESC}.py",
                                          "line": 1}]) for e in raw["entries"]]
    _fr(base, "fr9_frames_esc", pickle.dumps(frames, protocol=4))


def _tar(path: Path, members: list[tuple[str, bytes]], mode: str = "w") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, mode) as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))


def _zip_member_method(path: Path, data: bytes, method: int) -> None:
    """A zip whose one member claims compression method `method` (99: AES)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("rank0.json", data)
    blob = bytearray(path.read_bytes())
    for sig, at in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):
        pos = blob.find(sig)
        blob[pos + at:pos + at + 2] = struct.pack("<H", method)
    path.write_bytes(bytes(blob))


def _archives(base: Path) -> None:
    one = ONE.encode()
    _tar(base / "a9_tar_dotdot" / "run.tar", [("../../a9_escaped/rank0.json", one)])
    _tar(base / "a9_tar_absolute" / "run.tar", [("/tmp/a9_absolute_p43e/rank0.json", one)])
    _tar(base / "a9_tar_long_name" / "run.tar", [("d" * 5000 + "/rank0.json", one)])
    inner = io.BytesIO()
    with tarfile.open(fileobj=inner, mode="w") as t:
        info = tarfile.TarInfo("rank0.json")
        info.size = len(one)
        t.addfile(info, io.BytesIO(one))
    _tar(base / "a9_tar_in_tar" / "run.tar", [("inner.tar", inner.getvalue())])
    _tar(base / "a9_tar_bz2_named_tar" / "run.tar", [("rank0.json", one)], "w:bz2")
    _tar(base / "a9_tar_bad_checksum" / "run.tar", [("rank0.json", one)])
    blob = bytearray((base / "a9_tar_bad_checksum" / "run.tar").read_bytes())
    blob[148:156] = b"0000000\0"
    (base / "a9_tar_bad_checksum" / "run.tar").write_bytes(bytes(blob))
    (base / "a9_tar_zeros").mkdir()
    (base / "a9_tar_zeros" / "run.tar").write_bytes(b"\0" * 10240)
    zbuf = io.BytesIO()
    with zipfile.ZipFile(zbuf, "w") as z:
        z.writestr("rank0.json", one)
    _tar(base / "a9_tgz_of_zip" / "run.tgz", [("job.zip", zbuf.getvalue())], "w:gz")
    for folder, method in (("a9_zip_bzip2", zipfile.ZIP_BZIP2),
                           ("a9_zip_lzma", zipfile.ZIP_LZMA)):
        (base / folder).mkdir()
        with zipfile.ZipFile(base / folder / "run.zip", "w", method) as z:
            z.writestr("rank0.json", one)
    _zip_member_method(base / "a9_zip_method_99" / "run.zip", one, 99)
    (base / "a9_zip_comment_esc").mkdir()
    with zipfile.ZipFile(base / "a9_zip_comment_esc" / "run.zip", "w") as z:
        z.writestr("rank0.json", one)
        z.comment = ESC.encode()
    (base / "a9_zip_backslash").mkdir()
    with zipfile.ZipFile(base / "a9_zip_backslash" / "run.zip", "w") as z:
        z.writestr("..\\..\\a9_backslash_escaped\\rank0.json", one)
    (base / "a9_pax_huge_size").mkdir()
    with tarfile.open(base / "a9_pax_huge_size" / "run.tar", "w",
                      format=tarfile.PAX_FORMAT) as t:
        info = tarfile.TarInfo("rank0.json")
        info.size = len(one)
        info.pax_headers = {"size": str(10 ** 20)}
        t.addfile(info, io.BytesIO(one))


def _option_files(base: Path) -> None:
    opts = base / "opt9"
    opts.mkdir()
    spec = {"n_params": 7e9, "n_layers": 32, "hidden": 4096, "seq_len": 4096,
            "global_batch_tokens": 1 << 20}
    (opts / "tab.yaml").write_text("n_layers: 32\n\thidden: 4096\n")
    (opts / "set.yaml").write_text("n_layers: !!set {a, b}\n")
    (opts / "dup.yaml").write_text("n_layers: 32\nn_layers: 64\n")
    (opts / "bom.json").write_bytes(codecs.BOM_UTF8 + json.dumps(spec).encode())
    (opts / "layers_half.json").write_text(json.dumps(dict(spec, n_layers=1.5)))
    (opts / "hidden_negative.json").write_text(json.dumps(dict(spec, hidden=-4096)))
    (opts / "empty_map.json").write_text("{}")
    (opts / "many_keys.json").write_text(json.dumps({f"key{i}": i for i in range(10_000)}))
    (opts / "convention.json").write_text(json.dumps(dict(spec, convention="bogus")))
    os.mkfifo(opts / "fifo.yaml")
    pattern = {"pattern": "zzz_kernel", "library": "x", "collective": "all_reduce",
               "op": "o"}
    (opts / "ck_empty_pattern.json").write_text(json.dumps(
        {"patterns": [dict(pattern, pattern="")]}))
    (opts / "ck_dup.json").write_text(
        '{"patterns": [{"pattern": "a", "pattern": "b", "library": "x", '
        '"collective": "all_reduce", "op": "o"}]}')
    (opts / "ck_bom.json").write_bytes(codecs.BOM_UTF8 + json.dumps(
        {"patterns": [pattern]}).encode())
    (opts / "ck_collective_number.json").write_text(json.dumps(
        {"patterns": [dict(pattern, collective=5)]}))
    (opts / "ck_patterns_null.json").write_text('{"patterns": null}')
    (opts / "ck_lookahead.json").write_text(json.dumps(
        {"patterns": [dict(pattern, pattern="a(?=b)")]}))
    (opts / "ck_whitespace.json").write_bytes(b" " * (2 << 20))
    (opts / "ck_library_esc.json").write_text(json.dumps(
        {"patterns": [dict(pattern, library=f"lib{ESC}")]}))
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(opts / "ck.sock"))
    sock.close()


def _databases(base: Path) -> None:
    con = duckdb.connect(str(base / "foreign9.duckdb"))
    con.execute("CREATE TABLE users (id INTEGER)")
    con.execute("CREATE VIEW runs AS SELECT 1 AS run")
    con.close()
    (base / "onebyte.duckdb").write_bytes(b"x")
    (base / "foreign_link.duckdb").symlink_to(base / "foreign9.duckdb")
    (base / "db.gz").write_bytes(gzip.compress(b"x", mtime=0))


def _outputs(base: Path) -> None:
    """Files an --out must not replace, and odd things to write to."""
    (base / "out9").mkdir()
    os.link(base / "t" / "rank0.json.gz", base / "out9" / "hard_trace.json.gz")
    _tar(base / "out9" / "archive.md", [("x", b"x")])
    write_trace(base / "out9" / "trace.md", kineto_trace(rank=0, world_size=1))
    (base / "out9" / "dangling_deep.json").symlink_to(base / "nowhere" / "deeper" / "x.json")
    (base / "out9" / "loop_a").symlink_to(base / "out9" / "loop_b")
    (base / "out9" / "loop_b").symlink_to(base / "out9" / "loop_a")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(base / "out9" / "plan.sock"))
    sock.close()
    os.mkfifo(base / "out9" / "fifo_dir")


def _escape_runs(base: Path) -> None:
    """Runs whose names from the traces hold escape codes: a host, C1 kernels, a failed
    file's name (a partial run), an NCCL log's IB device."""
    for r in range(2):
        trace = kineto_trace(rank=r, world_size=2)
        trace["host_name"] = f"host{ESC}"
        write_trace(base / "hostesc" / f"rank{r}.json.gz", trace)
        trace = kineto_trace(rank=r, world_size=2)
        _named_kernels("gemm\x9b2J\x85kernel\x1b[31m")(trace)
        write_trace(base / "c1" / f"rank{r}.json.gz", trace)
    write_trace(base / "partesc" / "rank0.json.gz", kineto_trace(rank=0, world_size=2))
    write_trace(base / "partesc" / f"rank1{ESC}.json", "{broken")
    for r in range(2):
        write_trace(base / "ncclesc" / f"rank{r}.json.gz", kineto_trace(rank=r, world_size=2))
    (base / "ncclesc" / "nccl.log").write_text((base / "n9_ib_dev_esc" / "nccl.log").read_text())
    db = str(base / "db.duckdb")
    for folder in ("hostesc", "c1", "ncclesc"):
        assert cli(("ingest", str(base / folder), "--db", db, "--run", folder,
                    "--quiet"))[0] == 0
    assert cli(("ingest", str(base / "partesc"), "--db", db, "--run", "partesc",
                "--quiet"))[0] == 3


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    base = tmp_path_factory.mktemp("audit9")
    for r in range(2):
        write_trace(base / "t3" / f"rank{r}.json.gz", kineto_trace(rank=r, world_size=2))
    base_database(base, "esc", esc_kernels(f"gemm{ESC}\u202ekernel", f"pg{ESC}x"))
    _traces(base)
    _nccl(base)
    _flight_recorder(base)
    _archives(base)
    _option_files(base)
    _databases(base)
    _outputs(base)
    _escape_runs(base)
    (base / "afile").write_text("x")
    yield base
