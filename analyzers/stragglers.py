"""Stragglers: the ranks the others wait for, with evidence."""

from __future__ import annotations

from collections import defaultdict
from statistics import median
from typing import Any

import duckdb

from analyzers._sql import sql

# A straggler arrives last at most instances (at least half, and at least 1.5x its fair
# share 1/n) and costs each other rank at least this share of the step.
MIN_LAST_SHARE = 0.5
MIN_SHARE_OVER_FAIR = 1.5
MIN_STEP_FRACTION = 0.05


def waited_on(con: duckdb.DuckDBPyConnection, run: str,
              per_rank: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Per culprit rank: its arrival record and the time each other rank spent waiting
    for it per step (the waiter's attributed straggler_wait, split over culprits in
    proportion to the collective waits each caused; overlapping collectives count once)."""
    wait_ms = {r["rank"]: r["breakdown_ms"]["straggler_wait"] for r in per_rank}
    rows = con.sql(sql("stragglers.sql"), params={"run": run}).fetchall()
    out: dict[int, dict[str, Any]] = {}
    shares: dict[int, list[float]] = defaultdict(list)
    for rank, host, times_last, n_instances, group_ranks, waiter, caused, total in rows:
        out[int(rank)] = {"host": host, "times_last": int(times_last),
                          "n_instances": int(n_instances), "group_ranks": int(group_ranks)}
        if waiter is not None and total > 0:
            shares[int(rank)].append(wait_ms.get(int(waiter), 0.0) * caused / total)
    for rank, rec in out.items():
        others = max(rec["group_ranks"] - 1, 1)
        rec["waited_on_ms"] = sum(shares[rank]) / others
    return out


def stragglers(con: duckdb.DuckDBPyConnection, run: str, step_time_ms: float,
               per_rank: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ranked list (most severe first) of ranks flagged as stragglers."""
    own = {r["rank"]: r["step_time_ms"] - r["breakdown_ms"]["straggler_wait"] for r in per_rank}
    typical_own = median(own.values()) if own else 0.0
    out: list[dict[str, Any]] = []
    for rank, rec in waited_on(con, run, per_rank).items():
        share = rec["times_last"] / rec["n_instances"] if rec["n_instances"] else 0.0
        fair = 1.0 / max(rec["group_ranks"], 1)
        ms = rec["waited_on_ms"]
        if share < max(MIN_LAST_SHARE, MIN_SHARE_OVER_FAIR * fair):
            continue
        if step_time_ms <= 0 or ms < MIN_STEP_FRACTION * step_time_ms:
            continue
        deviation = own.get(rank, typical_own) - typical_own
        out.append({
            "rank": rank,
            "host": rec["host"],
            "slowdown": ms / step_time_ms,
            "waited_on_ms": ms,
            "step_time_deviation_ms": deviation,
            "arrived_last": rec["times_last"],
            "matched_collectives": rec["n_instances"],
            "evidence": (
                f"arrived last at {rec['times_last']} of {rec['n_instances']} matched "
                f"collectives; each other rank waited {ms:.1f} ms/step for it "
                f"({100 * ms / step_time_ms:.0f}% of the step); its own time per step "
                f"(not waiting for others) is {deviation:+.1f} ms from the median rank"),
        })
    out.sort(key=lambda s: -s["waited_on_ms"])
    return out
