"""Collective statistics per type and process-group kind, with the link they ran on."""

from __future__ import annotations

from typing import TypedDict

import duckdb
import msgspec

from stepscope.analyzers._sql import fetch_rows, sql
from stepscope.analyzers.comm.local_ops import LOCAL_EXCHANGE_OPS
from stepscope.analyzers.comm.nccl import SOCKET_GBS, measured_bandwidth, measured_links
from stepscope.analyzers.context import RunContext
from stepscope.analyzers.results import DEFAULT_NETWORK_GBS, CollectiveStat

# Per-GPU network bandwidth assumed across nodes when nothing better is known:
# one 400 Gb/s NIC per GPU (GB/s, one direction): analyzers.results.DEFAULT_NETWORK_GBS.
# Phases of a token exchange that run on one GPU (analyzers/comm/local_ops.py): part of
# the exchange's time (issue 41 §11), on no link.
GLOO_LINK = "tcp"  # the transport of gloo collectives (PyTorch's gloo uses TCP on Linux)

# A bus bandwidth more than 1% above its link's peak is not physical: say so.
OVER_PEAK = 1.01


class _StatRow(TypedDict):
    """A row of analyzers/sql/collectives/stats.sql."""
    collective: str
    group_label: str
    crosses_nodes: bool
    group_size: int | None
    calls_per_step: float
    bytes_per_step: float | None
    time_ms: float
    exposed_ms: float
    straggler_wait_ms: float
    bubble_ms: float
    overlapped_ms: float
    bus_bw_gbs: float | None
    is_p2p: bool
    library: str
    comm_op: str | None
    comm_role: str | None


def _stat(row: _StatRow, nvlink_gbs: float | None, network_gbs: float,
          measured: dict[str, str], inspector: dict[tuple[str, str], float],
          gpus_per_node: int | None = None) -> CollectiveStat:
    crosses = bool(row["crosses_nodes"])
    link, link_source = "network" if crosses else "nvlink", "assumed"
    if row["library"] == "gloo":  # gloo moves CPU tensors over its TCP transport
        link, link_source = GLOO_LINK, "backend"
    elif (row["library"], row["comm_op"]) in LOCAL_EXCHANGE_OPS:  # no link, no peak
        link, link_source = "none", "kernel_table"
    elif row["group_label"] in measured:  # the transport NCCL's own log reports
        link, link_source = measured[row["group_label"]], "nccl_log"
    # gloo: loopback or a NIC, unknown; a local phase: no link; no peak for either
    peak = None if link in (GLOO_LINK, "none") else {
        "nvlink": nvlink_gbs, "socket": SOCKET_GBS}.get(link, network_gbs)
    bw = None if row["bus_bw_gbs"] is None else float(row["bus_bw_gbs"])
    use = bw / peak if bw is not None and peak else None
    return CollectiveStat(
        collective=row["collective"], group_label=row["group_label"], crosses_nodes=crosses,
        group_size=None if row["group_size"] is None else int(row["group_size"]),
        calls_per_step=float(row["calls_per_step"]),
        bytes_per_step=None if row["bytes_per_step"] is None else float(row["bytes_per_step"]),
        time_ms=float(row["time_ms"]),
        exposed_ms=float(row["exposed_ms"]),
        straggler_wait_ms=float(row["straggler_wait_ms"]), bubble_ms=float(row["bubble_ms"]),
        overlapped_ms=float(row["overlapped_ms"]), bus_bw_gbs=bw, is_p2p=bool(row["is_p2p"]),
        # the bus bandwidth NCCL itself measured (Inspector), next to the trace-derived one
        measured_bus_bw_gbs=inspector.get((row["collective"], row["group_label"])),
        link=link, link_source=link_source, link_peak_gbs=peak,
        link_utilization=use,
        library=row["library"], op=row["comm_op"],
        # the communication-kernel table says what the traffic is for (DeepEP: experts)
        role=row["comm_role"] or "unknown",
        role_source="kernel_table" if row["comm_role"] else "guess",
        warning=over_peak_warning(row, bw, peak, link, link_source,
                                  _nics(row, link, gpus_per_node)) or msgspec.UNSET)


def _nics(row: _StatRow, link: str, gpus_per_node: int | None) -> int:
    """How many NICs a collective across nodes can move one rank's share over: the
    group's members on one node (each GPU has its own NIC, the per-GPU network peak),
    at most half the group (it spans two nodes or more) and the node's GPUs. NCCL's
    rings and trees cross the network on every one of them, so a healthy all_reduce
    across 8-GPU nodes reaches several times the per-GPU peak in bus bandwidth."""
    if link in ("nvlink", "socket", GLOO_LINK) or not row["crosses_nodes"]:
        return 1
    size = int(row["group_size"] or 0)
    return max(1, min(gpus_per_node or 1, size // 2))


def over_peak_warning(row: _StatRow, bw: float | None, peak: float | None, link: str,
                      link_source: str, nics: int = 1) -> str | None:
    """A bus bandwidth above what its link can carry, in words, or None: the link's
    peak, times `nics` for a collective across nodes that every GPU's NIC of the group
    on a node carries (`_nics`). The bandwidth is the trace's own (bytes x bus factor /
    kernel time) and the peak a table value, so one of them is wrong for this group:
    the report shows the number and says it cannot be."""
    if bw is None or not peak or bw <= OVER_PEAK * peak * nics:
        return None
    how = "from NCCL's log" if link_source == "nccl_log" else "assumed"
    most = peak * nics
    over = (f"the {peak:.0f} GB/s peak of its link ({link}, {how})" if nics == 1 else
            f"the {most:.0f} GB/s its link can carry ({link}, {how}: {peak:.0f} GB/s per "
            f"GPU x the {nics} NICs of the group's GPUs on a node)")
    return (f"{row['collective']} on {row['group_label']}: bus bandwidth {bw:.1f} GB/s is "
            f"{bw / most:.2f}x {over}; no link runs above its peak, so the trace's message "
            "sizes or kernel times, or the link or its peak, are wrong for this group")


def collective_stats(ctx: RunContext,
                     network_gbs: float = DEFAULT_NETWORK_GBS) -> tuple[CollectiveStat, ...]:
    """Per (collective, group) per rank and step: calls, bytes, time split into exposed,
    straggler wait, bubble and overlapped (analyzers/sql/collectives/stats.sql), bus
    bandwidth and the peak of the link (NVLink inside a node, network across nodes; the
    transport of the NCCL_DEBUG logs when the run has them)."""
    measured = measured_links(ctx.con, ctx.run)
    inspector = measured_bandwidth(ctx.con, ctx.run)
    rows = fetch_rows(ctx.con, "collectives/stats.sql", {"run": ctx.run}, _StatRow)
    return tuple(_stat(row, ctx.device.nvlink_gbs, network_gbs, measured, inspector,
                       ctx.layout.gpus_per_node)
                 for row in rows)


def median_kernel_us(con: duckdb.DuckDBPyConnection, run: str) -> float | None:
    (value,), = con.execute(sql("collectives/kernel_median.sql"), {"run": run}).fetchall()
    return float(value) if value is not None else None




def op_times(con: duckdb.DuckDBPyConnection, run: str) -> dict[str, float]:
    """ms per rank and step of each kernel (or leaf CPU op) name."""
    rows = con.execute(sql("collectives/top_ops.sql"), {"run": run}).fetchall()
    return {op: float(ms) for op, ms in rows}
