"""Write the NCCL_DEBUG=INFO logs of tests/data/nccl/tp_across_nodes/ and, through
multi_gpu.py, of tests/data/nccl/nccl_tests/ (processes that drive several GPUs; run once,
the output is committed). Every line follows a real line shape; README.md next to this file
cites where each comes from. The job mirrors sample_traces/simulated/tp_across_nodes:
8 ranks, 4 hosts (node000..node003) with 2 GPUs each, pid 1000 + rank, TP groups
[0-3] and [4-7] (each spanning two hosts), DP pairs [r, r+4].

Planted problems, for the findings tests:
* node003 has no IB device: ranks 6 and 7 fall back to NET/Socket although the others
  use IB;
* node002 uses IB without GPUDirect RDMA (no /GDRDMA);
* rank 5 logs a NET/IB completion error (WARN, with the >= 2.26 timestamp prefix);
* channel 01 of the world communicator is ordered so the ring crosses hosts 8 times
  (4 would do).
"""

from __future__ import annotations

import json
from pathlib import Path

import multi_gpu

OUT = Path(__file__).parent / "tp_across_nodes" / "nccl-logs"
VERSION = "2.21.5+cuda12.4"
BUS = ("18000", "2a000")
WORLD = list(range(8))
COMMS = {  # commId -> (members, comm pointer base)
    "0x5ae77eb5ea4ec1ee": (WORLD, 0x55A000000000),
    "0x49bbd7790311d5eb": ([0, 1, 2, 3], 0x55B000000000),
    "0x7d1e0c3a9b2f4410": ([4, 5, 6, 7], 0x55B100000000),
    "0x1c9f00a2b3c4d501": ([0, 4], 0x55C000000000),
    "0x1c9f00a2b3c4d502": ([1, 5], 0x55C100000000),
    "0x1c9f00a2b3c4d503": ([2, 6], 0x55C200000000),
    "0x1c9f00a2b3c4d504": ([3, 7], 0x55C300000000),
}
RINGS = {"0x5ae77eb5ea4ec1ee": [WORLD, [0, 2, 1, 3, 4, 6, 5, 7]]}


def host(rank: int) -> str:
    return f"node{rank // 2:03d}"


def transport(src: int, dst: int, logger: int) -> str:
    """What the logging process prints for its side of the connection src -> dst."""
    if host(src) == host(dst):
        return "P2P/CUMEM"
    if host(src) == "node003" or host(dst) == "node003":
        return "NET/Socket/0"
    if host(logger) == "node002":
        return "NET/IB/0"
    return "NET/IB/0/GDRDMA"


def comm_lines(rank: int, comm_id: str, members: list[int], base: int, tid: int) -> list[str]:
    local = members.index(rank)
    n = len(members)
    hosts = sorted({host(m) for m in members})
    local_ranks = sum(1 for m in members if host(m) == host(rank))
    ptr = f"{base + rank * 0x1000:#x}"
    pre = f"{host(rank)}:{1000 + rank}:{tid} [{rank % 2}] NCCL INFO "
    on_host = [m for m in members if host(m) == host(rank)]
    lines = [pre + f"comm {ptr} rank {local} nRanks {n} nNodes {len(hosts)} localRanks "
             f"{local_ranks} localRank {on_host.index(rank)} MNNVL 0"]
    rings = RINGS.get(comm_id, [members])
    for ch, ring in enumerate(rings):
        order = "".join(f"{members.index(m):>4}" for m in ring)
        lines.append(pre + f"Channel {ch:02d}/{len(rings):02d} :{order}")
    nxt_prev = []
    for ch, ring in enumerate(rings):
        pos = ring.index(rank)
        nxt, prv = ring[(pos + 1) % n], ring[pos - 1]
        nxt_prev.append((ch, nxt, prv))
    lines.append(pre + "Trees " + " ".join(
        f"[{ch}] {members.index(nxt)}/-1/-1->{local}->{members.index(prv)}"
        for ch, nxt, prv in nxt_prev))
    lines.append(pre + "P2P Chunksize set to 131072")
    for ch, nxt, prv in nxt_prev:
        for a, b in ((prv, rank), (rank, nxt)):
            if a == b:
                continue
            t = transport(a, b, rank)
            la, lb = members.index(a), members.index(b)
            side = "" if t.startswith("P2P") else (" [receive]" if b == rank else " [send]")
            lines.append(pre + f"Channel {ch:02d}/0 : {la}[{a % 2}] -> {lb}[{b % 2}]{side} via {t}")
    lines.append(pre + "Connected all rings")
    lines.append(pre + "Connected all trees")
    lines.append(pre + f"ncclCommInitRank comm {ptr} rank {local} nranks {n} cudaDev {rank % 2} "
                 f"nvmlDev {rank % 2} busId {BUS[rank % 2]} commId {comm_id} - Init COMPLETE")
    lines.append(pre + f"Init timings - ncclCommInitRank: rank {local} nranks {n} total 0.61 "
                 "(kernels 0.22, alloc 0.01, bootstrap 0.20, allgathers 0.02, topo 0.10, "
                 "graphs 0.01, connections 0.04, rest 0.01)")
    return lines


def process_log(rank: int) -> str:
    h, pid = host(rank), 1000 + rank
    pre = f"{h}:{pid}:{pid} [{rank % 2}] NCCL INFO "
    lines = [pre + f"Bootstrap: Using eth0:10.0.{rank // 2}.{rank % 2 + 10}<0>",
             pre + "cudaDriverVersion 12040",
             pre + f"NCCL version {VERSION}"]
    if h == "node003":
        lines += [pre + "NET/IB : No device found.",
                  pre + f"NET/Socket : Using [0]eth0:10.0.3.{rank % 2 + 10}<0>",
                  pre + "Using network Socket"]
    else:
        lines += [pre + f"NET/IB : Using [0]mlx5_{rank % 2}:1/IB [RO]; OOB eth0:10.0.{rank // 2}."
                  f"{rank % 2 + 10}<0>", pre + "Using network IB"]
    for k, (comm_id, (members, base)) in enumerate(COMMS.items()):
        if rank in members:
            lines += comm_lines(rank, comm_id, members, base, pid + 100 + k)
    if rank == 5:
        lines.append(f"[2025-09-23 06:58:05] {h}:{pid}:{pid + 200} [1] transport/net_ib.cc:1696 "
                     "NCCL WARN NET/IB : Got completion from peer 10.0.0.11<41234> with "
                     "status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.0.2.11 "
                     "remoteGids::ffff:10.0.0.11")
    return "\n".join(lines) + "\n"


# NCCL Inspector (NCCL >= 2.28, plugins/profiler/inspector): one JSON object per completed
# op, format v4.0, as in the plugin's README example (trace-formats.md §3c). Bus bandwidth
# per communicator (GB/s) as the planted links would give: IB+GDR, IB without GDR, TCP.
INSPECTOR_OUT = OUT.parent / "nccl-inspector-unknown-jobid"
BUSBW = {"0x49bbd7790311d5eb": 40.0, "0x7d1e0c3a9b2f4410": 9.0, "0x1c9f00a2b3c4d501": 30.0,
         "0x1c9f00a2b3c4d502": 30.0, "0x1c9f00a2b3c4d503": 6.0, "0x1c9f00a2b3c4d504": 6.0}
OPS = {4: (268435456, 20), 2: (26214400, 4)}  # group size -> (message bytes, ops)


def inspector_lines(rank: int) -> str:
    lines = []
    t0 = 1758610500000000
    for comm_id, busbw in BUSBW.items():
        members = COMMS[comm_id][0]
        if rank not in members:
            continue
        n = len(members)
        size, count = OPS[n]
        algbw = busbw * n / (2 * (n - 1))
        exec_us = round(size / (algbw * 1e3), 1)
        for sn in range(count):
            lines.append(json.dumps({
                "header": {"id": comm_id, "comm_name": "", "rank": members.index(rank),
                           "n_ranks": n, "nnodes": len({host(m) for m in members})},
                "metadata": {"inspector_output_format_version": "v4.0", "git_rev": "",
                             "rec_mechanism": "nccl_profiler_interface",
                             "dump_timestamp_us": t0 + sn * 250000 + rank,
                             "hostname": host(rank), "pid": 1000 + rank},
                "coll_perf": {"coll": "AllReduce", "coll_sn": sn, "coll_msg_size_bytes": size,
                              "coll_exec_time_us": exec_us, "coll_timing_source": "kernel_gpu",
                              "coll_algobw_gbs": round(algbw, 2),
                              "coll_busbw_gbs": round(busbw, 2)}}))
    return "\n".join(lines) + "\n"


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    INSPECTOR_OUT.mkdir(parents=True, exist_ok=True)
    for rank in WORLD:
        (OUT / f"nccl.{host(rank)}.{1000 + rank}.log").write_text(process_log(rank))
        (INSPECTOR_OUT / f"{host(rank)}-pid{1000 + rank}.log").write_text(
            inspector_lines(rank))
    multi_gpu.write()


if __name__ == "__main__":
    main()
