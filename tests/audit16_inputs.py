"""The inputs of audit round 16 (issue 43): tests/cli/test_audit_round16.py.

The base database, option files and odd databases are round 14's (`audit14_inputs.root`:
runs `base` (folder t), `other` (t2) and `esc14`); the checks are round 15's
(`audit15_inputs`: check15, one_line, run_cli, full_disk, own_dir). Round 16's hostile
inputs are built by `build16` into folders of their own under the root, each read by one
case only, and never written to by a case (a case writes below its own folder).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import pickle
import shutil
import tarfile
import zipfile
from pathlib import Path
from typing import Any

from audit7_inputs import _dist, _top
from audit8_inputs import FR_DUMP, _inspector_line, _kineto
from audit8_inputs import _on_kernels as _kernels
from audit14_inputs import SPEC
from audit15_inputs import C1, ESC, MIX, NCCL, _fr_entry_dump
from conftest import kineto_trace, write_trace

from stepscope.ingest.nccl.safe_pickle import load_plain

__all__ = ["FR", "INSP", "PARTIAL_KINDS", "build16", "tar_file", "two_ranks", "zip_file"]

FR, INSP = "nccl_trace_rank_8", "node0-pid1.log"
ONE2 = json.dumps(kineto_trace(rank=0, world_size=2))
TWO2 = json.dumps(kineto_trace(rank=1, world_size=2))


def two_ranks(folder: Path) -> None:
    """A good rank 0 of a 2-rank job in `folder` (the second rank is the case's)."""
    write_trace(folder / "rank0.json.gz", kineto_trace(rank=0, world_size=2))


def zip_file(path: Path, members: list[tuple[str, bytes]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, body in members:
            z.writestr(name, body)


def tar_file(path: Path, members: list[tuple[str, bytes]], mode: str = "w") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, mode) as t:  # type: ignore[call-overload]
        for name, body in members:
            info = tarfile.TarInfo(name)
            info.size = len(body)
            t.addfile(info, io.BytesIO(body))


# ---------------------------------------------------------------- partial runs

def _p_broken(d: Path) -> str:
    write_trace(d / "rank1.json", "{broken")
    return "rank1.json"


def _p_gz_cut(d: Path) -> str:
    data = gzip.compress(TWO2.encode(), mtime=0)
    (d / "rank1.json.gz").write_bytes(data[: len(data) // 2])
    return "rank1.json.gz"


def _p_utf16(d: Path) -> str:
    (d / "rank1.json").write_bytes(TWO2.encode("utf-16"))
    return "rank1.json"


def _p_ts_past_64_bits(d: Path) -> str:
    trace = kineto_trace(rank=1, world_size=2)
    _kernels("ts", 7.6e15)(trace)  # + the base time 1.7e18 ns: past 2^63 ns
    write_trace(d / "rank1.json", trace)
    return "rank1.json"


def _p_fifo(d: Path) -> str:
    os.mkfifo(d / "rank1.json")
    return "rank1.json"


def _p_dangling(d: Path) -> str:
    (d / "rank1.json.gz").symlink_to(d / "missing" / "rank1.json.gz")
    return "rank1.json.gz"


def _p_fr(d: Path) -> str:
    (d / FR).write_bytes(_fr_entry_dump(op_id=1 << 70))
    return FR


def _p_inspector(d: Path) -> str:
    write_trace(d / INSP, _inspector_line(header__nnodes=0) + "\n")
    return INSP


def _p_nccl_named(d: Path) -> str:
    write_trace(d / "nccl.log", "hello world, no NCCL here\n")
    return "nccl.log"


def _p_zip_member(d: Path) -> str:
    (d / "rank0.json.gz").unlink()
    zip_file(d / "run.zip", [("rank0.json", ONE2.encode()), ("rank1.json", b"{broken")])
    return "run.zip"


def _p_tar_member(d: Path) -> str:
    (d / "rank0.json.gz").unlink()
    tar_file(d / "run.tar", [("rank0.json", ONE2.encode()), ("rank1.json", b"[1, 2")])
    return "run.tar"


def _p_name_c1(d: Path) -> str:
    write_trace(d / f"rank1{C1}.json", "{broken")
    return "rank1"


PARTIAL_KINDS = {
    # folder: the builder of its failing file, which returns what the failure names
    "p16_broken_rank1": _p_broken,
    "p16_gz_cut_rank1": _p_gz_cut,
    "p16_utf16_rank1": _p_utf16,
    "p16_ts_past_64_bits_rank1": _p_ts_past_64_bits,
    "p16_fifo_rank1": _p_fifo,
    "p16_dangling_rank1": _p_dangling,
    "p16_fr_op_id_2_70": _p_fr,
    "p16_inspector_nnodes_0": _p_inspector,
    "p16_nccl_log_not_nccl": _p_nccl_named,
    "p16_zip_member_broken": _p_zip_member,
    "p16_tar_member_broken": _p_tar_member,
    "p16_broken_named_c1": _p_name_c1,
}


def _partials(base: Path) -> dict[str, str]:
    """Folders of a good rank 0 of a 2-rank job and one file that fails: the failing
    file's name (or the start of it) per folder."""
    failed = {}
    for folder, build in PARTIAL_KINDS.items():
        d = base / folder
        d.mkdir()
        two_ranks(d)
        failed[folder] = build(d)
    return failed


# ---------------------------------------------------------------- single files


def _kineto_files(base: Path) -> None:
    """One-file Kineto runs: ranges at their documented edges."""
    _kineto(base, "k16_ts_past_64_bits", _kernels("ts", 7.6e15))
    _kineto(base, "k16_ts_below_64_bits", _kernels("ts", 7.4e15))
    _kineto(base, "k16_ts_text_exponent", _kernels("ts", "1.5e3"))
    _kineto(base, "k16_dur_text_minus_inf", _kernels("dur", "-Infinity"))
    _kineto(base, "k16_rank_equals_world", _dist("rank", 1))  # world_size 1
    _kineto(base, "k16_base_zero", _top("baseTimeNanoseconds", 0))
    _kineto(base, "k16_base_2_62_plus_1", _top("baseTimeNanoseconds", (1 << 62) + 1))
    _kineto(base, "k16_base_float", _top("baseTimeNanoseconds", 1.7e18))
    many = kineto_trace(rank=0, world_size=1)
    for i in range(30_000):
        many["traceEvents"].append({"ph": "X", "cat": "user_annotation",
                                    "name": f"ProfilerStep#{i + 10}", "pid": 100, "tid": 100,
                                    "ts": 5000.0 + i * 2.0, "dur": 1.0, "args": {}})
    write_trace(base / "k16_30k_steps" / "rank0.json.gz", many)
    flows = kineto_trace(rank=0, world_size=1)
    for i in range(100_000):
        flows["traceEvents"].append({"ph": "s" if i % 2 == 0 else "f", "cat": "ac2g",
                                     "name": "ac2g", "id": i // 2, "pid": 100, "tid": 100,
                                     "ts": 1000.0 + i * 0.01, "bp": "e"})
    write_trace(base / "k16_100k_flow_events" / "rank0.json.gz", flows)
    spaces = b" " * (48 << 20) + json.dumps(kineto_trace(rank=0, world_size=1)).encode()
    (base / "k16_48mib_spaces_then_trace").mkdir()
    (base / "k16_48mib_spaces_then_trace" / "rank0.json.gz").write_bytes(
        gzip.compress(spaces, compresslevel=1, mtime=0))


def _fr_files(base: Path) -> None:
    """Flight Recorder dumps: entry fields of types and ranges not tried, odd opcodes."""
    def fr(folder: str, data: bytes, name: str = FR) -> None:
        (base / folder).mkdir()
        (base / folder / name).write_bytes(data)

    fr("fr16_collective_seq_id_true", _fr_entry_dump(collective_seq_id=True))
    fr("fr16_record_id_below_64_bits", _fr_entry_dump(record_id=-(1 << 63) - 1))
    fr("fr16_timeout_ms_1_5", _fr_entry_dump(timeout_ms=1.5))
    fr("fr16_op_id_a_list", _fr_entry_dump(op_id=[1]))
    fr("fr16_completed_ns_2_64", _fr_entry_dump(time_discovered_completed_ns=1 << 64))
    fr("fr16_time_created_inf", _fr_entry_dump(time_created_ns=float("inf")))
    fr("fr16_protocol_6", b"\x80\x06}.")
    fr("fr16_memoize_on_empty_stack", b"\x80\x04\x94.")
    fr("fr16_bytearray8_65mib_declared", b"\x80\x05\x96" + (65 << 20).to_bytes(8, "little"))
    fr("fr16_stop_only", b".")
    fr("fr16_text_under_dump_name", b"this is not a dump\n", name="nccl_trace_rank_3")
    raw = load_plain(FR_DUMP.read_bytes())
    pgs = {str(i): {"name": str(i), "desc": f"pg{i}", "ranks": "[0, 1]"}
           for i in range(100_000)}
    fr("fr16_100k_process_groups", pickle.dumps(dict(raw, pg_config=pgs), protocol=4))
    fr("fr16_profiling_name_c1", pickle.dumps(dict(raw, entries=[
        dict(e, profiling_name=f"nccl:all_reduce{C1}{MIX}") for e in raw["entries"]]),
        protocol=4))


def _nccl_files(base: Path) -> None:
    """NCCL_DEBUG logs and Inspector files: edges of the documented fields."""
    write_trace(base / "n16_rank_equals_nranks" / "nccl.log", NCCL.replace(
        "rank 0 nRanks 1", "rank 1 nRanks 1").replace("rank 0 nranks 1", "rank 1 nranks 1"))
    write_trace(base / "n16_per_process_name_not_nccl" / "nccl.node0.1234.log",
                "just some text\n")
    comms = "".join(f"node0:1:2 [0] NCCL INFO ncclCommInitRank comm 0x{i:x} rank 0 nranks 1 "
                    f"cudaDev 0 nvmlDev 0 busId 18000 commId 0x{i:x} - Init COMPLETE\n"
                    for i in range(100_000))
    write_trace(base / "n16_100k_communicators" / "nccl.log", NCCL + comms)
    for folder, change in (
            ("i16_n_ranks_text", {"header__n_ranks": "1"}),
            ("i16_nnodes_2_31", {"header__nnodes": 1 << 31}),
            ("i16_pid_2_31", {"metadata__pid": 1 << 31}),
            ("i16_dump_ts_minus_1", {"metadata__dump_timestamp_us": -1}),
            ("i16_coll_sn_1_5", {"coll_perf__coll_sn": 1.5}),
            ("i16_msg_size_true", {"coll_perf__coll_msg_size_bytes": True}),
            ("i16_busbw_text", {"coll_perf__coll_busbw_gbs": "1.0"}),
            ("i16_comm_name_number", {"header__comm_name": 7}),
            ("i16_timing_source_null", {"coll_perf__coll_timing_source": None}),
            ("i16_hostname_null", {"metadata__hostname": None}),
            ("i16_algobw_null", {"coll_perf__coll_algobw_gbs": None})):
        write_trace(base / folder / INSP, "\n".join([_inspector_line(**change)] * 3) + "\n")
    header = json.loads(_inspector_line())
    header["header"] = [1, 2]
    write_trace(base / "i16_header_a_list" / INSP, json.dumps(header) + "\n")
    p2p = json.loads(_inspector_line())
    del p2p["coll_perf"]
    p2p["p2p_perf"] = {"p2p": "Send", "p2p_sn": 1, "p2p_msg_size_bytes": 1024,
                       "p2p_exec_time_us": 10, "p2p_timing_source": "kernel_gpu",
                       "p2p_algobw_gbs": 1.0, "p2p_busbw_gbs": 1.0, "p2p_peer": -1}
    write_trace(base / "i16_p2p_peer_minus_1" / INSP, json.dumps(p2p) + "\n")
    lines = [_inspector_line(header__id=f"0x{i:x}", coll_perf__coll_sn=i)
             for i in range(100_000)]
    write_trace(base / "i16_100k_communicators" / INSP, "\n".join(lines) + "\n")


def _archive_files(base: Path) -> None:
    """Archives of shapes not tried: a .tar.gz of 40 gzip members of 40 MiB of spaces each
    beside a trace, a zip with the trace under a deep path, members that fail in folders
    named with controls."""
    one = json.dumps(kineto_trace(rank=0, world_size=1)).encode()
    bomb = gzip.compress(b" " * (40 << 20), compresslevel=9, mtime=0)
    tar_file(base / "a16_tgz_40_bombs" / "run.tar.gz",
             [(f"pad{i}.json.gz", bomb) for i in range(40)] + [("rank0.json", one)], "w:gz")
    zip_file(base / "a16_zip_deep_path" / "run.zip",
             [("/".join(["d"] * 200) + "/rank0.json", one)])
    zip_file(base / "a16_zip_good" / "run.zip", [("rank0.json", one)])
    zip_file(base / "a16_zip_member_c1_dir" / "run.zip", [(f"x{C1}/rank0.json", b"{broken")])
    tar_file(base / "a16_tar_member_mix_dir" / "run.tar", [(f"x{MIX}/rank0.json", b"{broken")])


def _options(base: Path) -> None:
    """--model and --comm-kernels files of kinds not tried."""
    opts = base / "opt16"
    opts.mkdir()

    def spec(name: str, **change: Any) -> None:
        (opts / name).write_text(json.dumps(dict(SPEC, **change)))

    spec("global_batch_tokens_0.json", global_batch_tokens=0)
    spec("seq_len_minus_1.json", seq_len=-1)
    spec("n_active_params_0.json", n_active_params=0)
    spec("hidden_nan_text.json", hidden="NaN")
    spec("n_layers_1e400_text.json", n_layers="1e400")
    spec("good.json")
    (opts / "n_params_minus_inf.yaml").write_text("".join(
        f"{k}: {v!r}\n" for k, v in dict(SPEC, n_params="-.inf").items()).replace(
        "'-.inf'", "-.inf"))
    ck = {"pattern": "zzz16_kernel", "library": "x", "collective": "all_reduce", "op": "o"}

    def kernels(name: str, body: Any) -> None:
        (opts / name).write_text(json.dumps(body))

    kernels("ck_good.json", {"patterns": [ck]})
    kernels("ck_role_bogus.json", {"patterns": [dict(ck, role="bogus")]})
    kernels("ck_lookbehind.json", {"patterns": [dict(ck, pattern="(?<=a)b")]})
    kernels("ck_extra_top_field.json", {"patterns": [ck], "extra": 1})
    kernels("ck_collective_caps_c1.json", {"patterns": [dict(ck, collective=f"ALL{C1}")]})
    (opts / "ck_trailing_garbage.json").write_text(json.dumps({"patterns": [ck]}) + " ]")
    (opts / "model_dir").mkdir()
    (opts / "ck_dangling.json").symlink_to(opts / "missing.json")


def build16(base: Path) -> dict[str, str]:
    """Round 16's hostile inputs beside round 14's fixture; returns the failing file of
    each partial folder."""
    failed = _partials(base)
    _kineto_files(base)
    _fr_files(base)
    _nccl_files(base)
    _archive_files(base)
    _options(base)
    fr = base / "fr16_good"
    fr.mkdir()
    shutil.copy(FR_DUMP, fr / FR)
    write_trace(base / f"esc16_run{ESC}" / "rank0.json.gz", kineto_trace(rank=0, world_size=1))
    return failed
