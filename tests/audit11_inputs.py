"""The fixture of audit round 11 (issue 43): test_audit_round11*.py. Every hostile input
is built in code, each in a folder of its own; the check of one case is round 8's
(tests/audit8_inputs.py: exit code, the start of the first error line, one line, no
traceback, no raw control character, nothing written in the current folder, a refused
command leaves the database as it was)."""

from __future__ import annotations

import gzip
import io
import json
import lzma
import os
import pickle
import sqlite3
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from audit8_inputs import ESC, FR_DUMP, _inspector_line, base_database, cli
from conftest import kineto_trace, write_trace

from stepscope.ingest.nccl.safe_pickle import load_plain

ONE = json.dumps(kineto_trace(rank=0, world_size=1))
OSC = "\x1b]0;owned\x07"
C1 = "\x9b2J"


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


def _events(cat: str, field: str, value: Any) -> Any:
    def edit(trace: dict[str, Any]) -> None:
        for e in trace["traceEvents"]:
            if e.get("cat") == cat:
                e[field] = value
    return edit


def _dist(field: str, value: Any) -> Any:
    def edit(trace: dict[str, Any]) -> None:
        trace["distributedInfo"][field] = value
    return edit


def _sqlite_bytes(base: Path) -> bytes:
    path = base / "scratch.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    data = path.read_bytes()
    path.unlink()
    return data


def _duckdb_bytes(base: Path) -> bytes:
    path = base / "scratch.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t (x INTEGER)")
    con.close()
    data = path.read_bytes()
    path.unlink()
    return data


def _traces(base: Path) -> None:
    """Kineto traces of shapes rounds 4 to 10 did not try."""
    _kineto(base, "k_ts_list", _events("kernel", "ts", [1, 2]))
    _kineto(base, "k_dur_object", _events("kernel", "dur", {"us": 5}))
    _kineto(base, "k_args_number", _events("kernel", "args", 7))
    _kineto(base, "k_cpu_ts_text", _events("cpu_op", "ts", "abc"))
    _kineto(base, "k_events_string", lambda t: t.update(traceEvents="[]"))
    _kineto(base, "k_world_2_31", _dist("world_size", 2 ** 31))
    _kineto(base, "k_rank_negative", _dist("rank", -1))
    _kineto(base, "k_rank_arabic", _dist("rank", "\u0660"))
    _kineto(base, "k_base_2_62", lambda t: t.update(baseTimeNanoseconds=2 ** 62))
    _kineto(base, "k_base_fraction", lambda t: t.update(baseTimeNanoseconds=1.5))
    _kineto(base, "k_zlib", lambda t: zlib.compress(json.dumps(t).encode()),
            "rank0.json.gz")
    _kineto(base, "k_xz", lambda t: lzma.compress(json.dumps(t).encode()), "rank0.json.gz")
    _kineto(base, "k_sqlite", lambda t: _sqlite_bytes(base))
    _kineto(base, "k_duckdb", lambda t: _duckdb_bytes(base))
    _kineto(base, "k_lead_spaces", lambda t: " " * (1 << 20) + json.dumps(t))
    _kineto(base, "k_gz_lead_spaces",
            lambda t: gzip.compress((" " * (8 << 20) + json.dumps(t)).encode(), mtime=0),
            "rank0.json.gz")
    _kineto(base, "k_cpu_dur_nan_text", _events("cpu_op", "dur", "NaN"))
    _kineto(base, "k_kernel_ts_bool", _events("kernel", "ts", False))
    _kineto(base, "k_world_text_2", _dist("world_size", "2x"))
    # two ranks, one name with an escape in its file name and a stray file named with OSC
    for r in range(2):
        write_trace(base / "k_esc_files" / f"rank{r}{ESC}.json",
                    kineto_trace(rank=r, world_size=2))
    write_trace(base / "k_esc_stray" / "rank0.json", kineto_trace(rank=0, world_size=2))
    write_trace(base / "k_esc_stray" / "rank1.json", kineto_trace(rank=1, world_size=2))
    write_trace(base / "k_esc_stray" / f"x{OSC}.json", "{broken")
    # a folder whose own name holds an escape, two ranks (a trace path for report/diff)
    for r in range(2):
        write_trace(base / f"dir{ESC}x" / f"rank{r}.json", kineto_trace(rank=r, world_size=2))


NCCL_HEAD = ("node0:1:1 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.10<0>\n"
             "node0:1:1 [0] NCCL INFO NCCL version {version}\n")


def _nccl(base: Path) -> None:
    """NCCL_DEBUG logs and Inspector JSONL of shapes rounds 4 to 10 did not try."""
    comm = ("node0:1:2 [0] NCCL INFO comm 0x55a0 rank 0 nRanks 2 nNodes 1 localRanks 2 "
            "localRank 0 MNNVL 0\n")
    for version in ("2.22.3+cuda12.6", "2.25.1+cuda12.8", "2.27.3+cuda12.9"):
        folder = "n_" + version.split("+")[0].replace(".", "_")
        write_trace(base / folder / "nccl.log", NCCL_HEAD.format(version=version) + comm
                    + "node0:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n"
                    + "node0:1:2 [0] NCCL INFO ncclCommInitRankConfig comm 0x55a0 rank 0 "
                    "nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0xabc - Init "
                    "COMPLETE\n")
    write_trace(base / "n_plain_text" / "nccl.log",
                "The quick brown fox jumps over the lazy dog.\n" * 50)
    (base / "fr_plain_text").mkdir()
    (base / "fr_plain_text" / "nccl_trace_rank_3").write_text("hello, this is no dump\n")
    write_trace(base / "i_rank_eq_n" / "node0-pid1.log",
                (_inspector_line(header__rank=1) + "\n") * 3)
    write_trace(base / "n_ib_c1" / "nccl.log", NCCL_HEAD.format(version="2.21.5") + comm
                + f"node0:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5{C1}_0:1/IB ; OOB "
                "eth0:10.0.0.10<0>\n")


def _fr(base: Path, folder: str, data: bytes) -> None:
    (base / folder).mkdir()
    (base / folder / "nccl_trace_rank_8").write_bytes(data)


def _flight_recorder(base: Path) -> None:
    """Flight Recorder pickles with opcodes rounds 4 to 10 did not try."""
    marker = base / "PWNED"
    _fr(base, "fr_inst", f"(S'touch {marker}'\nios\nsystem\n.".encode())
    _fr(base, "fr_obj", b"\x80\x02(cos\nsystem\nX\x05\x00\x00\x00toucho.")
    _fr(base, "fr_newobj_ex", b"\x80\x04cbuiltins\nobject\n)}\x92.")
    _fr(base, "fr_complex", pickle.dumps({"version": "2.4", "entries": [], "x": 1j},
                                         protocol=4))
    _fr(base, "fr_put_2_31", b"\x80\x04}r\xff\xff\xff\x7f.")
    _fr(base, "fr_frozenset", b"\x80\x04(K\x01K\x02\x91.")
    raw = load_plain(FR_DUMP.read_bytes())
    (base / f"fr_dir{ESC}").mkdir()
    (base / f"fr_dir{ESC}" / "nccl_trace_rank_8").write_bytes(pickle.dumps(raw, protocol=4))


def _tar(path: Path, members: list[tuple[str, bytes]], mode: str = "w") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, mode) as t:  # type: ignore[call-overload]
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))


def _archives(base: Path) -> None:
    """Archives of shapes rounds 4 to 10 did not try."""
    one = ONE.encode()
    (base / "a_zip64").mkdir()
    with zipfile.ZipFile(base / "a_zip64" / "run.zip", "w", zipfile.ZIP_DEFLATED) as z, \
            z.open("rank0.json", "w", force_zip64=True) as fh:
        fh.write(one)
    (base / "a_zip_gz_member").mkdir()
    with zipfile.ZipFile(base / "a_zip_gz_member" / "run.zip", "w") as z:
        z.writestr("rank0.json.gz", gzip.compress(one, mtime=0))
    _tar(base / "a_tar_longname" / "run.tar", [("d/" * 3000 + "rank0.json", one)])
    _tar(base / "a_tar_xz" / "run.tar", [("rank0.json", one)], "w:xz")
    (base / "a_zip_cut").mkdir()
    with zipfile.ZipFile(base / "a_zip_cut" / "run.zip", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("rank0.json", one)
    data = (base / "a_zip_cut" / "run.zip").read_bytes()
    (base / "a_zip_cut" / "run.zip").write_bytes(data[: len(data) - 30])
    (base / "a_zip_osc_member").mkdir()
    with zipfile.ZipFile(base / "a_zip_osc_member" / "run.zip", "w") as z:
        z.writestr(f"rank0{OSC}.json", b"{broken")
    _tar(base / "a_tar_c1_member" / "run.tar.gz", [(f"rank0{C1}.json", b"{broken")], "w:gz")


def _option_files(base: Path) -> None:
    opts = base / "opt"
    opts.mkdir()
    (opts / "ck_zero_link.json").symlink_to("/dev/zero")
    (opts / "ck_repeat.json").write_text(json.dumps({"patterns": [
        {"pattern": "a{1000}{1000}{1000}", "library": "x", "collective": "all_reduce"}]}))
    (opts / "ck_pattern_list.json").write_text(json.dumps({"patterns": [
        {"pattern": ["a"], "library": "x", "collective": "all_reduce"}]}))
    (opts / "model_tag_str.yaml").write_text("n_layers: !!str 32\nhidden: 4096\n"
                                             "n_heads: 32\n")
    (opts / "model_laughs.yaml").write_text(
        "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
        + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 10)
                  + "]\n" for i in range(8)))
    (opts / "model_hidden_1e308.yaml").write_text("n_layers: 2\nhidden: 1e308\nn_heads: 2\n")
    (opts / "model_merge_list.yaml").write_text("<<: [1, 2]\n")
    (opts / "model_int_key.yaml").write_text("1: 2\n")
    (opts / "model_ck.json").write_text(json.dumps({"patterns": []}))
    (opts / "good_model.yaml").write_text("n_layers: 2\nhidden: 64\nn_heads: 2\n")


def _databases(base: Path) -> None:
    """Databases rounds 4 to 10 did not try."""
    con = duckdb.connect(str(base / "foreign_like.duckdb"))
    con.execute("CREATE TABLE runs (run VARCHAR, color VARCHAR)")
    con.execute("CREATE TABLE schema_info (key VARCHAR, value VARCHAR)")
    con.execute("INSERT INTO schema_info VALUES ('schema_version', 'banana')")
    con.close()
    con = duckdb.connect(str(base / "foreign_tables.duckdb"))
    con.execute("CREATE TABLE stepscope_tables (name VARCHAR)")
    con.execute("CREATE TABLE gpu_ops (x INTEGER)")
    con.close()
    from stepscope.ingest.schema import SCHEMA_VERSION
    db = base / "newer.duckdb"
    db.write_bytes((base / "db.duckdb").read_bytes())
    con = duckdb.connect(str(db))
    con.execute("UPDATE schema_info SET value = ? WHERE key = 'schema_version'",
                [str(SCHEMA_VERSION + 1)])
    con.close()
    data = (base / "db.duckdb").read_bytes()
    (base / "half.duckdb").write_bytes(data[: len(data) // 2])
    sqlite3.connect(base / "sqlite.duckdb").execute("CREATE TABLE runs (x)").connection.commit()


def _outputs(base: Path) -> None:
    """Files an output option must not replace."""
    (base / "out").mkdir()
    (base / "out" / "old.md.gz").write_bytes(gzip.compress(b"# old report\n", mtime=0))
    with zipfile.ZipFile(base / "out" / "old.zip", "w") as z:
        z.writestr("x", "y")
    write_trace(base / "out" / "trace.json", kineto_trace(rank=0, world_size=1))
    duckdb.connect(str(base / "out" / "other.duckdb")).close()
    (base / "out" / "loop_a").symlink_to(base / "out" / "loop_b")
    (base / "out" / "loop_b").symlink_to(base / "out" / "loop_a")
    (base / "out" / "trace_link.json").symlink_to(base / "t" / "rank0.json.gz")
    os.link(base / "db.duckdb", base / "out" / "db_hard.md")
    (base / "out" / "nowhere_link").symlink_to(base / "missing_target")


def _batch2(base: Path) -> None:
    """The inputs of the second batch (run once against the unchanged code, after the
    first): unreadable files and folders, a read-only database file, a .wal that is a
    folder, a job's nights with escapes in its kernel names, bounded work on many
    thread names and WARN lines."""
    for r in range(2):
        write_trace(base / "unread" / f"rank{r}.json.gz", kineto_trace(rank=r, world_size=2))
        write_trace(base / "unread_dir" / ("sub" if r else ".") / f"rank{r}.json.gz",
                    kineto_trace(rank=r, world_size=2))
    os.chmod(base / "unread" / "rank1.json.gz", 0)
    os.chmod(base / "unread_dir" / "sub", 0)
    (base / "opt" / "unreadable.yaml").write_text("n_layers: 2\n")
    os.chmod(base / "opt" / "unreadable.yaml", 0)
    (base / "opt" / "unreadable_ck.json").write_text('{"patterns": []}')
    os.chmod(base / "opt" / "unreadable_ck.json", 0)
    (base / "ro_db.duckdb").write_bytes((base / "db.duckdb").read_bytes())
    os.chmod(base / "ro_db.duckdb", 0o444)
    (base / "walfolder.duckdb").write_bytes((base / "db.duckdb").read_bytes())
    (base / "walfolder.duckdb.wal").mkdir()
    assert cli(("nightly", str(base / "esc"), "--db", str(base / "hist.duckdb"), "--job",
                "jesc", "--out-dir", str(base / "hist_out"), "--quiet"))[0] in (0, 3)
    threads = [{"ph": "M", "name": "thread_name", "pid": 100, "tid": 10_000 + i,
                "args": {"name": f"t{i}{ESC}"}} for i in range(50_000)]
    write_trace(base / "k_50k_threads" / "rank0.json.gz",
                kineto_trace(rank=0, world_size=1, extra_events=threads))
    comm = ("node0:1:2 [0] NCCL INFO comm 0x55a0 rank 0 nRanks 2 nNodes 1 localRanks 2 "
            "localRank 0 MNNVL 0\n")
    write_trace(base / "n_200k_warn" / "nccl.log", NCCL_HEAD.format(version="2.23.4") + comm
                + f"node0:1:2 [0] NCCL WARN NET/IB : got async event{OSC}\n" * 200_000)


def _esc_trace(rank: int) -> dict[str, Any]:
    """A rank whose GEMM kernels are named with an OSC sequence and a C1 control."""
    trace = kineto_trace(rank=rank, world_size=2)
    for e in trace["traceEvents"]:
        if e.get("cat") == "kernel" and e["name"].startswith("sm90"):
            e["name"] = f"gemm{OSC}{C1}k"
    trace["distributedInfo"]["backend"] = "nccl"
    return trace


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    base = tmp_path_factory.mktemp("audit11")
    base_database(base, "esc", _esc_trace)
    _traces(base)
    _nccl(base)
    _flight_recorder(base)
    _archives(base)
    _option_files(base)
    _databases(base)
    _outputs(base)
    (base / "afile").write_text("x")
    _batch2(base)
    (base / "ro").mkdir()
    (base / "ro" / "db.duckdb").write_bytes((base / "db.duckdb").read_bytes())
    os.chmod(base / "ro", 0o555)
    yield base
