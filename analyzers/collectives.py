"""Collective statistics per type and process-group kind, with the link they ran on."""

from __future__ import annotations

from typing import Any

import duckdb

from analyzers._sql import sql
from analyzers.context import RunContext
from analyzers.model import DEFAULT_NETWORK_GBS, CollectiveStat
from analyzers.nccl import SOCKET_GBS, measured_bandwidth, measured_links

# Per-GPU network bandwidth assumed across nodes when nothing better is known:
# one 400 Gb/s NIC per GPU (GB/s, one direction): analyzers.model.DEFAULT_NETWORK_GBS.

STEP_GAPS_SQL = """
-- Idle between steps: from the last GPU end of step k's own ops to the first GPU start
-- of step k+1 (the host preparing the next step), per rank and complete step.
WITH s AS (
    SELECT rank, step, gpu_end_ns,
        lead(gpu_start_ns) OVER (PARTITION BY rank ORDER BY step) AS next_start,
        lead(step) OVER (PARTITION BY rank ORDER BY step) AS next_step
    FROM steps WHERE run = $run AND gpu_start_ns IS NOT NULL
)
SELECT avg(greatest(0, next_start - gpu_end_ns)) / 1e6 FROM s
WHERE next_step = step + 1
"""
KERNEL_MEDIAN_SQL = """
SELECT median(dur_ns) / 1e3 FROM gpu_ops WHERE run = $run AND kind = 'compute'
"""


def _stat(row: dict[str, Any], nvlink_gbs: float | None, network_gbs: float,
          measured: dict[str, str], inspector: dict[tuple[str, str], float]) -> CollectiveStat:
    crosses = bool(row["crosses_nodes"])
    link, link_source = "network" if crosses else "nvlink", "assumed"
    if row["group_label"] in measured:  # the transport NCCL's own log reports
        link, link_source = measured[row["group_label"]], "nccl_log"
    peak = {"nvlink": nvlink_gbs, "socket": SOCKET_GBS}.get(link, network_gbs)
    bw = None if row["bus_bw_gbs"] is None else float(row["bus_bw_gbs"])
    return CollectiveStat(
        collective=row["collective"], group_label=row["group_label"], crosses_nodes=crosses,
        group_size=None if row["group_size"] is None else int(row["group_size"]),
        calls_per_step=float(row["calls_per_step"]),
        bytes_per_step=float(row["bytes_per_step"]), time_ms=float(row["time_ms"]),
        exposed_ms=float(row["exposed_ms"]), bus_bw_gbs=bw, is_p2p=bool(row["is_p2p"]),
        # the bus bandwidth NCCL itself measured (Inspector), next to the trace-derived one
        measured_bus_bw_gbs=inspector.get((row["collective"], row["group_label"])),
        link=link, link_source=link_source, link_peak_gbs=peak,
        link_utilization=bw / peak if bw is not None and peak else None)


def collective_stats(ctx: RunContext,
                     network_gbs: float = DEFAULT_NETWORK_GBS) -> tuple[CollectiveStat, ...]:
    """Per (collective, group) per rank and step: calls, bytes, time, exposed time, bus
    bandwidth and the peak of the link (NVLink inside a node, network across nodes; the
    transport of the NCCL_DEBUG logs when the run has them)."""
    measured = measured_links(ctx.con, ctx.run)
    inspector = measured_bandwidth(ctx.con, ctx.run)
    rows = ctx.con.sql(sql("collective_stats.sql"), params={"run": ctx.run}).pl().to_dicts()
    return tuple(_stat(row, ctx.device.nvlink_gbs, network_gbs, measured, inspector)
                 for row in rows)


def step_gap_ms(con: duckdb.DuckDBPyConnection, run: str) -> float:
    (value,), = con.execute(STEP_GAPS_SQL, {"run": run}).fetchall()
    return float(value or 0.0)


def median_kernel_us(con: duckdb.DuckDBPyConnection, run: str) -> float | None:
    (value,), = con.execute(KERNEL_MEDIAN_SQL, {"run": run}).fetchall()
    return float(value) if value is not None else None


TOP_OPS_SQL = """
-- Time per rank and step of each GPU kernel name (arguments stripped), over complete
-- steps; CPU-only runs use their leaf CPU ops.
WITH complete AS (
    SELECT rank, step FROM complete_steps WHERE run = $run
), n AS (SELECT count(*) AS n FROM complete),
gpu AS (
    SELECT regexp_replace(g.name, '\\(.*$', '') AS op, sum(g.dur_ns) AS t
    FROM gpu_ops g JOIN complete c ON c.rank = g.rank AND c.step = g.step
    WHERE g.run = $run GROUP BY 1
), cpu AS (
    SELECT o.name AS op, sum(o.dur_ns) AS t
    FROM cpu_ops o JOIN complete c ON c.rank = o.rank AND c.step = o.step
    WHERE o.run = $run AND o.category = 'cpu_op'
      AND NOT EXISTS (SELECT 1 FROM cpu_ops k WHERE k.run = o.run AND k.rank = o.rank
                                                AND k.parent_id = o.op_id)
      AND NOT EXISTS (SELECT 1 FROM gpu_ops WHERE run = $run)
    GROUP BY 1
)
SELECT op, t / (SELECT n FROM n) / 1e6 AS ms_per_step
FROM (SELECT * FROM gpu UNION ALL SELECT * FROM cpu)
"""


def op_times(con: duckdb.DuckDBPyConnection, run: str) -> dict[str, float]:
    """ms per rank and step of each kernel (or leaf CPU op) name."""
    return {op: float(ms) for op, ms in con.execute(TOP_OPS_SQL, {"run": run}).fetchall()}
