"""The inputs and the checks of audit round 15 (issue 43): tests/cli/test_audit_round15.py.

The base database, its option files and outputs are round 14's (`audit14_inputs.root`,
re-exported here); round 15's hostile inputs are built by `build15` into folders of
their own under it, each read by one case only. Every case writes only below its own
folder (`own`, made fresh per test beside pytest's tmp_path, never the current folder),
so no case depends on what another left behind.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import io
import json
import os
import pickle
import resource
import signal
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from audit7_inputs import _dist, _top
from audit8_inputs import ESC, FR_DUMP, _inspector_line, _kineto, cli
from audit8_inputs import _on_kernels as _kernels
from audit14_inputs import MIX, ONE, RAW14, SPEC, Case14, check14, raw14
from audit14_inputs import root as root
from conftest import kineto_trace, write_trace

from stepscope.ingest.nccl.safe_pickle import load_plain

__all__ = ["C1", "ESC", "MIX", "ONE", "RAW14", "SPEC", "Case14", "build15", "check15",
           "cli", "fill_up", "full_disk", "one_line", "own_dir", "params", "raw14", "root",
           "run_cli"]

C1 = "\x9b2J\x85"  # a C1 CSI and NEL
MODULE = "stepscope"


def params(cases: Mapping[str, object], failed: Mapping[str, str]) -> list[Any]:
    """The case names, those in `failed` marked xfail (strict) with their reason."""
    return [pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=failed[name]))
            if name in failed else name for name in cases]


def own_dir(tmp_path: Path) -> Path:
    """A fresh folder of the case's own beside its tmp_path (the current folder), where
    it may write its database and outputs."""
    own = tmp_path.with_name(tmp_path.name + "_own")
    own.mkdir()
    return own


def _own(text: str, own: Path) -> str:
    return text.replace("{own}", str(own))


def check15(root: Path, case: Case14, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
            file_case: bool = False) -> tuple[int, list[str], str, Path]:
    """Round 14's check (exit code, one "error: " line naming what it must, no
    traceback, no raw control, nothing in the current folder, a usage error leaves the
    base database as it was), with `{own}` in the arguments and environment replaced by
    the case's own folder. Returns the exit code, stderr lines, stdout and that folder."""
    own = own_dir(tmp_path)
    argv, env, rc, said = case
    filled: Case14 = (tuple(_own(a, own) for a in argv),
                      {k: _own(v, own) for k, v in (env or {}).items()} or None, rc,
                      tuple(_own(s, own) for s in said))
    got_rc, err, out = check14(root, filled, tmp_path, monkeypatch, file_case=file_case)
    return got_rc, err, out, own


# ---------------------------------------------------------------- processes


def run_cli(argv: list[str], cwd: Path, env: dict[str, str] | None = None,
            limits: tuple[tuple[int, int], ...] = (), timeout: int = 120,
            stdout: Any = subprocess.PIPE) -> tuple[int, list[str], str]:
    """`python -P -m stepscope ARGV` in a process of its own, with `env` added and the
    resource limits set (SIGXFSZ ignored, so the file size limit is an error, not a
    kill): (exit code, stderr lines, stdout)."""
    def preexec() -> None:
        for kind, value in limits:
            resource.setrlimit(kind, (value, value))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    proc = subprocess.run([sys.executable, "-P", "-m", MODULE, *argv], cwd=cwd,
                          stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=timeout,
                          preexec_fn=preexec, env={**os.environ, **(env or {})}, check=False)
    return proc.returncode, proc.stderr.splitlines(), proc.stdout or ""


def one_line(rc: int, err: list[str], codes: tuple[int, ...], *said: str) -> None:
    """An exit code among `codes`; no traceback, internal error, MemoryError or raw
    control; a failure is one line that starts with "error: " and holds each of `said`,
    never a file's "could not be stored"."""
    errors = [x for x in err if not x.startswith(("warning:", "note:", "export:", "wrote "))]
    assert not any("Traceback" in x or "internal error" in x or "Exception ignored" in x
                   or "MemoryError" in x for x in err), err[-8:]
    assert not raw14("\n".join(err)), err[-8:]
    assert rc in codes, (rc, err[-8:])
    if rc != 0:
        assert len(errors) == 1 and errors[0].startswith("error: "), err[-8:]
        assert all(s in errors[0] for s in said), (said, errors)
        assert "could not be stored" not in errors[0], errors


@contextlib.contextmanager
def full_disk(where: Path, size_kb: int = 256, room: int = 0) -> Iterator[Path]:
    """A tmpfs of `size_kb` KiB mounted at `where`, filled up to `room` bytes left: a disk
    that is full (ENOSPC) for real. Skips where no tmpfs can be mounted (not root)."""
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs",
                           str(where)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()[:200]}")
    try:
        filler = where / ".filler"
        fill_up(filler)
        if room:
            os.truncate(filler, max(0, filler.stat().st_size - room))
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)


def fill_up(path: Path) -> None:
    """Append zeros to `path`, unbuffered, until its disk is full (ENOSPC)."""
    chunk = b"\0" * (64 << 10)
    with open(path, "ab", buffering=0) as fh, contextlib.suppress(OSError):
        while True:
            fh.write(chunk)


# ---------------------------------------------------------------- hostile inputs


def _as_text(field: str) -> Any:
    """Every kernel's `field` written as the text of its number (docs/cli.md: ts and dur
    may be numbers or their text)."""
    def edit(trace: dict[str, Any]) -> None:
        for e in trace["traceEvents"]:
            if e.get("cat") == "kernel":
                e[field] = repr(float(e[field]))
    return edit


def _kernel_args(field: str, value: Any) -> Any:
    def edit(trace: dict[str, Any]) -> None:
        for e in trace["traceEvents"]:
            if e.get("cat") == "kernel":
                e["args"][field] = value
    return edit


def _traces(base: Path) -> None:
    """Kineto traces: fields of types and ranges rounds 4-14 left out."""
    _kineto(base, "k15_ts_true", _kernels("ts", True))
    _kineto(base, "k15_dur_object", _kernels("dur", {"us": 5}))
    _kineto(base, "k15_ts_minus_1e300", _kernels("ts", -1e300))
    _kineto(base, "k15_dur_1e300", _kernels("dur", 1e300))
    _kineto(base, "k15_ts_text_of_a_number", _as_text("ts"))
    _kineto(base, "k15_dur_text_of_a_number", _as_text("dur"))
    _kineto(base, "k15_ts_text_blank", _kernels("ts", "   "))
    _kineto(base, "k15_args_a_number", _kernels("args", 7))
    _kineto(base, "k15_rank_minus_1", _dist("rank", -1))
    _kineto(base, "k15_rank_2_31", _dist("rank", 1 << 31))
    _kineto(base, "k15_world_0", _dist("world_size", 0))
    _kineto(base, "k15_base_minus_1", _top("baseTimeNanoseconds", -1))
    _kineto(base, "k15_base_text", _top("baseTimeNanoseconds", "1700000000000000000"))
    _kineto(base, "k15_base_2_63", _top("baseTimeNanoseconds", 1 << 63))
    _kineto(base, "k15_name_null", _kernels("name", None))
    _kineto(base, "k15_tid_list", _kernels("tid", [7]))
    _kineto(base, "k15_device_2_40", _kernel_args("device", 1 << 40))
    _kineto(base, "k15_distributed_null", _top("distributedInfo", None))
    _kineto(base, "k15_device_props_text", _top("deviceProperties", "H100"))
    many = kineto_trace(rank=0, world_size=1)
    for i in range(100_000):
        many["traceEvents"].append({"ph": "X", "cat": "cpu_op", "name": "aten::add",
                                    "pid": 100, "tid": 100, "ts": 1000.0, "dur": 1.0,
                                    "args": {"External id": 10_000 + i}})
    write_trace(base / "k15_100k_ops_same_instant" / "rank0.json.gz", many)
    threads = kineto_trace(rank=0, world_size=1)
    for i in range(20_000):
        threads["traceEvents"].append({"ph": "X", "cat": "cpu_op", "name": "t", "pid": 100,
                                       "tid": 1000 + i, "ts": 1000.0 + i * 0.01, "dur": 0.01,
                                       "args": {}})
    write_trace(base / "k15_20k_threads" / "rank0.json.gz", threads)
    one = ONE.encode()
    (base / "k15_gzip_twice").mkdir()
    (base / "k15_gzip_twice" / "rank0.json.gz").write_bytes(
        gzip.compress(gzip.compress(one, mtime=0), mtime=0))
    (base / "k15_gz_plain_json").mkdir()
    (base / "k15_gz_plain_json" / "rank0.json.gz").write_bytes(one)
    (base / "k15_gz_trailing_zeros").mkdir()
    (base / "k15_gz_trailing_zeros" / "rank0.json.gz").write_bytes(
        gzip.compress(one, mtime=0) + b"\0" * 4096)
    (base / "k15_bz2_named_json").mkdir()
    (base / "k15_bz2_named_json" / "rank0.json").write_bytes(bz2.compress(one))
    (base / "k15_lone_surrogate").mkdir()
    (base / "k15_lone_surrogate" / "rank0.json").write_text(
        ONE.replace('"sm90_xmma_gemm_bf16"', '"gemm\\ud800x"'))
    (base / "k15_nul_escape_in_name").mkdir()
    (base / "k15_nul_escape_in_name" / "rank0.json").write_text(
        ONE.replace('"sm90_xmma_gemm_bf16"', '"gemm\\u0000\\u001b[2Jx"'))
    write_trace(base / "k15_two_claim_rank0" / "rank0.json", ONE)
    write_trace(base / "k15_two_claim_rank0" / "worker0.json", ONE)
    write_trace(base / "k15_broken_named_c1" / f"rank0{C1}.json", "{broken")
    write_trace(base / "k15_broken_in_folder_esc" / f"d{ESC}" / "rank0.json", "[1, 2")


def _fr_entry_dump(**change: Any) -> bytes:
    raw = load_plain(FR_DUMP.read_bytes())
    first = dict(raw["entries"][0], **change)
    return pickle.dumps(dict(raw, entries=[first]), protocol=4)


def _fr(base: Path, folder: str, data: bytes) -> None:
    (base / folder).mkdir()
    (base / folder / "nccl_trace_rank_8").write_bytes(data)


def _flight_recorder(base: Path) -> None:
    """Flight Recorder dumps: entry fields out of their 64-bit range or type, opcodes of
    objects, and sizes at the limits."""
    _fr(base, "fr15_record_id_2_65", _fr_entry_dump(record_id=1 << 65))
    _fr(base, "fr15_time_created_true", _fr_entry_dump(time_created_ns=True))
    _fr(base, "fr15_pg_id_mapping", _fr_entry_dump(pg_id={"a": 1}))
    _fr(base, "fr15_op_id_nan", _fr_entry_dump(op_id=float("nan")))
    _fr(base, "fr15_p2p_seq_minus_2_64", _fr_entry_dump(p2p_seq_id=-(1 << 64)))
    _fr(base, "fr15_timeout_list", _fr_entry_dump(timeout_ms=[600000]))
    _fr(base, "fr15_started_ns_text", _fr_entry_dump(time_discovered_started_ns="soon"))
    # opcodes that build objects: refused unexecuted
    _fr(base, "fr15_reduce_of_dict", b"\x80\x02c__builtin__\ndict\n)R.")
    _fr(base, "fr15_newobj_ex", b"\x80\x04\x8c\x08builtins\x8c\x04dict\x93)}\x92.")
    _fr(base, "fr15_obj", b"\x80\x02(c__builtin__\ndict\no.")
    _fr(base, "fr15_binpersid", b"\x80\x02K\x01Q.")
    _fr(base, "fr15_memo_get_missing", b"\x80\x02h\x05.")
    _fr(base, "fr15_binbytes_65mib", b"\x80\x04B" + (65 << 20).to_bytes(4, "little")
        + b"b" * (65 << 20) + b".")
    _fr(base, "fr15_truncated_mid_frame", b"\x80\x04\x95\xff\x00\x00\x00\x00\x00\x00\x00}")
    raw = load_plain(FR_DUMP.read_bytes())
    esc = dict(raw, entries=[dict(e, thread_name=f"py{ESC}{C1}{MIX}",
                                  process_group=(e["process_group"][0],
                                                 f"GROUP{C1}{ESC}\u2029"))
                             for e in raw["entries"]])
    _fr(base, "fr15_names_esc", pickle.dumps(esc, protocol=4))
    many = dict(raw, entries=[dict(raw["entries"][0], record_id=i, collective_seq_id=i,
                                   op_id=i) for i in range(20_000)])
    _fr(base, "fr15_20k_entries", pickle.dumps(many, protocol=4))
    _fr(base, "fr15_colliding_tuple_keys", _colliding_dump(50_000))


def _short(text: str) -> bytes:
    data = text.encode()
    return b"\x8c" + bytes([len(data)]) + data  # SHORT_BINUNICODE


def _colliding_dump(n: int) -> bytes:
    """A dump whose pg_status holds `n` keys that all hash alike: 1-tuples of multiples
    of 2^61 - 1 (Python hashes an int modulo that prime). Written opcode by opcode, since
    building the dict here would itself take quadratic time."""
    collide = (1 << 61) - 1
    pairs = bytearray()
    for k in range(1, n + 1):
        digits = (k * collide).to_bytes(16, "little", signed=True)
        pairs += b"\x8a" + bytes([len(digits)]) + digits + b"\x85" + b"K\x01"
    return (b"\x80\x04}(" + _short("version") + _short("2.9") + _short("entries") + b"]"
            + _short("pg_status") + b"}(" + bytes(pairs) + b"uu.")


NCCL = ("node0:1:1 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.10<0>\n"
        "node0:1:1 [0] NCCL INFO NCCL version 2.23.4+cuda12.6\n"
        "node0:1:2 [0] NCCL INFO comm 0x55a0 rank 0 nRanks 1 nNodes 1 localRanks 1 "
        "localRank 0 MNNVL 0\n"
        "node0:1:2 [0] NCCL INFO ncclCommInitRank comm 0x55a0 rank 0 nranks 1 cudaDev 0 "
        "nvmlDev 0 busId 18000 commId 0x1 - Init COMPLETE\n")


def _inspector(base: Path, folder: str, lines: list[str]) -> None:
    write_trace(base / folder / "node0-pid1.log", "\n".join(lines) + "\n")


def _nccl(base: Path) -> None:
    """NCCL_DEBUG logs and NCCL Inspector JSONL: fields at and past their documented
    ranges, types the table does not take, and sizes."""
    for folder, change in (
            ("i15_n_ranks_2_31", {"header__n_ranks": 1 << 31}),
            ("i15_msg_size_2_63", {"coll_perf__coll_msg_size_bytes": 1 << 63}),
            ("i15_pid_minus_1", {"metadata__pid": -1}),
            ("i15_dump_ts_2_53", {"metadata__dump_timestamp_us": 1 << 53}),
            ("i15_nnodes_0", {"header__nnodes": 0}),
            ("i15_hostname_number", {"metadata__hostname": 5}),
            ("i15_comm_name_list", {"header__comm_name": ["a"]}),
            ("i15_coll_null", {"coll_perf__coll": None}),
            ("i15_exec_time_null", {"coll_perf__coll_exec_time_us": None}),
            ("i15_busbw_negative", {"coll_perf__coll_busbw_gbs": -0.5}),
            ("i15_algobw_text", {"coll_perf__coll_algobw_gbs": "1.0"}),
            ("i15_rank_equals_n_ranks", {"header__rank": 1}),
            ("i15_version_number", {"metadata__inspector_output_format_version": 4}),
            ("i15_timing_source_number", {"coll_perf__coll_timing_source": 1}),
            ("i15_coll_sn_2_63_minus_1", {"coll_perf__coll_sn": (1 << 63) - 1}),
            ("i15_header_id_true", {"header__id": True})):
        _inspector(base, folder, [_inspector_line(**change)] * 3)
    p2p = json.loads(_inspector_line())
    del p2p["coll_perf"]
    p2p["p2p_perf"] = {"p2p": "Send", "p2p_sn": 1, "p2p_msg_size_bytes": 1024,
                       "p2p_exec_time_us": 10, "p2p_timing_source": "kernel_gpu",
                       "p2p_algobw_gbs": 1.0, "p2p_busbw_gbs": 1.0, "p2p_peer": 5}
    _inspector(base, "i15_p2p_peer_past_n_ranks", [json.dumps(p2p)] * 3)
    _inspector(base, "i15_50k_lines", [_inspector_line(coll_perf__coll_sn=i)
                                       for i in range(50_000)])
    write_trace(base / "n15_nranks_2_40" / "nccl.log", NCCL.replace(
        "rank 0 nRanks 1", "rank 0 nRanks 1099511627776").replace(
        "rank 0 nranks 1", "rank 0 nranks 1099511627776"))
    write_trace(base / "n15_nuls_between_lines" / "nccl.log",
                NCCL.replace("\n", "\n\0\0\0", 2))
    warn = "node0:1:3 [0] NCCL WARN NET/IB : Got async event : port error\n"
    write_trace(base / "n15_200k_warn_lines" / "nccl.log", NCCL + warn * 200_000)
    write_trace(base / "n15_line_64kib_plus_1" / "nccl.log",
                NCCL[:60] + "x" * (64 << 10) + "\n" + NCCL)
    write_trace(base / "n15_warn_esc" / "rank0.json", ONE)
    write_trace(base / "n15_warn_esc" / "nccl.log",
                NCCL + f"node0:1:3 [0] NCCL WARN bad {ESC}{C1}{MIX} link\n")
    write_trace(base / "n15_latin1_host" / "nccl.log",
                NCCL.replace("node0", "n\xe9ud0").encode("latin-1"))


def _zip(path: Path, members: list[tuple[str, bytes]],
         compression: int = zipfile.ZIP_DEFLATED, comment: bytes = b"") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression) as z:
        for name, body in members:
            z.writestr(name, body)
        z.comment = comment


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes]], mode: str = "w") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, mode) as t:  # type: ignore[call-overload]
        for info, body in members:
            info.size = len(body)
            t.addfile(info, io.BytesIO(body))


def _one_member_tar(body: bytes, mode: str) -> io.BytesIO:
    """A tar (`mode` "w" or "w:gz") in memory holding `body` as rank0.json."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode=mode) as t:  # type: ignore[call-overload]
        info = tarfile.TarInfo("rank0.json")
        info.size = len(body)
        t.addfile(info, io.BytesIO(body))
    return out


def _archives(base: Path) -> None:
    """Archives: many members, comments, nested archives, declared sizes that lie."""
    one = ONE.encode()
    _zip(base / "a15_zip_3000_small_members" / "run.zip",
         [(f"notes/n{i}.txt", b"x") for i in range(3000)] + [("rank0.json", one)])
    _zip(base / "a15_zip_64k_comment" / "run.zip", [("rank0.json", one)],
         comment=b"c" * 65535)
    _zip(base / "a15_zip_in_zip" / "outer.zip",
         [("inner.zip", _zip_bytes([("rank0.json", one)]))])
    _zip(base / "a15_zip_member_ls_broken" / "run.zip", [(f"rank0{MIX}.json", b"{broken")])
    _zip(base / "a15_zip_member_esc_dir" / "run.zip", [(f"d{ESC}/rank0.json", one)])
    plain = _one_member_tar(one, "w")
    (base / "a15_plain_tar_named_tgz").mkdir()
    (base / "a15_plain_tar_named_tgz" / "run.tgz").write_bytes(plain.getvalue())
    (base / "a15_zip_named_tar_gz").mkdir()
    (base / "a15_zip_named_tar_gz" / "run.tar.gz").write_bytes(
        _zip_bytes([("rank0.json", one)]))
    data = plain.getvalue()
    (base / "a15_tar_cut_in_member").mkdir()
    (base / "a15_tar_cut_in_member" / "run.tar").write_bytes(data[:512 + len(one) // 2])
    pax = tarfile.TarInfo(f"rank0{ESC}.json")
    _tar(base / "a15_tar_pax_name_esc" / "run.tar", [(pax, b"{broken")])
    info = tarfile.TarInfo("rank0.json")
    info.type = tarfile.LNKTYPE
    info.linkname = "missing.json"
    _tar(base / "a15_tar_hardlink_to_nothing" / "run.tar", [(info, b"")])
    tgz = _one_member_tar(one, "w:gz")
    (base / "a15_tgz_trailing_garbage").mkdir()
    (base / "a15_tgz_trailing_garbage" / "run.tgz").write_bytes(tgz.getvalue() + b"garbage")


def _zip_bytes(members: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, body in members:
            z.writestr(name, body)
    return buf.getvalue()


def _option_files(base: Path) -> None:
    """--model and --comm-kernels files of shapes not tried before."""
    opts = base / "opt15"
    opts.mkdir()

    def spec(name: str, **change: Any) -> None:
        (opts / name).write_text(json.dumps(dict(SPEC, **change)))

    spec("n_params_nan.json", n_params=float("nan"))
    spec("attention_sliding.json", attention="sliding")
    spec("vocab_minus_1.json", vocab=-1)
    spec("layers_true.json", n_layers=True)
    spec("hidden_zero.json", hidden=0)
    spec("active_params_negative.json", n_active_params=-7e9)
    spec("causal_ok.json", attention="causal", convention="megatron", vocab=32000)
    (opts / "n_params_1e400.json").write_text(json.dumps(SPEC).replace("7000000000.0",
                                                                       "1e400"))
    yaml_spec = "".join(f"{k}: {v!r}\n" for k, v in SPEC.items())
    (opts / "params_dot_inf.yaml").write_text(
        yaml_spec.replace("n_params: 7000000000.0", "n_params: .inf"))
    (opts / "params_dot_nan.yaml").write_text(
        yaml_spec.replace("n_params: 7000000000.0", "n_params: .NaN"))
    (opts / "two_documents.yaml").write_text(yaml_spec + "---\n" + yaml_spec)
    (opts / "top_list.yaml").write_text("- 1\n- 2\n")
    (opts / "empty.yaml").write_text("")
    (opts / "empty_object.json").write_text("{}")
    (opts / "trailing_garbage.json").write_text(json.dumps(SPEC) + " x")
    (opts / "gzip_spec.json").write_bytes(gzip.compress(json.dumps(SPEC).encode(), mtime=0))
    (opts / "a_dir").mkdir()
    ck = {"pattern": "zzz15_kernel", "library": "x", "collective": "all_reduce", "op": "o"}

    def kernels(name: str, body: Any) -> None:
        (opts / name).write_text(json.dumps(body))

    kernels("ck_collective_bogus.json", {"patterns": [dict(ck, collective="bogus")]})
    kernels("ck_backreference.json", {"patterns": [dict(ck, pattern=r"(a)\1")]})
    kernels("ck_repeat_1001.json", {"patterns": [dict(ck, pattern="a{1001}")]})
    kernels("ck_top_list.json", [ck])
    kernels("ck_pattern_number.json", {"patterns": [dict(ck, pattern=5)]})
    kernels("ck_missing_library.json", {"patterns": [{k: v for k, v in ck.items()
                                                      if k != "library"}]})
    kernels("ck_role_ok.json", {"patterns": [dict(ck, role="tensor_parallel")]})
    kernels("ck_2000.json", {"patterns": [dict(ck, pattern=f"zzz15_k{i}_[a-z]+x")
                                          for i in range(2000)]})
    kernels("ck_esc_pattern.json", {"patterns": [dict(ck, pattern=f"zzz({ESC}")]})


def build15(base: Path) -> None:
    """Round 15's hostile inputs beside round 14's fixture."""
    _traces(base)
    _flight_recorder(base)
    _nccl(base)
    _archives(base)
    _option_files(base)
