"""The fixture and the check of audit round 12 (issue 43): test_audit_round12.py,
test_audit_round12_inputs.py and test_audit_round12_dashboard.py. Every hostile input is
built in code, each in a folder of its own. The check is round 8's (tests/audit8_inputs.py:
exit code, one line, no traceback or internal error, no raw control character on either
stream, nothing written in the current folder, a refused command leaves the database as it
was) with what the docs promise of the line: it starts with "error: " (or the interrupt
line) and names the file or option it is about, never a guessed sentence."""

from __future__ import annotations

import bz2
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
    base_database,
    cli,
    esc_kernels,
    raw_controls,
)
from conftest import kineto_trace, write_trace

from stepscope.ingest.nccl.safe_pickle import load_plain
from stepscope.ingest.schema import SCHEMA_VERSION

# argv, env, exit code, what the first error line must contain (after "error: ")
Case12 = tuple[tuple[str, ...], dict[str, str] | None, int, tuple[str, ...]]
ONE = json.dumps(kineto_trace(rank=0, world_size=1))
C1 = "\x9b2J\x9d0;t\x9c"
BIDI = "\u202egnp.exe"
MARKER = Path("/tmp/audit12_pwned")
SPEC = {"n_params": 7e9, "n_layers": 32, "hidden": 4096, "seq_len": 4096,
        "global_batch_tokens": 1 << 20}
CK = {"pattern": "zzz_kernel", "library": "x", "collective": "all_reduce", "op": "o"}


def fill(root: Path, text: str) -> str:
    return text.format(db=str(root / "db.duckdb"), t=str(root / "t"), root=str(root))


def check12(root: Path, case: Case12, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
            file_case: bool = False) -> None:
    """Run one case in this process: the exit code; for a failure one line (two for a file
    case: the file's, then 'nothing ingested') that starts with 'error: ' and holds each
    of `said`; no traceback, internal error or raw control character; nothing written in
    the current folder; a usage error (2) leaves the database as it was."""
    argv, env, want_rc, said = case
    monkeypatch.chdir(tmp_path)
    if argv[0] == "dashboard":
        import stepscope.commands.dashboard_cmd as dashboard_cmd

        def no_server(*args: object, **kwargs: object) -> None:
            raise AssertionError("the dashboard started its server")

        monkeypatch.setattr(dashboard_cmd, "start_server", no_server)
    before = (root / "db.duckdb").stat().st_mtime_ns
    rc, err, out = cli(tuple(fill(root, a) if "{" in a else a for a in argv),
                       {k: fill(root, v) for k, v in (env or {}).items()})
    errors = [x for x in err if not x.startswith(("warning:", "note:", "export:", "wrote "))]
    assert not any("Traceback" in x or "internal error" in x for x in err), err
    assert not raw_controls("\n".join(err)) and not raw_controls(out), (err, out[:2000])
    assert not list(tmp_path.iterdir()) and not MARKER.exists()
    if want_rc == 0:
        assert rc == 0 and not any(x.startswith("error") for x in err), (rc, err)
        return
    assert rc == want_rc and errors and errors[0].startswith("error: "), (rc, err)
    assert all(fill(root, s) in errors[0] for s in said), (said, err)
    if file_case:
        assert len(errors) == 2 and errors[1].startswith("error: nothing ingested"), err
    else:
        assert len(errors) == 1, err
    if want_rc == 2:
        assert (root / "db.duckdb").stat().st_mtime_ns == before


def _kineto(base: Path, folder: str, edit: Any, name: str = "rank0.json") -> None:
    trace = kineto_trace(rank=0, world_size=1)
    trace = edit(trace) or trace
    write_trace(base / folder / name, trace)


def _dist(field: str, value: Any) -> Any:
    def edit(trace: dict[str, Any]) -> None:
        trace["distributedInfo"][field] = value
    return edit


def _top(field: str, value: Any) -> Any:
    def edit(trace: dict[str, Any]) -> None:
        trace[field] = value
    return edit


def _traces(base: Path) -> None:
    """Kineto traces of odd shapes not tried before."""
    _kineto(base, "k12_rank_half", _dist("rank", 1.5))
    _kineto(base, "k12_rank_true", _dist("rank", True))
    _kineto(base, "k12_rank_list", _dist("rank", [0]))
    _kineto(base, "k12_world_object", _dist("world_size", {"n": 1}))
    _kineto(base, "k12_base_1e30", _top("baseTimeNanoseconds", 1e30))
    _kineto(base, "k12_base_true", _top("baseTimeNanoseconds", True))
    _kineto(base, "k12_events_nulls", _top("traceEvents", [None, None]))
    _kineto(base, "k12_events_numbers", _top("traceEvents", [1, 2, 3]))
    _kineto(base, "k12_events_strings", _top("traceEvents", ["a", "b"]))
    write_trace(base / "k12_brackets" / "rank0.json", "[" * (1 << 20))
    write_trace(base / "k12_base_nan" / "rank0.json",
                ONE[:-1] + ', "baseTimeNanoseconds": NaN}')
    (base / "k12_bz2_named_gz").mkdir()
    (base / "k12_bz2_named_gz" / "rank0.json.gz").write_bytes(bz2.compress(ONE.encode()))
    (base / "k12_zstd_magic").mkdir()
    (base / "k12_zstd_magic" / "rank0.json.gz").write_bytes(
        b"\x28\xb5\x2f\xfd" + os.urandom(64))
    (base / "k12_gz_of_nothing_but_nuls").mkdir()
    (base / "k12_gz_of_nothing_but_nuls" / "rank0.json.gz").write_bytes(
        gzip.compress(b"\x00" * 100_000, mtime=0))
    trace = kineto_trace(rank=0, world_size=1)
    for e in trace["traceEvents"]:
        if e.get("cat") == "kernel":
            e["name"] = "k" * (1 << 20)
    write_trace(base / "k12_kernel_name_1mib" / "rank0.json.gz", trace)
    trace = kineto_trace(rank=0, world_size=1)
    trace["deviceProperties"] = [{"name": "H100" + "x" * (4 << 20)}]
    write_trace(base / "k12_device_name_4mib" / "rank0.json.gz", trace)
    write_trace(base / "k12_broken_bidi" / f"rank0{BIDI}.json", "{broken")
    write_trace(base / f"k12_folder{C1}" / "rank0.json", "{broken")
    write_trace(base / "k12_two_objects_gz" / "rank0.json.gz", ONE + ONE)


NCCL_HEAD = ("node0:1:1 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.10<0>\n"
             "node0:1:1 [0] NCCL INFO NCCL version {version}\n")


def _nccl(base: Path) -> None:
    """NCCL_DEBUG logs of the shapes of 2.20, 2.21, 2.24, 2.26 (each as those versions
    print the comm init), and Inspector lines with odd values not tried before."""
    init = ("node0:1:2 [0] NCCL INFO comm 0x55a0 rank 0 nRanks 2 nNodes 1 localRanks 2 "
            "localRank 0 MNNVL 0\n"
            "node0:1:2 [0] NCCL INFO Channel 00/02 :    0   1\n"
            "node0:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
            "node0:1:2 [0] NCCL INFO Connected all rings\n"
            "node0:1:2 [0] NCCL INFO ncclCommInitRank comm 0x55a0 rank 0 nranks 2 cudaDev 0 "
            "nvmlDev 0 busId 18000 commId 0x1 - Init COMPLETE\n")
    for version in ("2.20.5+cuda12.4", "2.21.5+cuda12.4", "2.24.3+cuda12.6",
                    "2.26.2+cuda12.8"):
        short = version.split("+")[0].replace(".", "_")
        write_trace(base / f"n12_{short}" / "nccl.log",
                    NCCL_HEAD.format(version=version) + init)
    write_trace(base / "n12_crlf_2_26" / "nccl.log",
                (NCCL_HEAD.format(version="2.26.2+cuda12.8") + init).replace("\n", "\r\n"))
    write_trace(base / "n12_warn_c1" / "nccl.log", NCCL_HEAD.format(version="2.24.3")
                + init + f"node0:1:2 [0] transport.cc:1 NCCL WARN bad {C1} thing\n")
    write_trace(base / "n12_hostname_esc" / "nccl.log",
                (NCCL_HEAD.format(version="2.24.3") + init).replace("node0", f"node{ESC}"))
    write_trace(base / "n12_50k_lines" / "nccl.log", NCCL_HEAD.format(version="2.26.2")
                + init * 10_000)
    for folder, change in (("i12_size_negative", {"coll_perf__coll_msg_size_bytes": -1}),
                           ("i12_sn_negative", {"coll_perf__coll_sn": -1}),
                           ("i12_nranks_half", {"header__n_ranks": 1.5}),
                           ("i12_algobw_negative", {"coll_perf__coll_algobw_gbs": -1.0}),
                           ("i12_time_2_70", {"coll_perf__coll_exec_time_us": 2 ** 70}),
                           ("i12_rank_text", {"header__rank": "0"}),
                           ("i12_coll_object", {"coll_perf__coll": {"a": 1}})):
        write_trace(base / folder / "node0-pid1.log",
                    "\n".join([_inspector_line(**change)] * 3) + "\n")
    line = _inspector_line(coll_perf__coll_algobw_gbs=float("nan"))
    write_trace(base / "i12_algobw_nan" / "node0-pid1.log", (line + "\n") * 3)


def _fr(base: Path, folder: str, data: bytes) -> None:
    (base / folder).mkdir()
    (base / folder / "nccl_trace_rank_8").write_bytes(data)


def _colliding_ints(n: int) -> bytes:
    """A protocol-4 pickle of {"version": "2.4", "entries": [], "x": {...}} whose inner
    dict has `n` int keys that all hash to 0 in CPython (multiples of 2^61 - 1): a reader
    that builds that dict goes quadratic. Written opcode by opcode (building the dict here
    would be quadratic too)."""
    mod = (1 << 61) - 1
    body = bytearray(b"\x80\x04}(\x8c\x07version\x8c\x032.4\x8c\x07entries]\x8c\x01x}(")
    for i in range(1, n):
        key = (i * mod).to_bytes(16, "little", signed=True)
        body += b"\x8a" + bytes([len(key)]) + key + b"K\x00"
    body += b"uu."
    return bytes(body)


def _flight_recorder(base: Path) -> None:
    raw = load_plain(FR_DUMP.read_bytes())
    first = dict(raw["entries"][0])
    _fr(base, "fr12_stack_global_system",
        b"\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00\x8c\x02os\x8c\x06system\x93"
        b"\x8c\x04true\x85R.")
    _fr(base, "fr12_binunicode_2gib", b"\x80\x04X\xff\xff\xff\x7fabc.")
    _fr(base, "fr12_frame_2_60", b"\x80\x04\x95" + struct.pack("<Q", 1 << 60) + b"N.")
    _fr(base, "fr12_seq_2_200", pickle.dumps(
        dict(raw, entries=[dict(first, collective_seq_id=1 << 200)]), protocol=4))
    _fr(base, "fr12_time_nan", pickle.dumps(
        dict(raw, entries=[dict(first, time_created_ns=float("nan"))]), protocol=4))
    _fr(base, "fr12_int_keys_colliding", _colliding_ints(200_000))
    shared = [0] * 1000
    _fr(base, "fr12_shared_refs", pickle.dumps(
        dict(raw, x=[[shared] * 1000] * 100), protocol=4))
    _fr(base, "fr12_global_dict", b"\x80\x02cbuiltins\ndict\n)R.")
    _fr(base, "fr12_profiling_name_c1", pickle.dumps(
        dict(raw, entries=[dict(e, profiling_name=f"nccl:{C1}x") for e in raw["entries"]]),
        protocol=4))


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes]], mode: str = "w") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, mode) as t:  # type: ignore[call-overload]
        for info, data in members:
            info.size = len(data) if info.isfile() else 0
            t.addfile(info, io.BytesIO(data) if info.isfile() else None)


def _info(name: str, kind: bytes = tarfile.REGTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    return info


def _archives(base: Path) -> None:
    one = ONE.encode()
    _tar(base / "a12_tar_dup" / "run.tar", [(_info("rank0.json"), one),
                                            (_info("rank0.json"), b"{broken")])
    _tar(base / "a12_tar_chr" / "run.tar", [(_info("rank0.json"), one),
                                            (_info("rank1.json", tarfile.CHRTYPE), b"")])
    _tar(base / "a12_tar_fifo" / "run.tar", [(_info("rank0.json", tarfile.FIFOTYPE), b"")])
    _tar(base / "a12_tar_bidi" / "run.tar", [(_info(f"rank0{BIDI}.json"), b"{broken")])
    (base / "a12_zip_in_zip").mkdir()
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as z:
        z.writestr("rank0.json", one)
    with zipfile.ZipFile(base / "a12_zip_in_zip" / "run.zip", "w") as z:
        z.writestr("inner.zip", inner.getvalue())
    (base / "a12_zip_empty").mkdir()
    (base / "a12_zip_empty" / "run.zip").write_bytes(b"")
    (base / "a12_tgz_plain_json").mkdir()
    (base / "a12_tgz_plain_json" / "run.tgz").write_bytes(one)
    (base / "a12_targz_named_zip").mkdir()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        info = tarfile.TarInfo("rank0.json")
        info.size = len(one)
        t.addfile(info, io.BytesIO(one))
    (base / "a12_targz_named_zip" / "run.zip").write_bytes(buf.getvalue())
    (base / "a12_zip_spaces_then_trace").mkdir()
    with zipfile.ZipFile(base / "a12_zip_spaces_then_trace" / "run.zip", "w",
                         zipfile.ZIP_DEFLATED) as z:
        z.writestr("rank0.json", b" " * (4 << 20) + one)
    (base / "a12_zip_c1_broken").mkdir()
    with zipfile.ZipFile(base / "a12_zip_c1_broken" / "run.zip", "w") as z:
        z.writestr(f"rank0{C1}.json", b"{broken")


def _option_files(base: Path) -> None:
    opts = base / "opt12"
    opts.mkdir()
    (opts / "model.yaml").write_text(json.dumps(SPEC))
    (opts / "ck.json").write_text(json.dumps({"patterns": [CK]}))
    (opts / "python_object.yaml").write_text(
        f"n_layers: !!python/object/apply:os.system ['touch {MARKER}']\n")
    (opts / "layers_true.json").write_text(json.dumps(dict(SPEC, n_layers=True)))
    (opts / "params_zero.json").write_text(json.dumps(dict(SPEC, n_params=0)))
    (opts / "two_docs.yaml").write_text("n_layers: 32\n---\nhidden: 4096\n")
    with open(opts / "sparse_3g.yaml", "wb") as f:
        f.truncate(3 << 30)
    with open(opts / "ck_sparse_3g.json", "wb") as f:
        f.truncate(3 << 30)
    (opts / "ck_bad_regex.json").write_text(json.dumps({"patterns": [dict(CK, pattern="(")]}))
    (opts / "ck_nan.json").write_text('{"patterns": [{"pattern": NaN, "library": "x", '
                                      '"collective": "all_reduce", "op": "o"}]}')
    (opts / "ck_list.json").write_text(json.dumps([CK]))
    (opts / "ck_unknown_field.json").write_text(json.dumps(
        {"patterns": [dict(CK, colour="red")]}))
    (opts / "ck_role_bogus.json").write_text(json.dumps({"patterns": [dict(CK, role="x")]}))
    (opts / "ck_2000.json").write_text(json.dumps(
        {"patterns": [dict(CK, pattern=f"zzz_kernel_{i}_[a-z]+") for i in range(2000)]}))


def _databases(base: Path) -> None:
    dbs = base / "db12"
    dbs.mkdir()
    (dbs / "gz.duckdb").write_bytes(gzip.compress(b"x" * 100, mtime=0))
    with zipfile.ZipFile(dbs / "zip.duckdb", "w") as z:
        z.writestr("x", "y")
    con = duckdb.connect()
    con.execute(f"COPY (SELECT 1 AS a) TO '{dbs / 'pq.duckdb'}' (FORMAT parquet)")
    con.close()
    (dbs / "folder.duckdb").mkdir()
    con = duckdb.connect(str(dbs / "foreign.duckdb"))
    con.execute("CREATE TABLE gpu_ops (id INTEGER, who VARCHAR)")
    con.execute("CREATE TABLE runs (x BLOB)")
    con.close()
    (dbs / "random.duckdb").write_bytes(os.urandom(1 << 16))
    full = (base / "db.duckdb").read_bytes()
    (dbs / "head.duckdb").write_bytes(full[:4096])
    os.symlink(dbs / "loop_b.duckdb", dbs / "loop_a.duckdb")
    os.symlink(dbs / "loop_a.duckdb", dbs / "loop_b.duckdb")
    os.symlink(dbs / "nowhere.duckdb", dbs / "dangling.duckdb")
    newer = dbs / "newer.duckdb"
    newer.write_bytes(full)
    con = duckdb.connect(str(newer))
    con.execute("UPDATE schema_info SET value = ? WHERE key = 'schema_version'",
                [str(SCHEMA_VERSION + 5)])
    con.close()


def _outputs(base: Path) -> None:
    outs = base / "out12"
    outs.mkdir()
    (outs / "old.bz2").write_bytes(bz2.compress(b"keep me"))
    (outs / "old.zst").write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" * 16)
    write_trace(outs / "kineto.json", ONE)
    os.symlink(base / "db.duckdb", outs / "db_link.md")
    os.symlink(base / "db.duckdb.wal", outs / "wal_link.json")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(outs / "nightly.sock"))
    sock.close()


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    base = tmp_path_factory.mktemp("audit12")
    base_database(base, "esc", esc_kernels(f"gemm{ESC}{C1}\u202ekernel", f"pg{ESC}x"))
    _traces(base)
    _nccl(base)
    _flight_recorder(base)
    _archives(base)
    _option_files(base)
    _databases(base)
    _outputs(base)
    (base / "afile").write_text("x")
    MARKER.unlink(missing_ok=True)
    yield base
