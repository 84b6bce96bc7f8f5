"""The fixture of audit round 13 (issue 43): test_audit_round13.py,
test_audit_round13_inputs.py and test_audit_round13_dashboard.py. Every hostile input is
built in code, each in a folder of its own. The check is round 8's (tests/audit8_inputs.py:
exit code, one line, no traceback or internal error, no raw control character on either
stream, nothing written in the current folder, a refused command leaves the database as it
was) with what the README and docs/cli.md promise of the line, as round 12 wrote it
(audit12_inputs.check12): it starts with "error: " and names the file or option it is
about, never a guessed sentence."""

from __future__ import annotations

import gzip
import io
import json
import os
import pickle
import shutil
import sqlite3
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
    esc_kernels,
)
from audit12_inputs import MARKER, fill
from conftest import kineto_trace, write_trace

from stepscope.ingest.nccl.safe_pickle import load_plain

# argv, env, exit code, what the first error line must hold (after "error: ")
Case13 = tuple[tuple[str, ...], dict[str, str] | None, int, tuple[str, ...]]
ONE = json.dumps(kineto_trace(rank=0, world_size=1))
C1 = "\x9b0;x\x9c\x85"
SPEC = {"n_params": 7e9, "n_layers": 32, "hidden": 4096, "seq_len": 4096,
        "global_batch_tokens": 1 << 20}
CK = {"pattern": "zzz13_kernel", "library": "x", "collective": "all_reduce", "op": "o"}

__all__ = ["C1", "CK", "ESC", "MARKER", "ONE", "SPEC", "Case13", "fill", "root"]


def _kineto(base: Path, folder: str, edit: Any, name: str = "rank0.json") -> None:
    trace = kineto_trace(rank=0, world_size=1)
    trace = edit(trace) or trace
    write_trace(base / folder / name, trace)


def _set(section: str | None, field: str, value: Any) -> Any:
    def edit(trace: dict[str, Any]) -> None:
        (trace[section] if section else trace)[field] = value
    return edit


def _on_events(field: str, value: Any, cat: str = "kernel") -> Any:
    def edit(trace: dict[str, Any]) -> None:
        for e in trace["traceEvents"]:
            if e.get("cat") == cat:
                e[field] = value
    return edit


def _traces(base: Path) -> None:
    """Kineto traces of odd shapes not tried in rounds 4-12."""
    _kineto(base, "k13_rank_2_31", _set("distributedInfo", "rank", 1 << 31))
    _kineto(base, "k13_world_negative", _set("distributedInfo", "world_size", -1))
    _kineto(base, "k13_base_negative", _set(None, "baseTimeNanoseconds", -1))
    _kineto(base, "k13_base_2_62", _set(None, "baseTimeNanoseconds", 1 << 62))
    _kineto(base, "k13_args_string", _on_events("args", "not an object"))
    _kineto(base, "k13_dur_text_abc", _on_events("dur", "abc"))
    _kineto(base, "k13_ts_list", _on_events("ts", [1, 2]))
    _kineto(base, "k13_name_nul", _on_events("name", "gemm\x00kernel"))
    _kineto(base, "k13_events_object", _set(None, "traceEvents", {"a": 1}))
    trace = json.dumps(kineto_trace(rank=0, world_size=1))
    write_trace(base / "k13_dur_1e400" / "rank0.json",
                trace.replace('"dur": 200.0', '"dur": 1e400', 1))
    write_trace(base / "k13_deep_key" / "rank0.json",
                '{"x": ' + "[" * 5000 + "]" * 5000 + ", " + ONE[1:])
    write_trace(base / "k13_spaces_only" / "rank0.json", " " * (1 << 20))
    (base / "k13_gz_truncated").mkdir()
    whole = gzip.compress(ONE.encode(), mtime=0)
    (base / "k13_gz_truncated" / "rank0.json.gz").write_bytes(whole[: len(whole) // 2])
    (base / "k13_gz_bomb").mkdir()
    (base / "k13_gz_bomb" / "rank0.json.gz").write_bytes(
        gzip.compress(b'{"traceEvents": [' + b" " * (32 << 20) + b"]}", mtime=0))
    write_trace(base / f"k13_good_c1{C1}" / "rank0.json", ONE)
    trace = kineto_trace(rank=0, world_size=1)
    _named_kernels(f"k{C1}\x1b[31m", pg=f"pg{C1}")(trace)
    write_trace(base / "k13_kernels_c1" / "rank0.json.gz", trace)


NCCL = ("node0:1:1 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.10<0>\n"
        "node0:1:1 [0] NCCL INFO NCCL version 2.23.4+cuda12.6\n"
        "node0:1:2 [0] NCCL INFO comm 0x55a0 rank 0 nRanks 1 nNodes 1 localRanks 1 "
        "localRank 0 MNNVL 0\n"
        "node0:1:2 [0] NCCL INFO ncclCommInitRank comm 0x55a0 rank 0 nranks 1 cudaDev 0 "
        "nvmlDev 0 busId 18000 commId 0x1 - Init COMPLETE\n")


def _nccl(base: Path) -> None:
    """NCCL_DEBUG logs and Inspector JSONL of odd shapes not tried before."""
    write_trace(base / "n13_long_line" / "nccl.log",
                NCCL + "node0:1:2 [0] NCCL INFO " + "x" * (100 << 10) + "\n" + NCCL)
    write_trace(base / "n13_no_final_newline" / "nccl.log", NCCL.rstrip("\n"))
    write_trace(base / "n13_nul_in_line" / "nccl.log",
                NCCL + "node0:1:2 [0] NCCL INFO odd \x00\x00 bytes\n")
    (base / "n13_latin1").mkdir()
    (base / "n13_latin1" / "nccl.log").write_bytes(
        NCCL.encode() + b"node0:1:2 [0] NCCL INFO caf\xe9 \xff\xfe\n")
    (base / "n13_random_host_name").mkdir()
    (base / "n13_random_host_name" / "nccl.node0.77.log").write_bytes(
        bytes(range(256)) * 64)
    write_trace(base / "n13_empty" / "nccl.log", "")
    write_trace(base / "n13_200k_warns" / "nccl.log", NCCL + (
        "node0:1:2 [0] transport/net.cc:1 NCCL WARN the same thing again\n" * 200_000))
    for folder, change in (("i13_rank_past_nranks", {"header__rank": 5, "header__n_ranks": 2}),
                           ("i13_nranks_zero", {"header__n_ranks": 0}),
                           ("i13_rank_2_70", {"header__rank": 2 ** 70}),
                           ("i13_sn_true", {"coll_perf__coll_sn": True}),
                           ("i13_size_text", {"coll_perf__coll_msg_size_bytes": "1024"})):
        write_trace(base / folder / "node0-pid1.log",
                    "\n".join([_inspector_line(**change)] * 3) + "\n")
    for folder, change in (("i13_nranks_negative", {"header__n_ranks": -2}),
                           ("i13_rank_true", {"header__rank": True})):
        write_trace(base / folder / "node0-pid1.log",
                    "\n".join([_inspector_line(**change)] * 3) + "\n")


def _fr(base: Path, folder: str, data: bytes) -> None:
    (base / folder).mkdir()
    (base / folder / "nccl_trace_rank_8").write_bytes(data)


def _flight_recorder(base: Path) -> None:
    raw = load_plain(FR_DUMP.read_bytes())
    first = dict(raw["entries"][0])
    _fr(base, "fr13_entries_numbers", pickle.dumps(dict(raw, entries=[1, 2, 3]), protocol=4))
    _fr(base, "fr13_entries_none", pickle.dumps(dict(raw, entries=None), protocol=4))
    _fr(base, "fr13_entries_text", pickle.dumps(dict(raw, entries="abc"), protocol=4))
    _fr(base, "fr13_time_2_65", pickle.dumps(
        dict(raw, entries=[dict(first, time_created_ns=1 << 65)]), protocol=4))
    _fr(base, "fr13_ext1", b"\x80\x02\x82\x01.")
    _fr(base, "fr13_persid", b"P0\n.")
    _fr(base, "fr13_inst_system", b"(S'true'\nios\nsystem\n.")
    _fr(base, "fr13_deep_lists", b"\x80\x02" + b"]" * 200_000 + b"a" * 199_999 + b".")
    _fr(base, "fr13_long4_2gib", b"\x80\x02\x8b\xff\xff\xff\x7f\x01.")
    _fr(base, "fr13_reduce_getattr",
        b"\x80\x04\x8c\x08builtins\x8c\x07getattr\x93\x8c\x02os\x8c\x06system\x86R.")
    _fr(base, "fr13_json_entries_number", json.dumps(
        {"version": "2.4", "pg_config": {}, "entries": 5}).encode())
    (base / "fr13_pg_esc").mkdir()
    esc = dict(raw, entries=[dict(e, process_group=[f"0{ESC}", f"pg{C1}"])
                             for e in raw["entries"]])
    (base / "fr13_pg_esc" / "nccl_trace_rank_8").write_bytes(pickle.dumps(esc, protocol=4))


def _tar(path: Path, members: list[tarfile.TarInfo], data: dict[str, bytes],
         mode: str = "w") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, mode) as t:  # type: ignore[call-overload]
        for info in members:
            body = data.get(info.name, b"")
            info.size = len(body) if info.isfile() else 0
            t.addfile(info, io.BytesIO(body) if info.isfile() else None)


def _link(name: str, target: str, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


def _zip(path: Path, members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", method) as z:
        for name, body in members.items():
            z.writestr(name, body)


def _archives(base: Path) -> None:
    one = ONE.encode()
    _tar(base / "a13_tar_hardlink" / "run.tar",
         [_link("rank0.json", "/etc/passwd", tarfile.LNKTYPE)], {})
    _tar(base / "a13_tar_symlink" / "run.tar",
         [_link("rank0.json", "/etc/shadow", tarfile.SYMTYPE)], {})
    full = io.BytesIO()
    with tarfile.open(fileobj=full, mode="w") as t:
        info = tarfile.TarInfo("rank0.json")
        info.size = len(one)
        t.addfile(info, io.BytesIO(one))
    (base / "a13_tar_truncated").mkdir()
    (base / "a13_tar_truncated" / "run.tar").write_bytes(full.getvalue()[:700])
    _zip(base / "a13_zip_bzip2" / "run.zip", {"rank0.json": one}, zipfile.ZIP_BZIP2)
    _zip(base / "a13_zip_lzma" / "run.zip", {"rank0.json": one}, zipfile.ZIP_LZMA)
    _zip(base / "a13_zip_cut" / "run.zip", {"rank0.json": one})
    cut = (base / "a13_zip_cut" / "run.zip").read_bytes()
    (base / "a13_zip_cut" / "run.zip").write_bytes(cut[: len(cut) - 30])
    long_name = "/".join(["d" * 60] * 5) + "/rank0.json"
    info = tarfile.TarInfo(long_name)
    _tar(base / "a13_tar_long_name" / "run.tar", [info], {long_name: one}, "w:")
    esc_name = f"rank0{ESC}.json"
    _tar(base / "a13_tar_esc_good" / "run.tar", [tarfile.TarInfo(esc_name)],
         {esc_name: one})
    (base / "a13_tgz_random").mkdir()
    (base / "a13_tgz_random" / "run.tar.gz").write_bytes(b"\x1f\x8b" + os.urandom(4096))
    _zip(base / "a13_zip_gz_bomb" / "run.zip", {"rank0.json.gz": gzip.compress(
        b'{"traceEvents": [' + b" " * (32 << 20) + b"]}", mtime=0)})
    whole = gzip.compress(one, mtime=0)
    _tar(base / "a13_tar_gz_member_cut" / "run.tar", [tarfile.TarInfo("rank0.json.gz")],
         {"rank0.json.gz": whole[: len(whole) // 2]})


def _option_files(base: Path) -> None:
    opts = base / "opt13"
    opts.mkdir()
    (opts / "model.json").write_text(json.dumps(SPEC))
    (opts / "ck.json").write_text(json.dumps({"patterns": [CK]}))
    (opts / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (opts / "layers_1e400.json").write_text(json.dumps(SPEC).replace('"n_layers": 32',
                                                                     '"n_layers": 1e400'))
    (opts / "hidden_text.yaml").write_text("\n".join(
        f"{k}: {v!r}" if k != "hidden" else "hidden: '4096'" for k, v in SPEC.items()) + "\n")
    (opts / "set_tag.yaml").write_text("n_layers: !!set {a: null}\n")
    (opts / "empty.yaml").write_text("")
    (opts / "list.yaml").write_text("- 1\n- 2\n")
    (opts / "laughs.yaml").write_text(
        "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n"
            for i in range(8)) + "n_layers: *i\n")
    (opts / "ck_collective_bogus.json").write_text(json.dumps(
        {"patterns": [dict(CK, collective="all_bogus")]}))
    (opts / "ck_patterns_null.json").write_text('{"patterns": null}')
    (opts / "ck_pattern_number.json").write_text(json.dumps(
        {"patterns": [dict(CK, pattern=7)]}))
    (opts / "ck_empty.json").write_text("")
    (opts / "ck_laughs.yaml").write_text(
        "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n"
            for i in range(8)) + "patterns: *i\n")
    (opts / "ck_20000.json").write_text(json.dumps(
        {"patterns": [dict(CK, pattern=f"zzz13_{i}_(a|b)+c") for i in range(20_000)]}))
    (opts / "folder.yaml").mkdir()
    os.mkfifo(opts / "fifo.yaml")
    os.mkfifo(opts / "fifo.json")


def _databases(base: Path) -> None:
    dbs = base / "db13"
    dbs.mkdir()
    sq = sqlite3.connect(dbs / "sqlite.duckdb")
    sq.execute("CREATE TABLE runs (run TEXT)")
    sq.commit()
    sq.close()
    full = (base / "db.duckdb").read_bytes()
    for name in ("version_text.duckdb", "garbage_wal.duckdb", "locked.duckdb",
                 "with_mine.duckdb"):
        (dbs / name).write_bytes(full)
    con = duckdb.connect(str(dbs / "version_text.duckdb"))
    con.execute("UPDATE schema_info SET value = 'abc' WHERE key = 'schema_version'")
    con.close()
    (dbs / "garbage_wal.duckdb.wal").write_bytes(os.urandom(8192))
    con = duckdb.connect(str(dbs / "with_mine.duckdb"))
    con.execute("CREATE TABLE my_notes (note VARCHAR)")
    con.execute("INSERT INTO my_notes VALUES ('keep')")
    con.close()
    con = duckdb.connect(str(dbs / "other_app.duckdb"))
    con.execute("CREATE TABLE invoices (id INTEGER, total DOUBLE)")
    con.close()
    (dbs / "empty.duckdb").write_bytes(b"")
    os.mkfifo(dbs / "fifo.duckdb")
    write_trace(dbs / "trace.duckdb", ONE)


def _outputs(base: Path) -> None:
    outs = base / "out13"
    outs.mkdir()
    with tarfile.open(outs / "old.tar", "w") as t:
        info = tarfile.TarInfo("keep.txt")
        info.size = 4
        t.addfile(info, io.BytesIO(b"keep"))
    os.link(base / "db.duckdb", outs / "db_hardlink.md")
    (outs / "a_folder").mkdir()


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    base = tmp_path_factory.mktemp("audit13")
    base_database(base, "esc", esc_kernels(f"gemm{ESC}{C1}\u202ekernel", f"pg{ESC}{C1}x"))
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
    shutil.rmtree(base, ignore_errors=True)
