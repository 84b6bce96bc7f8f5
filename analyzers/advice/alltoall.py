"""The advisor's all_to_all imbalance check (`a2a-imbalance`, docs/advisor.md and
docs/alltoall.md): its wording, its expected gain, and what of the lost time that gain
already claims, so that the advice on the same calls does not credit it twice:

* the imbalance cost of each group (part of the calls' transfer time, so part of their
  exposed time: exposed-ep-comm / exposed-a2a-comm leave it out of theirs);
* the others' wait for a straggler that is the rank receiving the most: that straggler
  is the token imbalance, so the straggler advice leaves that rank to this one.

It reads the advisor's Evidence through the Protocol below, so that it does not import
the advisor that imports it; analyzers/advice/recommend.py turns it into the recommendation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from stepscope.analyzers.comm.roles import EXPERT_ROLES
from stepscope.analyzers.results import (
    AllToAll,
    AllToAllGroup,
    AllToAllRank,
    CollectiveStat,
    Straggler,
)

HEAVY = 1.1   # a rank "receives the most" from this multiple of the mean rank's bytes


class Evidence(Protocol):
    """What this check reads of analyzers.advice.recommend.Evidence."""

    @property
    def all_to_all(self) -> AllToAll | None: ...
    @property
    def stragglers(self) -> tuple[Straggler, ...]: ...
    @property
    def collectives(self) -> tuple[CollectiveStat, ...]: ...


@dataclass(frozen=True)
class A2aAdvice:
    """The a2a-imbalance recommendation's text, expected gain (ms per step) and the lost
    time that gain is made of: `cost_ms` per group label (imbalance cost, out of the
    calls' exposed time) and `absorbed`, the stragglers whose wait it includes."""
    title: str
    detail: str
    evidence: str
    gain_ms: float
    cost_ms: Mapping[str, float] = field(default_factory=dict)
    absorbed: frozenset[int] = frozenset()


A2A_DETAIL = (
    "The router sends these ranks' experts more tokens than the others': their expert "
    "GEMMs run longer, every other rank waits for them at the next exchange, and each "
    "all_to_all lasts as long as its busiest member. Balance the load: an auxiliary "
    "load-balancing loss or a loss-free expert bias (as DeepSeek-V3), a capacity factor "
    "that caps tokens per expert, or re-place / replicate the hot experts across ranks "
    "(expert-parallel load balancers do this from measured counts).")
EMBEDDING_NOTE = (
    " If this all_to_all is an embedding exchange instead, these ranks hold the hot "
    "tables' shards: re-shard them (row-wise, or by measured lookups).")


def heaviest_rank_note(ev: Evidence, rank: int) -> str:
    """For the straggler advice: this rank receives the most all_to_all bytes."""
    a2a = ev.all_to_all
    if a2a is None:
        return ""
    row = next((r for r in a2a.ranks if r.rank == rank), None)
    if row is None or row.received_vs_mean < HEAVY or row.received_bytes < max(
            r.received_bytes for r in a2a.ranks):
        return ""
    return (f" It also receives the most all_to_all traffic ({row.received_vs_mean:.2f}x the "
            "mean rank): the others may be waiting for its experts' extra tokens rather "
            "than for a slow GPU (see a2a-imbalance).")


def _heavy(a2a: AllToAll) -> list[AllToAllRank]:
    """The ranks that receive the most (at least HEAVY x the mean), heaviest first."""
    return sorted((r for r in a2a.ranks if r.received_vs_mean >= HEAVY),
                  key=lambda r: (-r.received_bytes, r.rank))[:4]


def _is_expert(ev: Evidence, rows: list[AllToAllGroup]) -> bool:
    """Whether the imbalanced groups are labelled expert-parallel (EXPERT groups, EP
    kernels), not an all_to_all that may as well be an embedding exchange."""
    labels = {g.group_label for g in rows}
    roles = {c.role for c in ev.collectives if c.group_label in labels}
    return bool(roles) and roles <= EXPERT_ROLES


def _ratio(rank: AllToAllRank, mean_tokens: float | None) -> float:
    """How many times the mean rank's load this rank receives (tokens when counted)."""
    if mean_tokens and rank.tokens_received:
        return rank.tokens_received / mean_tokens
    return rank.received_vs_mean


def _who(heavy: list[AllToAllRank], unit: str, mean_tokens: float | None) -> str:
    """'rank 2 receives 1.25x' / 'ranks 2, 5 receive 1.25x, 1.12x' the mean rank's unit."""
    ranks = ", ".join(str(r.rank) for r in heavy)
    ratios = ", ".join(f"{_ratio(r, mean_tokens):.2f}x" for r in heavy)
    if len(heavy) == 1:
        return f"rank {ranks} receives {ratios} the mean rank's {unit}"
    return f"ranks {ranks} receive {ratios} the mean rank's {unit}"


def _counts(heavy: list[AllToAllRank], ranks: tuple[AllToAllRank, ...],
            mean_tokens: float | None) -> str:
    """The heavy ranks' tokens per step against the mean and the least loaded rank."""
    if not mean_tokens:
        return "; ".join(f"rank {r.rank} receives {r.received_vs_mean:.2f}x the mean "
                         "rank's bytes" for r in heavy)
    low = min(ranks, key=lambda r: (r.tokens_received or 0.0, r.rank))
    least = low.tokens_received or 0.0
    mine = "; ".join(f"rank {r.rank} receives {r.tokens_received or 0:,.0f} tokens/step"
                     + (f" ({(r.tokens_received or 0) / least:.2f}x the least loaded)"
                        if least else "") for r in heavy)
    return (f"{mine}, against {mean_tokens:,.0f} for the mean rank and {least:,.0f} for "
            f"the least loaded (rank {low.rank})")


def _straggles(absorbed: frozenset[int]) -> str:
    """Why the straggler advice leaves these ranks to this one."""
    if not absorbed:
        return ""
    ranks = sorted(absorbed)
    who = (f"Rank {ranks[0]} is" if len(ranks) == 1
           else "Ranks " + ", ".join(map(str, ranks)) + " are")
    return (f" {who} also flagged as a straggler: the others wait for the experts' extra "
            "tokens there, not for a slow GPU, so this advice covers that wait (no separate "
            "straggler advice).")


def _mean_tokens(ranks: tuple[AllToAllRank, ...]) -> float | None:
    counted = [r.tokens_received for r in ranks if r.tokens_received]
    return sum(counted) / len(counted) if counted and len(counted) == len(ranks) else None


def a2a_imbalance(ev: Evidence) -> A2aAdvice | None:
    """all_to_all whose members move uneven bytes (MoE routing, embedding shards): the
    transfer time the imbalance costs, plus the others' wait when the rank they wait for
    is the one that receives the most. None without an imbalanced group."""
    a2a = ev.all_to_all
    if a2a is None or not a2a.groups:
        return None
    rows = [g for g in a2a.groups if g.imbalance is not None and g.imbalance >= HEAVY]
    if not rows:
        return None
    waited_on = {s.rank for s in ev.stragglers}
    absorbed = frozenset(g.heaviest_rank for g in rows
                         if g.heaviest_rank is not None and g.heaviest_rank in waited_on)
    gain = sum(g.imbalance_cost_ms + (g.wait_ms if g.heaviest_rank in absorbed else 0.0)
               for g in rows)
    worst: AllToAllGroup = max(rows, key=lambda g: g.imbalance_cost_ms + g.wait_ms)
    heavy = _heavy(a2a)
    expert = _is_expert(ev, rows)
    mean_tokens = _mean_tokens(a2a.ranks)
    unit = "tokens" if mean_tokens else "bytes"
    if heavy:
        who = _who(heavy, unit, mean_tokens)
    else:
        who = "rank(s) " + ", ".join(str(g.heaviest_rank) for g in rows
                                     if g.heaviest_rank is not None) + " receive the most"
    kind = "expert load (token imbalance)" if expert else \
        "all_to_all load (expert tokens or embedding rows)"
    counts = _counts(heavy, a2a.ranks, mean_tokens) if heavy else who
    return A2aAdvice(
        title=f"Balance the {kind}: {who}",
        detail=(f"{'Token' if expert else 'Load'} imbalance across the all_to_all ranks: "
                f"{counts}.{_straggles(absorbed)} " + A2A_DETAIL
                + ("" if expert else EMBEDDING_NOTE)),
        evidence=(f"{worst.group_label}: {worst.calls_per_step:.0f} calls/step, imbalance "
                  f"{worst.imbalance:.2f}x the mean bytes (max {worst.imbalance_max:.2f}x); "
                  f"transfer {worst.transfer_ms:.2f} ms/step of which "
                  f"{worst.imbalance_cost_ms:.2f} ms is the imbalance; ranks wait "
                  f"{worst.wait_ms:.2f} ms/step in these calls for the last member"),
        gain_ms=gain, cost_ms={g.group_label: g.imbalance_cost_ms for g in rows},
        absorbed=absorbed)
