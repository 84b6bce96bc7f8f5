"""MoE and embedding all_to_all imbalance (docs/alltoall.md).

record_param_comms gives each all_to_all its bytes in and out (and, for all_to_allv, the
rows sent to and received from each member: `In/Out split size`). Per rank this module
reports the bytes sent and received and the tokens (rows) received; per group the
imbalance of its instances, busiest member's bytes (the larger of what it sends and
receives) over the mean, and what it costs: every member ends when the busiest does, so
the transfer takes d_min where a balanced exchange of the same bytes would take
d_min x mean / busiest; the difference, d_min x (1 - 1 / imbalance), is the cost. The
wait for the last member (compute imbalance upstream, e.g. the experts of a hot rank)
is reported beside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from stepscope.analyzers._sql import fetch_rows, run_script
from stepscope.analyzers.results import AllToAll, AllToAllGroup, AllToAllRank

if TYPE_CHECKING:
    from stepscope.analyzers.context import RunContext


class _Group(TypedDict):
    """A row of analyzers/sql/alltoall/groups.sql."""
    group_label: str
    library: str
    members: int | None
    calls_per_step: float
    bytes_per_rank: float
    imbalance: float | None
    imbalance_max: float | None
    transfer_ms: float | None
    imbalance_cost_ms: float
    wait_ms: float
    heaviest_rank: int | None
    heaviest_vs_mean: float | None
    splits: str
    whole_calls: int


class _Rank(TypedDict):
    """A row of analyzers/sql/alltoall/ranks.sql."""
    rank: int
    sent: float
    received: float
    tokens_received: float | None
    received_vs_mean: float | None


class _Unsized(TypedDict):
    """A row of analyzers/sql/alltoall/unsized.sql."""
    library: str
    calls: int


def alltoall_section(ctx: RunContext) -> AllToAll | None:
    """The `all_to_all` section, or None when the run has no all_to_all."""
    con, run = ctx.con, ctx.run
    unsized = fetch_rows(con, "alltoall/unsized.sql", {"run": run}, _Unsized)
    run_script(con, "alltoall/calls.sql", {"run": run})
    groups = fetch_rows(con, "alltoall/groups.sql", {"run": run}, _Group)
    if not groups and not unsized:
        return None
    ranks = fetch_rows(con, "alltoall/ranks.sql", {"run": run}, _Rank)
    return AllToAll(groups=tuple(_group(g) for g in groups),
                    ranks=tuple(_rank(r) for r in ranks),
                    message=_message(groups, unsized))


def _group(g: _Group) -> AllToAllGroup:
    return AllToAllGroup(
        group_label=g["group_label"], library=g["library"], members=g["members"],
        calls_per_step=float(g["calls_per_step"]), bytes_per_rank=float(g["bytes_per_rank"]),
        imbalance=None if g["imbalance"] is None else float(g["imbalance"]),
        imbalance_max=None if g["imbalance_max"] is None else float(g["imbalance_max"]),
        transfer_ms=float(g["transfer_ms"] or 0.0),
        imbalance_cost_ms=float(g["imbalance_cost_ms"]), wait_ms=float(g["wait_ms"]),
        heaviest_rank=g["heaviest_rank"],
        heaviest_vs_mean=None if g["heaviest_vs_mean"] is None else float(g["heaviest_vs_mean"]),
        splits=g["splits"])


def _rank(r: _Rank) -> AllToAllRank:
    return AllToAllRank(rank=int(r["rank"]), sent_bytes=float(r["sent"]),
                        received_bytes=float(r["received"]),
                        tokens_received=(None if r["tokens_received"] is None
                                         else float(r["tokens_received"])),
                        received_vs_mean=float(r["received_vs_mean"] or 1.0))


def _message(groups: list[_Group], unsized: list[_Unsized]) -> str | None:
    out = []
    if unsized:
        calls = ", ".join(f"{u['calls']} {u['library']}" for u in unsized)
        out.append(f"all_to_all calls without sizes in the traces ({calls}): not counted")
    if any(not g["whole_calls"] for g in groups):
        out.append("some groups' calls were not matched across every member: their "
                   "imbalance is unknown")
    if any(g["splits"] in ("truncated", "mixed") for g in groups):
        out.append("split sizes cut short by record_param_comms (groups over 30 ranks): "
                   "tokens per rank are unknown there; bytes come from the message sizes")
    return "; ".join(out) or None
