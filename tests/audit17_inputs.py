"""The inputs of audit round 17 (issue 43): tests/cli/test_audit_round17.py.

The base database, option files and odd databases are round 14's (`audit14_inputs.root`:
runs `base` (folder t), `other` (t2) and `esc14`); the checks are round 15's
(`audit15_inputs`) and round 16's (tests/cli/test_audit_round16.py); the archive and
two-rank builders are round 16's (`audit16_inputs`). Round 17's hostile inputs are built
by `build17` into folders of their own under the root, each read by one case only and
never written to by a case (a case writes below its own folder).
"""

from __future__ import annotations

import io
import json
import os
import pickle
import shutil
import socket
import tarfile
from pathlib import Path
from typing import Any

from audit7_inputs import _dist, _top
from audit8_inputs import FR_DUMP, _inspector_line, _kineto
from audit8_inputs import _on_kernels as _kernels
from audit14_inputs import SPEC
from audit15_inputs import NCCL, _fr_entry_dump
from audit16_inputs import FR, INSP, ONE2, tar_file, two_ranks, zip_file
from conftest import kineto_trace, write_trace

from stepscope.ingest.nccl.safe_pickle import load_plain

__all__ = ["FR", "INSP", "PARTIAL17", "build17"]

DAY_US = 86_400 * 1_000_000


def _tar_special(path: Path, good: bytes, name: str, kind: bytes, target: str = "") -> None:
    """A tar of a good rank0.json and a member `name` of tar type `kind` (a FIFO, a
    symbolic or a hard link to `target`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w") as t:
        info = tarfile.TarInfo("rank0.json")
        info.size = len(good)
        t.addfile(info, io.BytesIO(good))
        special = tarfile.TarInfo(name)
        special.type = kind
        special.linkname = target
        t.addfile(special)


# ---------------------------------------------------------------- partial runs


def _p_ts_list(d: Path) -> str:
    trace = kineto_trace(rank=1, world_size=2)
    _kernels("ts", [1])(trace)
    write_trace(d / "rank1.json", trace)
    return "rank1.json"


def _p_ts_plus_text(d: Path) -> str:
    trace = kineto_trace(rank=1, world_size=2)
    _kernels("ts", "+5")(trace)
    write_trace(d / "rank1.json", trace)
    return "rank1.json"


def _p_args_list(d: Path) -> str:
    trace = kineto_trace(rank=1, world_size=2)
    _kernels("args", [1, 2])(trace)
    write_trace(d / "rank1.json", trace)
    return "rank1.json"


def _p_base_2_62(d: Path) -> str:
    trace = kineto_trace(rank=1, world_size=2)
    trace["baseTimeNanoseconds"] = 1 << 62
    write_trace(d / "rank1.json", trace)
    return "rank1.json"


def _p_socket(d: Path) -> str:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    cwd = os.getcwd()
    try:  # a relative bind keeps the address under the 108 bytes AF_UNIX takes
        os.chdir(d)
        sock.bind("rank1.json")
    finally:
        os.chdir(cwd)
        sock.close()
    return "rank1.json"


def _p_inspector_rank(d: Path) -> str:
    write_trace(d / INSP, _inspector_line(header__rank=1, header__n_ranks=1) + "\n")
    return INSP


def _p_inspector_day(d: Path) -> str:
    write_trace(d / INSP, _inspector_line(coll_perf__coll_exec_time_us=DAY_US + 1) + "\n")
    return INSP


def _p_nccl_rank_minus_1(d: Path) -> str:
    write_trace(d / "nccl.log", NCCL.replace("rank 0 nRanks 1", "rank -1 nRanks 1").replace(
        "rank 0 nranks 1", "rank -1 nranks 1"))
    return "nccl.log"


def _p_fr_seq_nan(d: Path) -> str:
    (d / FR).write_bytes(_fr_entry_dump(collective_seq_id=float("nan")))
    return FR


def _p_zip_twice(d: Path) -> str:
    (d / "rank0.json.gz").unlink()
    two = json.dumps(kineto_trace(rank=1, world_size=2)).encode()
    zip_file(d / "run.zip", [("rank0.json", ONE2.encode()), ("rank1.json", two),
                             ("rank1.json", two)])
    return "run.zip"


def _p_tar_symlink(d: Path) -> str:
    (d / "rank0.json.gz").unlink()
    _tar_special(d / "run.tar", ONE2.encode(), "rank1.json", tarfile.SYMTYPE, "/etc/passwd")
    return "run.tar"


def _p_tar_fifo(d: Path) -> str:
    (d / "rank0.json.gz").unlink()
    _tar_special(d / "run.tar", ONE2.encode(), "rank1.json", tarfile.FIFOTYPE)
    return "run.tar"


PARTIAL17 = {
    # folder: the builder of its failing file, which returns what the failure names
    "p17_ts_a_list_rank1": _p_ts_list,
    "p17_ts_text_plus_5_rank1": _p_ts_plus_text,
    "p17_args_a_list_rank1": _p_args_list,
    "p17_base_2_62_rank1": _p_base_2_62,
    "p17_socket_rank1": _p_socket,
    "p17_inspector_rank_1_of_1": _p_inspector_rank,
    "p17_inspector_exec_over_a_day": _p_inspector_day,
    "p17_nccl_rank_minus_1": _p_nccl_rank_minus_1,
    "p17_fr_seq_nan": _p_fr_seq_nan,
    "p17_zip_path_twice": _p_zip_twice,
    "p17_tar_symlink_member": _p_tar_symlink,
    "p17_tar_fifo_member": _p_tar_fifo,
}


def _partials(base: Path) -> dict[str, str]:
    failed = {}
    for folder, build in PARTIAL17.items():
        d = base / folder
        d.mkdir()
        two_ranks(d)
        failed[folder] = build(d)
    return failed


# ---------------------------------------------------------------- single files


def _kineto_files(base: Path) -> None:
    """One-file Kineto runs at documented edges rounds 4-16 left out."""
    _kineto(base, "k17_ts_a_list", _kernels("ts", [1000]))
    _kineto(base, "k17_ts_text_hex", _kernels("ts", "0x10"))
    _kineto(base, "k17_ts_text_nan", _kernels("ts", "NaN"))
    _kineto(base, "k17_ts_text_underscore", _kernels("ts", "1_000"))
    _kineto(base, "k17_dur_text_1e400", _kernels("dur", "1e400"))
    _kineto(base, "k17_dur_text_padded", _kernels("dur", " 5 "))
    _kineto(base, "k17_args_text", _kernels("args", "x"))
    _kineto(base, "k17_world_2_31", _dist("world_size", 1 << 31))
    _kineto(base, "k17_base_2_62", _top("baseTimeNanoseconds", 1 << 62))
    _kineto(base, "k17_base_2_62_minus_1", _top("baseTimeNanoseconds", (1 << 62) - 1))
    _kineto(base, "k17_dur_text_1e0", _kernels("dur", "1e0"))
    _kineto(base, "k17_ts_false", _kernels("ts", False))


def _fr_files(base: Path) -> None:
    """Flight Recorder dumps: entry fields and protocols not tried."""
    def fr(folder: str, data: bytes) -> None:
        (base / folder).mkdir()
        (base / folder / FR).write_bytes(data)

    fr("fr17_p2p_seq_id_2_64", _fr_entry_dump(p2p_seq_id=1 << 64))
    fr("fr17_op_id_a_mapping", _fr_entry_dump(op_id={"a": 1}))
    fr("fr17_record_id_false", _fr_entry_dump(record_id=False))
    fr("fr17_timeout_ms_2_64", _fr_entry_dump(timeout_ms=1 << 64))
    fr("fr17_started_ns_a_list", _fr_entry_dump(time_discovered_started_ns=[1]))
    fr("fr17_created_ns_minus_2_70", _fr_entry_dump(time_created_ns=-(1 << 70)))
    raw = load_plain(FR_DUMP.read_bytes())
    for proto in (2, 3, 5):
        fr(f"fr17_protocol_{proto}", pickle.dumps(raw, protocol=proto))
    many = dict(raw, entries=[dict(raw["entries"][0], record_id=i, collective_seq_id=i)
                              for i in range(20_000)])
    fr("fr17_20k_entries", pickle.dumps(many, protocol=4))


def _nccl_files(base: Path) -> None:
    """NCCL_DEBUG logs and Inspector files: documented ranges not tried."""
    write_trace(base / "n17_rank_10_digits" / "nccl.log", NCCL.replace(
        "rank 0 nRanks 1", "rank 1234567890 nRanks 2000000000").replace(
        "rank 0 nranks 1", "rank 1234567890 nranks 2000000000"))
    for folder, change in (
            ("i17_n_ranks_2_31", {"header__n_ranks": 1 << 31}),
            ("i17_rank_minus_1", {"header__rank": -1}),
            ("i17_rank_text", {"header__rank": "0"}),
            ("i17_pid_minus_1", {"metadata__pid": -1}),
            ("i17_coll_sn_2_63", {"coll_perf__coll_sn": 1 << 63}),
            ("i17_msg_size_minus_1", {"coll_perf__coll_msg_size_bytes": -1}),
            ("i17_exec_over_a_day", {"coll_perf__coll_exec_time_us": DAY_US + 1}),
            ("i17_hostname_number", {"metadata__hostname": 7}),
            ("i17_version_number", {"metadata__inspector_output_format_version": 4}),
            ("i17_timing_source_number", {"coll_perf__coll_timing_source": 1}),
            ("i17_coll_a_list", {"coll_perf__coll": ["AllReduce"]}),
            ("i17_id_null", {"header__id": None}),
            ("i17_comm_name_null", {"header__comm_name": None}),
            ("i17_nnodes_null", {"header__nnodes": None}),
            ("i17_busbw_null", {"coll_perf__coll_busbw_gbs": None}),
            ("i17_exec_a_day", {"coll_perf__coll_exec_time_us": DAY_US})):
        write_trace(base / folder / INSP, "\n".join([_inspector_line(**change)] * 3) + "\n")
    for folder, section, value in (("i17_metadata_a_list", "metadata", [1]),
                                   ("i17_coll_perf_text", "coll_perf", "x"),
                                   ("i17_metadata_null", "metadata", None)):
        line = json.loads(_inspector_line())
        line[section] = value
        write_trace(base / folder / INSP, json.dumps(line) + "\n")
    p2p = json.loads(_inspector_line())
    del p2p["coll_perf"]
    p2p["header"]["n_ranks"] = 2
    p2p["p2p_perf"] = {"p2p": "Send", "p2p_sn": 1, "p2p_msg_size_bytes": 1024,
                       "p2p_exec_time_us": 10, "p2p_timing_source": "kernel_gpu",
                       "p2p_algobw_gbs": 1.0, "p2p_busbw_gbs": 1.0, "p2p_peer": 2}
    write_trace(base / "i17_p2p_peer_n_ranks" / INSP, json.dumps(p2p) + "\n")
    lines = [_inspector_line(coll_perf__coll_sn=i) for i in range(200_000)]
    write_trace(base / "i17_200k_lines_one_comm" / INSP, "\n".join(lines) + "\n")


def _archive_files(base: Path) -> None:
    """Archives: a hard link to a member it does not hold, a long member name."""
    one = json.dumps(kineto_trace(rank=0, world_size=1)).encode()
    tar_file(base / "a17_tar_long_name" / "run.tar", [("x" * 300 + "/rank0.json", one)])
    for folder, kind, target in (("a17_tar_hardlink_missing", tarfile.LNKTYPE,
                                  "nothere.json"),):
        path = base / folder / "run.tar"
        path.parent.mkdir(parents=True)
        with tarfile.open(path, "w") as t:
            info = tarfile.TarInfo("rank0.json")
            info.type = kind
            info.linkname = target
            t.addfile(info)


def _big_kineto(base: Path) -> None:
    """A trace whose kernels run on 50,000 streams (bounded work)."""
    trace = kineto_trace(rank=0, world_size=1)
    for i in range(50_000):
        trace["traceEvents"].append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0,
                                     "tid": 10_000 + i, "ts": 1000.0 + i * 0.01,
                                     "dur": 0.005, "args": {"device": 0, "stream": 10_000 + i,
                                                            "correlation": 900_000 + i}})
    write_trace(base / "k17_50k_streams" / "rank0.json.gz", trace)


def _options(base: Path) -> None:
    """--model and --comm-kernels files of kinds not tried."""
    opts = base / "opt17"
    opts.mkdir()

    def spec(name: str, **change: Any) -> None:
        (opts / name).write_text(json.dumps(dict(SPEC, **change)))

    spec("n_params_minus_7e9.json", n_params=-7e9)
    spec("hidden_0.json", hidden=0)
    spec("seq_len_text_plus.json", seq_len="+4096")
    spec("global_batch_tokens_text_minus_1.json", global_batch_tokens="-1")
    spec("hidden_arabic_indic_text.json", hidden="\u0664\u0660\u0669\u0666")
    spec("n_layers_empty_text.json", n_layers="")
    spec("good17.json")
    (opts / "empty.json").write_bytes(b"")
    (opts / "a_list.yaml").write_text("- 1\n- 2\n")
    (opts / "a_string.json").write_text('"model"')
    ck = {"pattern": "zzz17_kernel", "library": "x", "collective": "all_reduce", "op": "o"}

    def kernels(name: str, body: Any) -> None:
        (opts / name).write_text(json.dumps(body))

    kernels("ck_good17.json", {"patterns": [ck], "description": "mine"})
    kernels("ck_collective_hyphen.json", {"patterns": [dict(ck, collective="all-reduce")]})
    kernels("ck_role_empty.json", {"patterns": [dict(ck, role="")]})
    kernels("ck_patterns_object.json", {"patterns": {"a": ck}})
    kernels("ck_top_list.json", [ck])
    kernels("ck_entry_unknown_field.json", {"patterns": [dict(ck, colour="red")]})
    kernels("ck_open_paren.json", {"patterns": [dict(ck, pattern="zzz17(")]})
    kernels("ck_backreference.json", {"patterns": [dict(ck, pattern="(a)\\1")]})
    (opts / "ck_empty.json").write_bytes(b"")


def build17(base: Path) -> dict[str, str]:
    """Round 17's hostile inputs beside round 14's fixture; returns the failing file of
    each partial folder."""
    failed = _partials(base)
    _kineto_files(base)
    _fr_files(base)
    _nccl_files(base)
    _archive_files(base)
    _big_kineto(base)
    _options(base)
    (base / "fr16_good").mkdir()  # round 16's output fixture copies it
    shutil.copy(FR_DUMP, base / "fr16_good" / FR)
    return failed
