"""nccl-tests results found in the logs (ingest/nccl/bench.py), each table held against
the peak of the link its communicator used (docs/report.md, "nccl-tests").

The link is the slowest transport NCCL's own connection lines show for the
communicators of the same log with the table's rank count (analyzers/comm/nccl.py's
order); without connection lines it is assumed from the hosts the table's devices are
on. The peak is one direction: NVLink from the peak table by the GPU name nccl-tests
printed (half the bidirectional figure), the network and sockets as the collectives
section assumes them.
"""

from __future__ import annotations

from typing import TypedDict

import duckdb

from stepscope.analyzers._sql import fetch_rows
from stepscope.analyzers.comm.nccl import LINK_LABELS, LINK_ORDER, SOCKET_GBS
from stepscope.analyzers.flops.peaks import lookup, table_version
from stepscope.analyzers.results import DEFAULT_NETWORK_GBS, BenchRow, NcclBench


class _BenchRow(TypedDict):
    source_file: str
    bench: int
    test: str | None
    test_source: str | None
    ranks: int | None
    hosts: list[str]
    devices: list[str]
    avg_busbw_gbs: float | None
    mean_busbw_gbs: float | None
    best_busbw_gbs: float | None
    best_size_bytes: int | None
    best_in_place: bool | None
    tiers: list[str]


class _ResultRow(TypedDict):
    size_bytes: int
    dtype: str
    in_place: bool
    time_us: float | None
    algbw_gbs: float | None
    busbw_gbs: float | None


def _link(row: _BenchRow) -> tuple[str, str]:
    """(link, source): the slowest tier of the log's connection lines, else assumed."""
    tier = next((t for t in LINK_ORDER if t in row["tiers"]), None)
    if tier is not None:
        return LINK_LABELS.get(tier, tier), "nccl_log"
    if not row["hosts"]:
        return "unknown", "assumed"
    return ("network" if len(row["hosts"]) > 1 else "nvlink"), "assumed"


def _peak(link: str, devices: list[str]) -> tuple[float | None, str | None]:
    """(GB/s one direction, where it comes from) of a link, or (None, why not)."""
    if link == "nvlink":
        peak = lookup(devices[0]) if len(devices) == 1 else None
        if peak is None or peak.interconnect_gbs is None:
            named = devices[0] if len(devices) == 1 else ", ".join(devices) or "no GPU named"
            return None, f"{named}: no NVLink peak in the table (version {table_version()})"
        return peak.interconnect_gbs / 2, (
            f"{peak.id} {peak.interconnect} {peak.interconnect_gbs:.0f} GB/s both directions "
            f"(peak table {table_version()}), half per direction")
    if link == "socket":
        return SOCKET_GBS, "assumed: TCP over a 100 GbE NIC"
    if link in ("ib", "network", "ib without GDR"):
        return DEFAULT_NETWORK_GBS, "assumed: one 400 Gb/s NIC per GPU"
    return None, None


def _bench(con: duckdb.DuckDBPyConnection, run: str, row: _BenchRow) -> NcclBench:
    link, link_source = _link(row)
    peak, peak_source = _peak(link, list(row["devices"]))
    best = row["best_busbw_gbs"]
    results = fetch_rows(con, "nccl/bench_rows.sql",
                         {"run": run, "file": row["source_file"], "bench": row["bench"]},
                         _ResultRow)
    return NcclBench(
        source_file=row["source_file"], bench=int(row["bench"]), test=row["test"],
        test_source=row["test_source"], ranks=row["ranks"], hosts=list(row["hosts"]),
        devices=list(row["devices"]), avg_bus_bw_gbs=row["avg_busbw_gbs"],
        mean_bus_bw_gbs=row["mean_busbw_gbs"], best_bus_bw_gbs=best,
        best_size_bytes=row["best_size_bytes"], best_in_place=row["best_in_place"],
        link=link, link_source=link_source, link_peak_gbs=peak, peak_source=peak_source,
        best_of_peak=best / peak if best is not None and peak else None,
        rows=[BenchRow(**r) for r in results])


def bench_tables(con: duckdb.DuckDBPyConnection, run: str) -> list[NcclBench]:
    """Every nccl-tests table of the run's logs, in file and table order."""
    rows = fetch_rows(con, "nccl/bench.sql", {"run": run}, _BenchRow)
    return [_bench(con, run, r) for r in rows]
