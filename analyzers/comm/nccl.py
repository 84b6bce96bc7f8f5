"""The report's `nccl` section: what NCCL's own evidence says about the job.

Sources (docs/schema.md, "NCCL evidence outside Kineto"): NCCL_DEBUG=INFO logs give the
NCCL version, each process's host / GPU / busId, every communicator's members and the
transport of every channel connection (P2P inside a node; NET/IB with or without
GPUDirect RDMA, or NET/Socket across nodes), ring orders and WARN lines; Flight Recorder
dumps give the NCCL version too. Communicators are matched to process groups by their
member set (NCCL ranks are communicator-local; a process's global rank is its rank in
the largest communicator it joined). Identity is checked across sources: a Kineto rank
whose (host, pid) the logs give to another rank is reported, never guessed.
"""

from __future__ import annotations

from typing import TypedDict

import duckdb
import msgspec
import polars as pl

from stepscope.analyzers._sql import Params, fetch_rows, sql
from stepscope.analyzers.comm.launches import nccl_launches, process_launches
from stepscope.analyzers.results import (
    BandwidthPoint,
    MeasuredOps,
    NcclFinding,
    NcclGroup,
    NcclRank,
    NcclSection,
    NcclSource,
)

__all__ = ["BandwidthPoint", "MeasuredOps", "NcclFinding", "NcclGroup", "NcclRank",
           "NcclSection", "NcclSource", "build_nccl_section", "has_nccl_sources",
           "measured_bandwidth", "measured_links", "measured_ops"]


# Row shapes of the queries below (analyzers/sql/nccl/*.sql), private to this module.
class _SourceRow(TypedDict):
    kind: str
    files: int
    ranks: int


class _RankRow(TypedDict):
    rank: int
    host: str
    pid: int
    cuda_dev: int | None
    bus_id: str | None
    network: str | None
    nccl_version: str | None


class _GroupRow(TypedDict):
    comm_id: str
    pg_names: list[str]
    pg_descs: list[str]
    ranks: list[int] | None
    nranks: int
    hosts: list[str]
    tiers: list[str]
    n_ib: int
    n_ib_gdr: int


class _BandwidthRow(TypedDict):
    t_us: int
    bus_bw_gbs: float


class _OpGroupRow(TypedDict):
    comm_id: str
    collective: str
    pg_names: list[str]
    pg_descs: list[str]
    ranks: list[int] | None
    hosts: list[str]
    n_ops: int
    msg_bytes: float
    bus_bw_gbs: float
    bus_bw_p10_gbs: float
    timing_source: str | None
    over_time: list[_BandwidthRow] | None


class _MeasuredBandwidthRow(TypedDict):
    collective: str
    label: str
    bw: float


class _GdrRow(TypedDict):
    host: str
    ranks: list[int | None]
    n_ib: int


class _WarningRow(TypedDict):
    global_rank: int | None
    host: str
    benign: bool
    n: int
    first: str
    timeout: bool


class _RingRow(TypedDict):
    comm_id: str
    channel: int
    n: int
    n_hosts: int
    crossings: int


class _IdentityRow(TypedDict):
    kineto_rank: int | None
    nccl_rank: int | None
    host: str
    pid: int


class _VersionsRow(TypedDict):
    versions: list[str]
    hosts: list[str]


class _Count(TypedDict):
    n: int


def _count(con: duckdb.DuckDBPyConnection, name: str, params: Params) -> int:
    return fetch_rows(con, name, params, _Count)[0]["n"]


def has_nccl_sources(con: duckdb.DuckDBPyConnection, run: str) -> bool:
    return _count(con, "nccl/source_count.sql", {"run": run}) > 0


def build_nccl_section(con: duckdb.DuckDBPyConnection, run: str) -> NcclSection | None:
    """The section, or None when the run has no NCCL source."""
    if not has_nccl_sources(con, run):
        return None
    params = {"run": run}
    sources = [NcclSource(**r) for r in fetch_rows(con, "nccl/sources.sql", params, _SourceRow)]
    ranks = [NcclRank(**r) for r in fetch_rows(con, "nccl/ranks.sql", params, _RankRow)]
    launches = process_launches(con, run)
    if not launches.is_empty():
        ranks = _with_launch(ranks, launches)
    groups = [_group(r) for r in fetch_rows(con, "nccl/groups.sql", params, _GroupRow)]
    hosts: dict[str, list[int]] = {}
    for r in ranks:
        hosts.setdefault(r.host, []).append(r.rank)
    measured = measured_ops(con, run)
    findings = (_socket_findings(ranks, groups) + _gdr_findings(con, run)
                + _warning_findings(con, run) + _ring_findings(con, run, groups)
                + _slow_link_findings(measured)
                + _identity_findings(con, run) + _version_findings(con, run))
    from stepscope.analyzers.comm.bench import bench_tables  # it imports this module

    bench = bench_tables(con, run)
    return NcclSection(versions=_versions(con, run), sources=sources, hosts=hosts,
                       ranks=ranks, groups=groups, measured=measured, findings=findings,
                       bench=bench or msgspec.UNSET,
                       launches=(msgspec.UNSET if launches.is_empty()
                                 else nccl_launches(con, run, launches)))


def _with_launch(ranks: list[NcclRank], launches: pl.DataFrame) -> list[NcclRank]:
    """The ranks, each with the launch its process belongs to (logs of several launches)."""
    launch_of = {(str(h), int(p)): int(n) for h, p, n in launches.iter_rows()}
    return [msgspec.structs.replace(r, launch=launch_of[(r.host, r.pid)])
            if (r.host, r.pid) in launch_of else r for r in ranks]


def measured_ops(con: duckdb.DuckDBPyConnection, run: str) -> list[MeasuredOps]:
    """Inspector bandwidth per communicator and collective ([] without Inspector data)."""
    if not has_nccl_sources(con, run):
        return []
    out = []
    for r in fetch_rows(con, "nccl/op_groups.sql", {"run": run}, _OpGroupRow):
        descs = list(r["pg_descs"])
        out.append(MeasuredOps(
            comm_id=r["comm_id"], collective=r["collective"], pg_names=list(r["pg_names"]),
            pg_desc=descs[0] if len(descs) == 1 else None, ranks=list(r["ranks"] or []),
            hosts=list(r["hosts"]), n_ops=r["n_ops"], msg_bytes=float(r["msg_bytes"]),
            bus_bw_gbs=float(r["bus_bw_gbs"]), bus_bw_p10_gbs=float(r["bus_bw_p10_gbs"]),
            timing_source=r["timing_source"],
            over_time=[BandwidthPoint(t_us=int(p["t_us"]), bus_bw_gbs=float(p["bus_bw_gbs"]))
                       for p in r["over_time"] or []]))
    return out


SLOW_LINK_RATIO = 0.5


def _slow_link_findings(measured: list[MeasuredOps]) -> list[NcclFinding]:
    """A communicator whose measured bus bandwidth is below half the median of its peers
    (same group kind, collective and size): its hosts or links are the slow ones."""
    peers: dict[tuple[str, str, int], list[MeasuredOps]] = {}
    for m in measured:
        if m.pg_desc is not None:
            peers.setdefault((m.pg_desc, m.collective, len(m.ranks)), []).append(m)
    out = []
    for (desc, coll, _), group in peers.items():
        if len(group) < 2:
            continue
        values = sorted(m.bus_bw_gbs for m in group)
        typical = values[len(values) // 2] if len(values) % 2 else (
            values[len(values) // 2 - 1] + values[len(values) // 2]) / 2
        for m in group:
            if m.bus_bw_gbs < SLOW_LINK_RATIO * typical:
                out.append(NcclFinding(
                    kind="slow_link", severity="high", ranks=m.ranks, hosts=m.hosts,
                    message=(f"{coll} in {desc} (pg {', '.join(m.pg_names)}: ranks "
                             f"{', '.join(map(str, m.ranks))} on {', '.join(m.hosts)}) "
                             f"measured {m.bus_bw_gbs:.1f} GB/s bus bandwidth, "
                             f"{m.bus_bw_gbs / typical:.0%} of the {typical:.1f} GB/s its "
                             f"{len(group) - 1} peer group(s) of the same kind reach")))
    return out


def measured_bandwidth(con: duckdb.DuckDBPyConnection, run: str
                       ) -> dict[tuple[str, str], float]:
    """(collective, group label) -> median measured bus bandwidth over its communicators'
    ops (NCCL Inspector); {} without Inspector data."""
    if not has_nccl_sources(con, run):
        return {}
    rows = fetch_rows(con, "nccl/measured_bandwidth.sql", {"run": run}, _MeasuredBandwidthRow)
    return {(r["collective"], r["label"]): float(r["bw"]) for r in rows}


def _versions(con: duckdb.DuckDBPyConnection, run: str) -> list[str]:
    return [v for (v,) in con.execute(sql("nccl/versions.sql"), {"run": run}).fetchall()]


LINK_ORDER = ("socket", "net", "collnet", "ib", "shm", "nvls", "p2p")


def _group(row: _GroupRow) -> NcclGroup:
    tiers = list(row["tiers"])
    link = next((t for t in LINK_ORDER if t in tiers), "none")
    gdr = None if not row["n_ib"] else row["n_ib_gdr"] == row["n_ib"]
    descs = list(row["pg_descs"])
    return NcclGroup(comm_id=row["comm_id"], pg_names=list(row["pg_names"]),
                     pg_desc=descs[0] if len(descs) == 1 else None,
                     ranks=list(row["ranks"] or []), nranks=row["nranks"],
                     hosts=list(row["hosts"]), tiers=tiers, link=link, gdr=gdr)


def _name(g: NcclGroup) -> str:
    if g.pg_names:
        return f"{g.pg_desc or 'group'} (pg {', '.join(g.pg_names)})"
    return f"communicator {g.comm_id}"


def _socket_findings(ranks: list[NcclRank], groups: list[NcclGroup]) -> list[NcclFinding]:
    ib = [r for r in ranks if (r.network or "").upper() == "IB"]
    sock = [r for r in ranks if (r.network or "").lower() == "socket"]
    if not ib or not sock:
        return []
    affected = [g for g in groups if "socket" in g.tiers]
    hosts = sorted({r.host for r in sock})
    return [NcclFinding(
        kind="socket_where_ib", severity="high", ranks=[r.rank for r in sock], hosts=hosts,
        message=(f"{', '.join(hosts)} {'uses' if len(hosts) == 1 else 'use'} NET/Socket (TCP) "
                 "while the other hosts use IB: "
                 f"ranks {', '.join(str(r.rank) for r in sock)} found no IB device. "
                 f"Inter-node traffic of {len(affected)} communicator(s) "
                 f"({'; '.join(_name(g) for g in affected[:4])}) runs over TCP; check the "
                 "IB driver / NCCL_IB_HCA / NCCL_NET on those hosts."))]


def _gdr_findings(con: duckdb.DuckDBPyConnection, run: str) -> list[NcclFinding]:
    rows = fetch_rows(con, "nccl/gdr_off.sql", {"run": run}, _GdrRow)
    return [NcclFinding(
        kind="gdr_disabled", severity="medium", ranks=[x for x in r["ranks"] if x is not None],
        hosts=[r["host"]],
        message=(f"{r['host']}: none of its {r['n_ib']} IB connections uses GPUDirect RDMA "
                 "(no /GDRDMA) while other hosts do; data is staged through host memory. "
                 "Check nvidia-peermem and NCCL_NET_GDR_LEVEL."))
        for r in rows]


# WARN lines that report a failed capability probe the caller falls back from, not a
# fault: aws-ofi-nccl asks libfabric for each protocol's provider (fi_getinfo) and a
# provider that lacks the protocol answers "Function not implemented" (FI_ENOSYS); the
# plugin then tries the next protocol (aws-ofi-nccl src/nccl_ofi_rdma.cpp, sendrecv.cpp).
BENIGN_WARNINGS = r"NET/OFI (?:OFI )?fi_getinfo\(\) call failed: Function not implemented"


def _warning_findings(con: duckdb.DuckDBPyConnection, run: str) -> list[NcclFinding]:
    """One finding per (rank, host) with WARN lines: high, or info for known probes."""
    rows = fetch_rows(con, "nccl/warning_lines.sql", {"run": run, "benign": BENIGN_WARNINGS},
                      _WarningRow)
    return [NcclFinding(
        kind="nccl_probe_failed" if r["benign"] else (
            "nccl_timeout" if r["timeout"] else "nccl_warnings"),
        severity="info" if r["benign"] else "high",
        ranks=[] if r["global_rank"] is None else [r["global_rank"]],
        hosts=[r["host"]],
        message=(f"{'rank ' + str(r['global_rank']) if r['global_rank'] is not None else r['host']}"
                 f" logged {r['n']} NCCL WARN line(s); first: {r['first'][:200]}"
                 + (" (a capability probe the network plugin falls back from, not a fault)"
                    if r["benign"] else "")))
        for r in rows]


def _ring_findings(con: duckdb.DuckDBPyConnection, run: str,
                   groups: list[NcclGroup]) -> list[NcclFinding]:
    rows = fetch_rows(con, "nccl/rings.sql", {"run": run}, _RingRow)
    by_id = {g.comm_id: g for g in groups}
    out = []
    for r in rows:
        g = by_id.get(r["comm_id"])
        out.append(NcclFinding(
            kind="ring_crosses_nodes", severity="medium", ranks=g.ranks if g else [],
            hosts=g.hosts if g else [],
            message=(f"ring {r['channel']} of {_name(g) if g else r['comm_id']} crosses hosts "
                     f"{r['crossings']} times where {r['n_hosts']} would do: each extra "
                     "crossing moves ring traffic onto the network")))
    return out


def _identity_findings(con: duckdb.DuckDBPyConnection, run: str) -> list[NcclFinding]:
    rows = fetch_rows(con, "nccl/identity_conflicts.sql", {"run": run}, _IdentityRow)
    return [NcclFinding(
        kind="rank_identity_conflict", severity="high",
        ranks=sorted({x for x in (r["kineto_rank"], r["nccl_rank"]) if x is not None}),
        hosts=[r["host"]],
        message=(f"the Kineto trace of rank {r['kineto_rank']} and the NCCL log of global rank "
                 f"{r['nccl_rank']} disagree ({r['host']}, pid {r['pid']}); they may come "
                 "from different runs: nothing was merged"))
        for r in rows]


def _version_findings(con: duckdb.DuckDBPyConnection, run: str) -> list[NcclFinding]:
    rows = fetch_rows(con, "nccl/version_mismatch.sql", {"run": run}, _VersionsRow)
    return [NcclFinding(kind="nccl_version_mismatch", severity="high", ranks=[],
                        hosts=sorted(r["hosts"]),
                        message=f"processes run different NCCL versions: "
                                f"{', '.join(sorted(r['versions']))}")
            for r in rows]


# Per-GPU, one direction: TCP sockets over a 100 GbE NIC when the logs show NET/Socket.
SOCKET_GBS = 12.5
LINK_LABELS = {"p2p": "nvlink", "nvls": "nvlink", "shm": "shm", "ib": "ib",
               "net": "network", "collnet": "network", "socket": "socket"}


def measured_links(con: duckdb.DuckDBPyConnection, run: str) -> dict[str, str]:
    """group label (pg_desc) -> the slowest link the NCCL logs show for groups of that
    kind: nvlink (P2P inside a node), shm, ib, 'ib without GDR', socket. Empty without
    NCCL logs."""
    if not has_nccl_sources(con, run):
        return {}
    worst: dict[str, tuple[int, str]] = {}
    for row in fetch_rows(con, "nccl/groups.sql", {"run": run}, _GroupRow):
        group = _group(row)
        if group.link == "none":
            continue
        label = LINK_LABELS.get(group.link, group.link)
        if label == "ib" and group.gdr is False:
            label = "ib without GDR"
        rank = LINK_ORDER.index(group.link) if group.link in LINK_ORDER else 0
        for desc in row["pg_descs"]:
            if desc not in worst or rank < worst[desc][0]:
                worst[desc] = (rank, label)
    return {desc: label for desc, (_, label) in worst.items()}
