"""The fixture and the check of audit round 14 (issue 43): test_audit_round14.py and
test_audit_round14_inputs.py. Every hostile input is built in code, each in a folder of
its own. The check is round 12's (audit12_inputs.check12: exit code, one line that starts
with "error: " and names the file or option, no traceback or internal error, no raw
control character, nothing written in the current folder, a usage error leaves the
database as it was), run through `check14`, which also looks for the controls earlier
rounds did not: the bidi embeddings and marks (U+202A-U+202C, U+200E, U+200F, U+061C) and
Unicode's line and paragraph separators (U+2028, U+2029: a name holding one would break
"every message is one line" for any reader that splits lines as Unicode does)."""

from __future__ import annotations

import gzip
import io
import json
import os
import pickle
import shutil
import sqlite3
import struct
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import audit12_inputs
import duckdb
import pytest
from audit8_inputs import ESC, FR_DUMP, RAW, _inspector_line, _named_kernels, base_database, cli
from audit12_inputs import MARKER, check12
from conftest import kineto_trace, write_trace

from stepscope.ingest.nccl.safe_pickle import load_plain

# argv, env, exit code, what the first error line must hold (after "error: ")
Case14 = tuple[tuple[str, ...], dict[str, str] | None, int, tuple[str, ...]]
ONE = json.dumps(kineto_trace(rank=0, world_size=1))
# bidi embeddings and marks, Arabic letter mark, line and paragraph separators
MIX = "\u202b\u200f\u2028\u061c"
MORE_RAW = {"\u202a", "\u202b", "\u202c", "\u200e", "\u200f", "\u061c", "\u2028", "\u2029"}
RAW14 = RAW | MORE_RAW
SPEC = {"n_params": 7e9, "n_layers": 32, "hidden": 4096, "seq_len": 4096,
        "global_batch_tokens": 1 << 20}
CK = {"pattern": "zzz14_kernel", "library": "x", "collective": "all_reduce", "op": "o"}

__all__ = ["CK", "ESC", "MARKER", "MIX", "ONE", "RAW14", "SPEC", "Case14", "build_inputs",
           "check14", "raw14", "root"]


def raw14(text: str) -> bool:
    """Whether `text` holds a control a terminal or a line reader acts on (newlines
    aside): round 8's set and the bidi embeddings, marks and Unicode line separators."""
    return any(ch in RAW14 for ch in text.replace("\n", ""))


def check14(root: Path, case: Case14, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
            file_case: bool = False) -> tuple[int, list[str], str]:
    """Round 12's check of one case, then no RAW14 character on either stream. Returns
    what the command printed (exit code, stderr lines, stdout)."""
    seen: list[tuple[int, list[str], str]] = []

    def recording(argv: tuple[str, ...], env: dict[str, str] | None = None
                  ) -> tuple[int, list[str], str]:
        result = cli(argv, env)
        seen.append(result)
        return result

    monkeypatch.setattr(audit12_inputs, "cli", recording)
    check12(root, case, tmp_path, monkeypatch, file_case=file_case)
    rc, err, out = seen[-1]
    assert not raw14("\n".join(err)) and not raw14(out), (err[:5], out[:500])
    return rc, err, out


def _esc_trace(rank: int) -> dict[str, Any]:
    trace = kineto_trace(rank=rank, world_size=2)
    _named_kernels(f"gemm{MIX}\u202akernel\u2029caf\u00e9", pg=f"pg{MIX}\u202c")(trace)
    for e in trace["traceEvents"]:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            e["args"]["name"] = f"thread{MIX}"
    return trace


def _databases(base: Path) -> None:
    dbs = base / "db14"
    dbs.mkdir()
    sq = sqlite3.connect(dbs / "real.sqlite")
    sq.execute("CREATE TABLE runs (run TEXT)")
    sq.commit()
    sq.close()
    (dbs / "sqlite_link.duckdb").symlink_to(dbs / "real.sqlite")
    con = duckdb.connect()
    con.execute("SET force_mbedtls_unsafe = 'true'")  # the test's key needs no secrecy
    con.execute(f"ATTACH '{dbs / 'encrypted.duckdb'}' AS e (ENCRYPTION_KEY 'secret14')")
    con.execute("CREATE TABLE e.runs (run VARCHAR)")
    con.close()
    full = (base / "db.duckdb").read_bytes()
    for name in ("no_runs.duckdb", "locked14.duckdb", "wal_fifo.duckdb"):
        (dbs / name).write_bytes(full)
    con = duckdb.connect(str(dbs / "no_runs.duckdb"))
    con.execute("DROP TABLE runs CASCADE")
    con.close()
    os.mkfifo(dbs / "wal_fifo.duckdb.wal")
    (base / "dblink").symlink_to(base, target_is_directory=True)
    (base / "loop").symlink_to(base / "loop")


def _outputs(base: Path) -> None:
    outs = base / "out14"
    outs.mkdir()
    (outs / "late_trace.json").write_text(
        '{"pad": "' + "x" * 100_000 + '", "traceEvents": []}')
    (outs / "early_trace_broken.json").write_text('{"traceEvents": [{"ph": "X", ')
    with zipfile.ZipFile(outs / "zip_named.html", "w") as z:
        z.writestr("keep.txt", "keep")
    (outs / "link2").symlink_to(base / "db.duckdb")
    (outs / "link1").symlink_to(outs / "link2")
    (outs / "victim").mkdir()
    (outs / "n_links").mkdir()
    (outs / "n_links" / "r14").symlink_to(outs / "victim", target_is_directory=True)
    (outs / "input_link").symlink_to(base / "t", target_is_directory=True)
    (outs / "proc_link").symlink_to("/proc", target_is_directory=True)
    os.link(base / "opt14" / "model.json", outs / "model_hard.md")


def _option_files(base: Path) -> None:
    opts = base / "opt14"
    opts.mkdir()
    (opts / "model.json").write_text(json.dumps(SPEC))
    yaml_spec = "".join(f"{k}: {v!r}\n" for k, v in SPEC.items())
    (opts / "model_crlf.yaml").write_bytes(yaml_spec.replace("\n", "\r\n").encode())
    (opts / "model_bom.yaml").write_bytes(b"\xef\xbb\xbf" + yaml_spec.encode())

    def with_layers(name: str, text: str) -> None:
        (opts / name).write_text(yaml_spec.replace("n_layers: 32", f"n_layers: {text}"))

    with_layers("layers_underscore.yaml", "3_2")
    with_layers("layers_hex.yaml", "0x20")
    with_layers("layers_sexagesimal.yaml", "1:30")
    with_layers("layers_null.yaml", "~")
    with_layers("layers_list.yaml", "[32]")
    (opts / "comments.yaml").write_text("# nothing but a comment\n" * 400_000)
    (opts / "number.json").write_text("32")
    (opts / "alias_strings.yaml").write_text(
        "x: &a '" + "s" * (1 << 20) + "'\n" + yaml_spec.replace(
            "n_layers: 32", "n_layers: [" + ", ".join(["*a"] * 1000) + "]"))
    (opts / "ck_backtrack.json").write_text(json.dumps(
        {"patterns": [dict(CK, pattern="(a+)+$")]}))
    (opts / "ck_possessive.json").write_text(json.dumps(
        {"patterns": [dict(CK, pattern="zzz14a++")]}))
    (opts / "ck_collective_caps.json").write_text(json.dumps(
        {"patterns": [dict(CK, collective="ALL_REDUCE")]}))
    (opts / "ck_pattern_ls.json").write_text(json.dumps(
        {"patterns": [dict(CK, pattern=f"zzz14{MIX}")]}))


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The base database (runs base, other, esc14), option files, odd databases and
    outputs; the hostile trace inputs are added by `build_inputs`."""
    base = tmp_path_factory.mktemp("audit14")
    base_database(base, "esc14", _esc_trace)
    _option_files(base)
    _databases(base)
    _outputs(base)
    (base / "afile").write_text("x")
    MARKER.unlink(missing_ok=True)
    yield base
    shutil.rmtree(base, ignore_errors=True)


# ---------------------------------------------------------------- hostile inputs


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


def _extra(events: list[dict[str, Any]]) -> Any:
    def edit(trace: dict[str, Any]) -> None:
        trace["traceEvents"].extend(events)
    return edit


def _gzip_with_header(data: bytes, flags: int, extra: bytes) -> bytes:
    """A gzip member with the given FLG bits and the header fields after the fixed part
    (FEXTRA, FNAME, FCOMMENT, FHCRC as the caller lays them out)."""
    import zlib
    head = b"\x1f\x8b\x08" + bytes([flags]) + b"\x00\x00\x00\x00\x00\xff"
    if flags & 0x02:
        head_all = head + extra
        crc16 = zlib.crc32(head_all) & 0xFFFF
        head_all += struct.pack("<H", crc16)
    else:
        head_all = head + extra
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    body = comp.compress(data) + comp.flush()
    return head_all + body + struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)


def _traces(base: Path) -> None:
    """Kineto traces of shapes rounds 4-13 did not try."""
    _kineto(base, "k14_ts_2_70_int", _on_events("ts", 1 << 70))
    _kineto(base, "k14_ts_text_nan", _on_events("ts", "nan"))
    _kineto(base, "k14_dur_text_infinity", _on_events("dur", "Infinity"))
    _kineto(base, "k14_rank_past_world", lambda t: t["distributedInfo"].update(
        rank=3, world_size=2))
    _kineto(base, "k14_base_2_62_minus_1", _set(None, "baseTimeNanoseconds", (1 << 62) - 1))
    flows = []
    for i in range(150_000):
        flows.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": i, "pid": 100,
                      "tid": 100, "ts": 1000.0 + i * 0.001})
        flows.append({"ph": "f", "cat": "ac2g", "name": "ac2g", "id": i, "pid": 0,
                      "tid": 7, "ts": 1001.0 + i * 0.001, "bp": "e"})
    _kineto(base, "k14_300k_flows", _extra(flows), name="rank0.json.gz")
    begins = [{"ph": "B", "cat": "cpu_op", "name": f"b{i}", "pid": 100, "tid": 100,
               "ts": 1000.0 + i} for i in range(50_000)]
    _kineto(base, "k14_50k_unmatched_begins", _extra(begins), name="rank0.json.gz")
    wide = kineto_trace(rank=0, world_size=1)
    for i in range(100_000):
        wide[f"key{i}"] = i
    write_trace(base / "k14_100k_top_keys" / "rank0.json.gz", wide)
    steps = kineto_trace(rank=0, world_size=1)
    for e in steps["traceEvents"]:
        if str(e.get("name", "")).startswith("ProfilerStep#"):
            e["name"] = "ProfilerStep#" + "9" * 25
    write_trace(base / "k14_step_25_digits" / "rank0.json", steps)
    one = ONE.encode()
    (base / "k14_gz_comment_1mib").mkdir()
    (base / "k14_gz_comment_1mib" / "rank0.json.gz").write_bytes(
        _gzip_with_header(one, 0x10, b"c" * (1 << 20) + b"\x00"))
    (base / "k14_gz_fhcrc").mkdir()
    (base / "k14_gz_fhcrc" / "rank0.json.gz").write_bytes(_gzip_with_header(one, 0x02, b""))
    good = gzip.compress(one, mtime=0)
    (base / "k14_gz_isize_lies").mkdir()
    (base / "k14_gz_isize_lies" / "rank0.json.gz").write_bytes(
        good[:-4] + struct.pack("<I", 1))
    (base / "k14_link_to_dev_zero").mkdir()
    (base / "k14_link_to_dev_zero" / "rank0.json").symlink_to("/dev/zero")
    (base / "k14_link_loop").mkdir()
    (base / "k14_link_loop" / "rank0.json").symlink_to(base / "k14_link_loop" / "rank0.json")
    write_trace(base / "k14_folder_link_to_itself" / "rank0.json", ONE)
    (base / "k14_folder_link_to_itself" / "again").symlink_to(
        base / "k14_folder_link_to_itself", target_is_directory=True)
    write_trace(base / "k14_broken_named_ls" / "rank0\u2028x.json", "{broken")
    write_trace(base / "k14_good_folder_rle\u202b" / "rank0.json", ONE)


NCCL = ("node0:1:1 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.10<0>\n"
        "node0:1:1 [0] NCCL INFO NCCL version 2.23.4+cuda12.6\n"
        "node0:1:2 [0] NCCL INFO comm 0x55a0 rank 0 nRanks 1 nNodes 1 localRanks 1 "
        "localRank 0 MNNVL 0\n"
        "node0:1:2 [0] NCCL INFO ncclCommInitRank comm 0x55a0 rank 0 nranks 1 cudaDev 0 "
        "nvmlDev 0 busId 18000 commId 0x1 - Init COMPLETE\n")


def _nccl(base: Path) -> None:
    """NCCL_DEBUG logs and Inspector JSONL of shapes not tried before."""
    pad_to = (4 << 20) - 40  # the comm line straddles the 4 MiB block boundary
    filler = "node0:1:1 [0] NCCL INFO Channel 00/02 : 0 1\n"
    head = NCCL.splitlines(keepends=True)[:2]
    text = "".join(head)
    text += filler * ((pad_to - len(text)) // len(filler))
    text += "x" * (pad_to - len(text)) + "\n" if len(text) < pad_to else ""
    write_trace(base / "n14_block_boundary" / "nccl.log", text + "".join(
        NCCL.splitlines(keepends=True)[2:]))
    write_trace(base / "n14_host_mix" / "rank0.json", ONE)
    write_trace(base / "n14_host_mix" / "nccl.log", NCCL.replace(
        "eth0:10.0.0.10", f"eth{MIX}0:10.0.0.10").replace(
        "NCCL version 2.23.4", "NCCL version 2.23.4\u202e"))
    for folder, line in (
            ("i14_p2p_sn_negative", _p2p_line(p2p_sn=-4)),
            ("i14_exec_one_day", _inspector_line(coll_perf__coll_exec_time_us=86_400_000_000)),
            ("i14_exec_over_one_day", _inspector_line(
                coll_perf__coll_exec_time_us=86_400_000_001)),
            ("i14_without_header_id", _without("header", "id")),
            ("i14_without_n_ranks", _without("header", "n_ranks")),
            ("i14_without_coll", _without("coll_perf", "coll"))):
        write_trace(base / folder / "node0-pid1.log", "\n".join([line] * 3) + "\n")
    two = _inspector_line() + "\n" + _inspector_line(header__id="0x2") + "\n"
    write_trace(base / "i14_two_comms" / "node0-pid1.log", two)
    write_trace(base / "i14_busbw_1e308" / "rank0.json", ONE)
    write_trace(base / "i14_busbw_1e308" / "node0-pid1.log", "\n".join(
        [_inspector_line(coll_perf__coll_busbw_gbs=1e308,
                         coll_perf__coll_algobw_gbs=1e308)] * 3) + "\n")


def _p2p_line(p2p_sn: int) -> str:
    line = json.loads(_inspector_line())
    del line["coll_perf"]
    line["p2p_perf"] = {"p2p": "Send", "p2p_sn": p2p_sn, "p2p_msg_size_bytes": 1024,
                        "p2p_exec_time_us": 10, "p2p_timing_source": "kernel_gpu",
                        "p2p_bw_gbs": 1.0, "peer": 0}
    return json.dumps(line)


def _without(section: str, field: str) -> str:
    line = json.loads(_inspector_line())
    del line[section][field]
    return json.dumps(line)


def _fr(base: Path, folder: str, data: bytes) -> None:
    (base / folder).mkdir()
    (base / folder / "nccl_trace_rank_8").write_bytes(data)


def _flight_recorder(base: Path) -> None:
    raw = load_plain(FR_DUMP.read_bytes())
    first = dict(raw["entries"][0])

    def one_entry(**change: Any) -> bytes:
        return pickle.dumps(dict(raw, entries=[dict(first, **change)]), protocol=4)

    _fr(base, "fr14_seq_2_64", one_entry(collective_seq_id=1 << 64))
    _fr(base, "fr14_timeout_1e20", one_entry(timeout_ms=1e20))
    _fr(base, "fr14_seq_half", one_entry(collective_seq_id=1.5))
    _fr(base, "fr14_binbytes8_2_62", b"\x80\x04\x8e" + struct.pack("<Q", 1 << 62) + b"ab.")
    _fr(base, "fr14_unicode_not_utf8", b"\x80\x04\x8c\x02\xff\xfe.")
    _fr(base, "fr14_dup_empty", b"\x80\x02\x32.")
    _fr(base, "fr14_pop_mark_no_mark", b"\x80\x02\x31.")
    _fr(base, "fr14_build_on_dict", b"\x80\x02}}b.")
    _fr(base, "fr14_json_deep", b'{"version": "2.4", "entries": ' + b"[" * 100_000
        + b"]" * 100_000 + b"}")
    _fr(base, "fr14_json_65mib", b'{"version": "2.4", "entries": [], "pad": "'
        + b"p" * (65 << 20) + b'"}')
    esc = dict(raw, entries=[dict(e, process_group=[f"0{MIX}", f"pg\u2029{MIX}"],
                                  profiling_name=f"nccl:all_reduce{MIX}")
                             for e in raw["entries"]])
    _fr(base, "fr14_pg_mix", pickle.dumps(esc, protocol=4))


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes]], mode: str = "w",
         fmt: int = tarfile.GNU_FORMAT) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, mode, format=fmt) as t:  # type: ignore[call-overload]
        for info, body in members:
            info.size = len(body)
            t.addfile(info, io.BytesIO(body))


def _archives(base: Path) -> None:
    one = ONE.encode()
    _tar(base / "a14_tar_gnu_longname_1mib" / "run.tar",
         [(tarfile.TarInfo("d" * (1 << 20) + "/rank0.json"), one)])
    info = tarfile.TarInfo("rank0.json")
    info.mtime = 1 << 60
    info.uid = info.gid = (1 << 21) - 1
    _tar(base / "a14_tar_odd_mtime" / "run.tar", [(info, one)])
    plain = io.BytesIO()
    with tarfile.open(fileobj=plain, mode="w") as t:
        info = tarfile.TarInfo("rank0.json")
        info.size = len(one)
        t.addfile(info, io.BytesIO(one))
    data = plain.getvalue()
    half = len(data) // 2
    (base / "a14_tgz_two_members").mkdir()
    (base / "a14_tgz_two_members" / "run.tar.gz").write_bytes(
        gzip.compress(data[:half], mtime=0) + gzip.compress(data[half:], mtime=0))
    (base / "a14_zip_names_differ").mkdir()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("rank0.json", one)
    blob = bytearray(buf.getvalue())
    at = blob.find(b"PK\x03\x04")
    name_at = at + 30
    assert blob[name_at:name_at + 10] == b"rank0.json"
    blob[name_at:name_at + 10] = b"rank9.json"  # the local header's name only
    (base / "a14_zip_names_differ" / "run.zip").write_bytes(bytes(blob))
    (base / "a14_zip_streamed").mkdir()

    class _Unseekable(io.RawIOBase):
        def __init__(self) -> None:
            self.parts: list[bytes] = []

        def writable(self) -> bool:
            return True

        def write(self, b: Any) -> int:
            self.parts.append(bytes(b))
            return len(b)

    sink = _Unseekable()
    with zipfile.ZipFile(sink, "w", zipfile.ZIP_DEFLATED) as z:  # type: ignore[arg-type]
        with z.open("rank0.json", "w") as member:
            member.write(one)
    (base / "a14_zip_streamed" / "run.zip").write_bytes(b"".join(sink.parts))


def build_inputs(base: Path) -> None:
    """The hostile trace, NCCL, Flight Recorder and archive inputs, beside `root`'s."""
    _traces(base)
    _nccl(base)
    _flight_recorder(base)
    _archives(base)
