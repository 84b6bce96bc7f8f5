"""NCCL_DEBUG logs of processes that drive several GPUs (issue 20 §5): nccl-tests `-g 2`
logs of NCCL 2.18, 2.21 and 2.4 (tests/data/nccl/multi_gpu.py, with the generator's own
ground truth), every transport NCCL prints mapped to a link tier, GPUDirect RDMA status,
and the same rows from the same input however often, in whatever blocks, it is read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest
from conftest import REPO

import stepscope
from stepscope.analyzers.comm.nccl import build_nccl_section, measured_links
from stepscope.ingest.nccl import debug_log, log_stream
from stepscope.ingest.nccl.debug_log import read_nccl_log

DATA = REPO / "tests" / "data" / "nccl" / "nccl_tests"
TRUTH: dict[str, Any] = json.loads((DATA / "ground_truth.json").read_text())
LOGS = sorted(TRUTH)
NCCL_TABLES = ("nccl_sources", "nccl_processes", "nccl_comms", "nccl_channels", "nccl_rings",
               "nccl_warnings")


def _gpus(frame: pl.DataFrame) -> list[dict[str, Any]]:
    return frame.select("host", "pid", "cuda_dev", "bus_id", "global_rank").to_dicts()


@pytest.mark.parametrize("name", LOGS)
def test_every_gpu_of_a_process_is_kept_with_its_own_fields(name: str, tmp_path: Path) -> None:
    """One row per (host, pid, cudaDev) with that GPU's busId and rank, as generated."""
    log = read_nccl_log(DATA / name, name, tmp_path)
    truth = TRUTH[name]
    procs = log.frame("nccl_processes")
    assert _gpus(procs) == truth["gpus"]
    assert log.nccl_versions == [truth["version"]]
    assert set(procs["nccl_version"]) == {truth["version"]}
    gdr = {r["global_rank"]: r["gdr"] for r in procs.to_dicts() if r["gdr"] is not None}
    assert gdr == {int(k): v for k, v in truth["gdr"].items()}
    comms = log.frame("nccl_comms")
    for comm in comms.to_dicts():  # a communicator's GPU is its own, never its neighbour's
        gpu = [g for g in truth["gpus"] if (g["host"], g["pid"], g["cuda_dev"]) == (
            comm["host"], comm["pid"], comm["cuda_dev"])]
        assert len(gpu) == 1 and gpu[0]["bus_id"] == comm["bus_id"]
        assert gpu[0]["global_rank"] == comm["rank"]


@pytest.mark.parametrize("name", LOGS)
def test_channel_lines_find_their_communicator(name: str, tmp_path: Path) -> None:
    """Each connection line belongs to the communicator of its own GPU, also when the only
    line naming it (Init COMPLETE, NCCL < 2.19) comes after the connections."""
    log = read_nccl_log(DATA / name, name, tmp_path)
    channels = log.frame("nccl_channels")
    comms = log.frame("nccl_comms").select("host", "pid", "comm_ptr", "cuda_dev", "rank")
    joined = channels.join(comms, on=["host", "pid", "comm_ptr"], how="left",
                           suffix="_comm")
    if comms.is_empty():  # NCCL 2.4's ncclCommInitAll names no communicator
        assert channels["comm_ptr"].null_count() == channels.height > 0
        return
    assert joined["rank"].null_count() == 0
    assert (joined["cuda_dev"] == joined["cuda_dev_comm"]).all()
    ring_rows = joined.filter(pl.col("src_rank").is_not_null())
    # a connection line names its own rank at one end
    assert ((ring_rows["src_rank"] == ring_rows["rank"])
            | (ring_rows["dst_rank"] == ring_rows["rank"])).all()


def _job(tmp_path: Path, names: list[str]) -> Path:
    root = tmp_path / "job"
    root.mkdir()
    for name in names:
        shutil.copy(DATA / name, root / name)
    return root


def test_links_and_gdr_in_the_report_section(tmp_path: Path) -> None:
    """The 2x2 job's world communicator crosses hosts over IB (P2P inside a process);
    the -g 2 job's uses NVLS; nodeB's IB connections lack GPUDirect RDMA."""
    root = _job(tmp_path, LOGS)
    db = tmp_path / "s.duckdb"
    result = stepscope.ingest_run([root], db=db, run="job")
    assert result.exit_code == 0 and len(result.nccl_files) == 3
    con = duckdb.connect(str(db), read_only=True)
    section = build_nccl_section(con, "job")
    assert section is not None
    links = {g.comm_id: g.link for g in section.groups}
    truth_links = {k: v for t in TRUTH.values() for k, v in t["links"].items()}
    assert links == truth_links
    by_comm = {g.comm_id: g for g in section.groups}
    world = by_comm["0x3f1a9c0d7e5b2468"]
    assert world.ranks == [0, 1, 2, 3] and world.hosts == ["nodeA", "nodeB"]
    assert world.gdr is False and set(world.tiers) == {"p2p", "ib"}
    gdr = [f for f in section.findings if f.kind == "gdr_disabled"]
    assert [(f.hosts, f.ranks) for f in gdr] == [(["nodeB"], [2, 3])]
    ranks = [(r.host, r.pid, r.cuda_dev, r.bus_id) for r in section.ranks if r.host != "dgx01"]
    assert ranks == [(g["host"], g["pid"], g["cuda_dev"], g["bus_id"])
                     for g in TRUTH["all_reduce_perf.2x2.log"]["gpus"]]
    assert measured_links(con, "job") == {}  # no process groups to label them


TRANSPORTS = [  # (what NCCL prints after "via", tier, GPUDirect RDMA)
    ("P2P/direct pointer", "p2p", False), ("P2P/direct pointer/read", "p2p", False),
    ("P2P/IPC", "p2p", False), ("P2P/IPC/read", "p2p", False), ("P2P/IPC/CE", "p2p", False),
    ("P2P/CUMEM", "p2p", False), ("P2P/CUMEM/read", "p2p", False),
    ("P2P/CUMEM/CE", "p2p", False), ("P2P/MNNVL/read", "p2p", False),
    ("P2P/indirect/2[2]/read", "p2p", False), ("P2P/common device", "p2p", False),
    ("SHM/direct/direct", "shm", False), ("SHM/CE/direct", "shm", False),
    ("SHM/direct", "shm", False), ("direct shared memory", "shm", False),
    ("NET/IB/0", "ib", False), ("NET/IB/0/GDRDMA", "ib", True),
    ("NET/IB/1(3)/GDRDMA", "ib", True), ("NET/IB/0/GDRDMA(PCI)/Shared", "ib", True),
    ("NET/IBext_v8/2/GDRDMA", "ib", True), ("NET/Socket/0", "socket", False),
    ("NET/AWS Libfabric/0/GDRDMA", "net", True),
]


def test_every_transport_maps_to_a_tier(tmp_path: Path) -> None:
    """One connection line per transport string of NCCL's transport/*.cc (2.4-2.28),
    plus CollNet and NVLS lines."""
    pre = "h:1:2 [0] NCCL INFO "
    lines = [pre + "comm 0x5500 rank 0 nRanks 4 nNodes 2 localRanks 2 localRank 0 MNNVL 0"]
    lines += [pre + f"Channel {i:02d}/0 : 0[0] -> 1[1] [send] via {t}"
              for i, (t, _, _) in enumerate(TRANSPORTS)]
    lines += [pre + "CollNet 00/0 : 0 [send] via COLLNET/SHARP/0/GDRDMA",
              pre + "CollNet 00/0 : 0 [receive] via COLLNET/SHARP/0",
              pre + "NVLS comm 0x5500 headRank 0 nHeads 2 buffSize 1048576 memSize 2097152 "
              "nvlsPerRankSize 201326592 nvlsTotalSize 402653184",
              pre + "comm 0x5500 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 18000 commId 0x1 - "
              "Init COMPLETE"]
    path = tmp_path / "zoo.log"
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    out.mkdir()
    channels = read_nccl_log(path, "zoo.log", out).frame("nccl_channels")
    got = list(zip(channels["transport"], channels["tier"], channels["gdr"], strict=True))
    assert got == [*TRANSPORTS, ("COLLNET/SHARP/0/GDRDMA", "collnet", True),
                   ("COLLNET/SHARP/0", "collnet", False), ("NVLS", "nvls", False)]
    assert set(channels["comm_ptr"]) == {"0x5500"}


def _rows(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every NCCL table's rows in stored order."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {t: con.table(t).fetchall() for t in NCCL_TABLES}
    finally:
        con.close()


def test_same_input_gives_identical_rows(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Ingested twice: identical rows, in the same order; read 97 bytes at a time in
    300-byte blocks (lines cut across reads, state carried across 26 blocks):
    identical rows again."""
    root = _job(tmp_path, LOGS)
    dbs = [tmp_path / f"{i}.duckdb" for i in range(3)]
    for db in dbs[:2]:
        assert stepscope.ingest_run([root], db=db, run="job", executor="inline").exit_code == 0
    monkeypatch.setattr(log_stream, "READ_BYTES", 97)
    monkeypatch.setattr(log_stream, "BLOCK_BYTES", 300)
    blocks = []
    real = debug_log._block
    monkeypatch.setattr(debug_log, "_block", lambda state, block: (
        blocks.append(len(block)), real(state, block)))
    assert stepscope.ingest_run([root], db=dbs[2], run="job", executor="inline").exit_code == 0
    assert len(blocks) > 20 and max(blocks) < 1000
    first = _rows(dbs[0])
    assert first["nccl_processes"] and first["nccl_channels"]
    assert _rows(dbs[1]) == first
    assert _rows(dbs[2]) == first
