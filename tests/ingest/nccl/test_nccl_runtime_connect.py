"""Connection lines made at a communicator's first collective (NCCL >= 2.22's runtime
connection): printed after Init COMPLETE by threads that never name the communicator
(issue 41 §1, §2). Real: NVIDIA/nccl-tests issue #331 (tests/data/NVIDIA_nccl-tests/
PROVENANCE.md), one process driving two GPUs over `P2P/direct pointer/read`. Hand-written
(NCCL's line shapes, tests/data/nccl/README.md): two hosts, one GPU each, whose
`[send]`/`[receive] via NET/AWS Libfabric/0/GDRDMA` lines come from a third thread."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest
from conftest import REPO

import stepscope
from stepscope.analyzers.comm.nccl import build_nccl_section
from stepscope.ingest.nccl.debug_log import read_nccl_log

ISSUE_331 = REPO / "tests" / "data" / "NVIDIA_nccl-tests" / "issues" / "331" / "sendrecv_perf.log"


def _section(tmp_path: Path, logs: dict[str, str | Path]) -> tuple[list[dict[str, object]],
                                                                     duckdb.DuckDBPyConnection]:
    root = tmp_path / "job"
    root.mkdir(parents=True)
    for name, body in logs.items():
        if isinstance(body, Path):
            shutil.copy(body, root / name)
        else:
            (root / name).write_text(body)
    db = tmp_path / "s.duckdb"
    assert stepscope.ingest_run([root], db=db, run="job").exit_code == 0
    con = duckdb.connect(str(db), read_only=True)
    section = build_nccl_section(con, "job")
    assert section is not None
    return [{"comm_id": g.comm_id, "ranks": g.ranks, "hosts": g.hosts, "tiers": g.tiers,
             "link": g.link, "gdr": g.gdr} for g in section.groups], con


def test_one_process_two_gpus_real_log(tmp_path: Path) -> None:
    """Before: the 16 connection lines had no communicator; the group showed tiers [] and
    link 'none'. Each line now belongs to its own GPU's communicator (rank 0 on [0])."""
    log = read_nccl_log(ISSUE_331, "x.log", tmp_path)
    channels = log.frame("nccl_channels")
    assert channels.height == 16
    by_dev = {(r["cuda_dev"], r["comm_ptr"]) for r in channels.iter_rows(named=True)}
    assert by_dev == {(0, "0xb94bf80"), (1, "0xb981910")}
    groups, _ = _section(tmp_path / "s", {"sendrecv_perf.log": ISSUE_331})
    assert groups == [{"comm_id": "0xf6bfaf5466e2b71f", "ranks": [0, 1],
                       "hosts": ["lrdn2296"], "tiers": ["p2p"], "link": "p2p", "gdr": None}]


def _host_log(host: str, pid: int, rank: int, peer: int) -> str:
    pre, late = f"{host}:{pid}:{pid + 20} [0] NCCL INFO ", f"{host}:{pid}:{pid + 31} [0] NCCL INFO "
    return "\n".join([
        f"{host}:{pid}:{pid} [0] NCCL INFO NCCL version 2.26.2+cuda12.8",
        pre + "Using network AWS Libfabric",
        pre + f"ncclCommInitRank comm 0x5{rank}00 rank {rank} nranks 2 cudaDev 0 nvmlDev 0 "
        f"busId 1{rank}000 commId 0x77aa - Init START",
        pre + f"comm 0x5{rank}00 rank {rank} nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0",
        pre + f"ncclCommInitRank comm 0x5{rank}00 rank {rank} nranks 2 cudaDev 0 nvmlDev 0 "
        f"busId 1{rank}000 commId 0x77aa - Init COMPLETE",
        late + f"Channel 00/0 : {peer}[0] -> {rank}[0] [receive] via NET/AWS Libfabric/0/GDRDMA",
        late + f"Channel 00/0 : {rank}[0] -> {peer}[0] [send] via NET/AWS Libfabric/0/GDRDMA",
        late + f"Channel 01/0 : {rank}[0] -> {peer}[0] [send] via NET/AWS Libfabric/1/GDRDMA",
        ""])


def test_two_hosts_deferred_net_lines(tmp_path: Path) -> None:
    """Before: transports '-', link 'none', GPUDirect RDMA unknown; now net with GDR."""
    groups, con = _section(tmp_path, {"nccl.a.100.log": _host_log("a", 100, 0, 1),
                                      "nccl.b.200.log": _host_log("b", 200, 1, 0)})
    assert groups == [{"comm_id": "0x77aa", "ranks": [0, 1], "hosts": ["a", "b"],
                       "tiers": ["net"], "link": "net", "gdr": True}]
    assert con.execute("SELECT count(*) FROM nccl_channels WHERE comm_ptr IS NULL"
                       ).fetchone() == (0,)


@pytest.mark.parametrize("second_rank", [0, 2])
def test_same_rank_in_two_communicators_stays_unattributed(tmp_path: Path,
                                                           second_rank: int) -> None:
    """A GPU with rank 0 in two communicators: a late line naming rank 0 fits both and
    is left without one (never guessed); with rank 2 in the second, only the first fits."""
    pre = "h:1:2 [0] NCCL INFO "
    lines = [pre + "comm 0xa1 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0",
             pre + "comm 0xa1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE",
             pre + f"comm 0xb2 rank {second_rank} nRanks 4 nNodes 1 localRanks 4 localRank 0",
             pre + f"comm 0xb2 rank {second_rank} nranks 4 cudaDev 0 busId 1000 - Init COMPLETE",
             "h:1:9 [0] NCCL INFO Channel 00/1 : 0[0] -> 1[1] via P2P/CUMEM/read"]
    path = tmp_path / "n.log"
    path.write_text("\n".join(lines) + "\n")
    channels = read_nccl_log(path, "n.log", tmp_path).frame("nccl_channels")
    assert channels["comm_ptr"].to_list() == [None if second_rank == 0 else "0xa1"]
