"""NCCL_DEBUG=INFO logs of processes that drive several GPUs (nccl-tests `-g 2`), written by
make_logs.py into tests/data/nccl/nccl_tests/ with ground_truth.json (what each log's
generator put in: every GPU's host, pid, cudaDev, busId and global rank, every
communicator's link tier, every GPU's GPUDirect RDMA use).

Three shapes, each line copied from NCCL's own format string of that version (README.md):

* `all_reduce_perf.2x2.log`: `mpirun -np 2 -H nodeA,nodeB all_reduce_perf -g 2`, NCCL
  2.18.3: one stdout holding two processes of two GPUs each (world of 4). No line names
  the communicator before its `Init COMPLETE` (NCCL < 2.19), each GPU's init thread logs
  under its own tid and [cudaDev], the two GPUs' lines interleave. Inside a process the
  GPUs connect `P2P/direct pointer/read`; across hosts nodeA uses `NET/IB/0/GDRDMA`,
  nodeB plain `NET/IB/0` and says `GPU Direct RDMA Disabled for GPU ...`.
* `all_reduce_perf.g2.log`: one process, `-g 2`, NCCL 2.21.5 (`ncclCommInitAll comm ...`,
  the `comm .. nRanks .. nNodes` line first), `P2P/CUMEM/read` and NVLS buffers.
* `all_reduce_perf.g2.nccl24.log`: NCCL 2.4.8, where ncclCommInitAll sets up every GPU
  from the calling thread: one tid, the [cudaDev] switching, `Ring 00 : 0[0] -> 1[1] via
  P2P/direct pointer`, and no `Init COMPLETE` (so no communicator, busId or global rank).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

OUT = Path(__file__).parent / "nccl_tests"
BUS = ("18000", "2a000")


def _interleave(streams: list[list[str]]) -> list[str]:
    """Concurrent threads' lines, round-robin (a fixed order, as a log shows them)."""
    out: list[str] = []
    for i in range(max(len(s) for s in streams)):
        out += [s[i] for s in streams if i < len(s)]
    return out


def _log_2x2() -> tuple[str, dict[str, Any]]:
    hosts = {"nodeA": 4242, "nodeB": 5151}
    comm_id = "0x3f1a9c0d7e5b2468"
    lines = ["# nThread 1 nGpus 2 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 "
             "iters: 20 agg iters: 1 validation: 1 graph: 0", "#", "# Using devices"]
    gpus, gdr = [], {}
    for h, (host, pid) in enumerate(hosts.items()):
        for dev in range(2):
            lines.append(f"#  Rank {2 * h + dev:2d} Group  0 Pid {pid:6d} on {host:>8} device "
                         f"{dev:2d} [0x{BUS[dev][:2]}] NVIDIA H100 80GB HBM3")
    streams: list[list[str]] = []
    for h, (host, pid) in enumerate(hosts.items()):
        main = f"{host}:{pid}:{pid} [0] NCCL INFO "
        streams.append([main + f"Bootstrap : Using eth0:10.0.0.{h + 1}<0>",
                        main + "cudaDriverVersion 12020"] + (
            ["NCCL version 2.18.3+cuda12.2"] if h == 0 else []) + [
            main + f"NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB eth0:10.0.0.{h + 1}<0>"])
        for dev in range(2):
            rank = 2 * h + dev
            tid = pid + 18 + dev
            pre = f"{host}:{pid}:{tid} [{dev}] NCCL INFO "
            enabled = host == "nodeA"
            gdr[rank] = enabled
            gpus.append({"host": host, "pid": pid, "cuda_dev": dev, "bus_id": BUS[dev],
                         "global_rank": rank})
            nxt, prv = (rank + 1) % 4, (rank - 1) % 4
            t = [pre + "Using network IB",
                 pre + (f"GPU Direct RDMA Enabled for GPU {BUS[dev]} / HCA 0 (distance 4 <= 5), "
                        "read 1" if enabled else
                        f"GPU Direct RDMA Disabled for GPU {BUS[dev]} / HCA 0 (distance 7 > 5)")]
            if rank == 0:
                t += [pre + f"Channel {c:02d}/02 :    0   1   2   3" for c in range(2)]
            t.append(pre + f"Trees [0] {nxt}/-1/-1->{rank}->{prv} [1] {nxt}/-1/-1->{rank}->{prv}")
            t.append(pre + "P2P Chunksize set to 131072")
            for c in range(2):
                for a, b in ((prv, rank), (rank, nxt)):
                    if a // 2 == b // 2:  # same process: direct pointers
                        t.append(pre + f"Channel {c:02d}/0 : {a}[{a % 2}] -> {b}[{b % 2}] via "
                                 "P2P/direct pointer/read")
                    else:
                        side = "receive" if b == rank else "send"
                        t.append(pre + f"Channel {c:02d}/0 : {a}[{a % 2}] -> {b}[{b % 2}] "
                                 f"[{side}] via NET/IB/0{'/GDRDMA' if enabled else ''}")
            t += [pre + "Connected all rings", pre + "Connected all trees",
                  pre + "threadThresholds 8/8/64 | 32/8/64 | 512 | 512",
                  pre + "2 coll channels, 0 nvls channels, 2 p2p channels, 2 p2p channels per peer",
                  pre + f"comm 0x55d0{h}c1a{dev}000 rank {rank} nranks 4 cudaDev {dev} nvmlDev "
                  f"{dev} busId {BUS[dev]} commId {comm_id} - Init COMPLETE"]
            streams.append(t)
    lines += _interleave(streams)
    lines += ["#       size         count      type   redop    root     time   algbw   busbw",
              "   134217728      33554432     float     sum      -1   2210.4   60.72   91.08"]
    return "\n".join(lines) + "\n", {"gpus": gpus, "links": {comm_id: "ib"}, "gdr": gdr,
                                     "version": "2.18.3+cuda12.2"}


def _log_g2() -> tuple[str, dict[str, Any]]:
    host, pid, comm_id = "dgx01", 7001, "0x76b3b6be637caf1c"
    main = f"{host}:{pid}:{pid} [0] NCCL INFO "
    streams = [[main + "Bootstrap : Using ibp26s0:10.1.0.5<0>",
                main + "cudaDriverVersion 12040", main + "NCCL version 2.21.5+cuda12.4"]]
    for dev in range(2):
        tid = pid + 6 + dev
        pre = f"{host}:{pid}:{tid} [{dev}] NCCL INFO "
        ptr = f"0x55f6848{'de3b' if dev == 0 else '95f4'}0"
        t = [pre + f"comm {ptr} rank {dev} nRanks 2 nNodes 1 localRanks 2 localRank {dev} "
             "MNNVL 0", pre + f"NVLS multicast support is available on dev {dev}"]
        if dev == 0:
            t += [pre + f"Channel {c:02d}/04 :    0   1" for c in range(4)]
        t += [pre + f"Trees [0] -1/-1/-1->{dev}->{1 - dev}", pre + "P2P Chunksize set to 524288"]
        t += [pre + f"Channel {c:02d}/0 : {dev}[{dev}] -> {1 - dev}[{1 - dev}] via P2P/CUMEM/read"
              for c in range(4)]
        t += [pre + f"NVLS comm {ptr} headRank {dev} nHeads 2 buffSize 1048576 memSize 2097152 "
              "nvlsPerRankSize 201326592 nvlsTotalSize 402653184",
              pre + "Connected NVLS tree", pre + "Connected all rings", pre + "Connected all trees",
              pre + "4 coll channels, 4 collnet channels, 16 nvls channels, 4 p2p channels, "
              "2 p2p channels per peer",
              pre + f"ncclCommInitAll comm {ptr} rank {dev} nranks 2 cudaDev {dev} nvmlDev {dev} "
              f"busId {BUS[dev]} commId {comm_id} - Init COMPLETE",
              pre + f"Init timings - ncclCommInitAll: rank {dev} nranks 2 total 0.48 (kernels "
              "0.20, alloc 0.01, bootstrap 0.00, allgathers 0.00, topo 0.10, graphs 0.00, "
              "connections 0.15, rest 0.02)"]
        streams.append(t)
    gpus = [{"host": host, "pid": pid, "cuda_dev": d, "bus_id": BUS[d], "global_rank": d}
            for d in range(2)]
    return "\n".join(_interleave(streams)) + "\n", {
        "gpus": gpus, "links": {comm_id: "nvls"}, "gdr": {}, "version": "2.21.5+cuda12.4"}


def _log_nccl24() -> tuple[str, dict[str, Any]]:
    """NCCL 2.4.8's ncclCommInitAll: the calling thread sets up every GPU's transports in
    turn (the [cudaDev] follows cudaSetDevice) and prints no Init COMPLETE."""
    host, pid = "oldbox", 15833
    pre0 = f"{host}:{pid}:{pid} [0] NCCL INFO "
    lines = [pre0 + "Bootstrap : Using [0]eth0:10.2.3.32<0>",
             pre0 + "NET/Socket : Using [0]eth0:10.2.3.32<0>", "NCCL version 2.4.8+cuda10.0",
             f"{host}:{pid}:{pid} [1] NCCL INFO nranks 2"]
    for dev in range(2):
        lines.append(f"{host}:{pid}:{pid} [{dev}] NCCL INFO Setting affinity for GPU {dev} to "
                     "ff00ff")
    lines.append(pre0 + "Channel 00 :    0   1")
    for dev in range(2):
        pre = f"{host}:{pid}:{pid} [{dev}] NCCL INFO "
        lines.append(pre + f"Ring 00 : {dev}[{dev}] -> {1 - dev}[{1 - dev}] via P2P/direct pointer")
    for dev in range(2):
        pre = f"{host}:{pid}:{pid} [{dev}] NCCL INFO "
        lines.append(pre + f"Trees [0] {-1 if dev == 0 else 0}->{dev}->"
                     f"{1 if dev == 0 else -1}/-1/-1")
    gpus = [{"host": host, "pid": pid, "cuda_dev": d, "bus_id": None, "global_rank": None}
            for d in range(2)]
    return "\n".join(lines) + "\n", {"gpus": gpus, "links": {}, "gdr": {},
                                     "version": "2.4.8+cuda10.0"}


LOGS = {"all_reduce_perf.2x2.log": _log_2x2, "all_reduce_perf.g2.log": _log_g2,
        "all_reduce_perf.g2.nccl24.log": _log_nccl24}


def write() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    truth = {}
    for name, make in LOGS.items():
        text, facts = make()
        (OUT / name).write_text(text)
        truth[name] = facts
    (OUT / "ground_truth.json").write_text(json.dumps(truth, indent=1) + "\n")
