"""Stragglers: the ranks the others wait for, with evidence."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

import duckdb

from stepscope.analyzers._sql import sql
from stepscope.analyzers.context import RunContext
from stepscope.analyzers.results import RankTimes, Straggler

# A straggler arrives last at most instances (at least half, and at least 1.5x its fair
# share 1/n), more often than chance would explain (binomial tail below MAX_CHANCE), and
# costs each rank that waits for it at least MIN_STEP_FRACTION of the step, and its own
# time (step less waits) exceeds the median rank's by at least that much too.
MIN_LAST_SHARE = 0.5
MIN_SHARE_OVER_FAIR = 1.5
MAX_CHANCE = 0.01
MIN_STEP_FRACTION = 0.05


def chance_of_being_last(times_last: int, instances: int, group_ranks: int) -> float:
    """P(a rank arrives last at least `times_last` of `instances` times by chance, when
    each of the `group_ranks` ranks is equally likely to be last)."""
    p = 1.0 / max(group_ranks, 1)
    if p >= 1.0:
        return 1.0
    log_p, log_q = math.log(p), math.log1p(-p)

    def log_term(k: int) -> float:
        return (math.lgamma(instances + 1) - math.lgamma(k + 1)
                - math.lgamma(instances - k + 1) + k * log_p + (instances - k) * log_q)

    return min(1.0, sum(math.exp(log_term(k)) for k in range(times_last, instances + 1)))


@dataclass(frozen=True)
class WaitRecord:
    """One rank as a possible culprit: how often it arrived last at the matched collectives
    it took part in, and how long the others waited for it (`charge_to_roots`)."""

    host: str | None
    times_last: int
    n_instances: int        # matched collectives it took part in
    group_ranks: int        # size of its largest group (chance of being last: 1/n)
    waited_on_ms: float     # per step, summed over the ranks that waited for it
    waiters: int            # ranks that waited for it
    worst_ms: float = 0.0   # the most one rank waited for it, per step


Charges = dict[int, dict[int, float]]  # waiter -> culprit -> ms per step


def waited_on(con: duckdb.DuckDBPyConnection, run: str, per_rank: Sequence[RankTimes],
              stage_of: dict[int, int] | None = None) -> dict[int, WaitRecord]:
    """Per culprit rank: its arrival record and the time the other ranks spent waiting
    for it per step. Each waiter's attributed straggler_wait is split over the ranks that
    arrived last in its collectives, in proportion to the waits each caused (overlapping
    collectives count once), then passed on from a rank that was late because it waited
    itself (in its collectives, or in the pipeline for its point-to-point peers) to the
    ranks it waited for (`onward_shares`, `charge_to_roots`). One definition for the
    sentence, the table and the advice: the charges add up to the run's straggler wait."""
    wait_ms = {r.rank: r.breakdown_ms.straggler_wait for r in per_rank}
    rows = con.sql(sql("stragglers/stragglers.sql"), params={"run": run}).fetchall()
    arrivals: dict[int, tuple[str | None, int, int, int]] = {}
    direct: Charges = defaultdict(dict)
    for rank, host, times_last, n_instances, group_ranks, waiter, caused, total in rows:
        arrivals[int(rank)] = (host, int(times_last), int(n_instances), int(group_ranks))
        if waiter is not None and total > 0:
            share = wait_ms.get(int(waiter), 0.0) * caused / total
            if share > 0:
                direct[int(waiter)][int(rank)] = share
    peers: dict[int, list[int]] = defaultdict(list)
    for rank, peer in con.sql(sql("stragglers/p2p_peers.sql"), params={"run": run}).fetchall():
        peers[int(rank)].append(int(peer))
    onward = onward_shares(per_rank, direct, peers, stage_of or {})
    by_culprit: Charges = defaultdict(dict)
    for waiter, culprits in charge_to_roots(direct, onward).items():
        for culprit, ms in culprits.items():
            by_culprit[culprit][waiter] = ms
    return {rank: WaitRecord(host=host, times_last=last, n_instances=n, group_ranks=size,
                             waited_on_ms=sum(by_culprit[rank].values()),
                             waiters=len(by_culprit[rank]),
                             worst_ms=max(by_culprit[rank].values(), default=0.0))
            for rank, (host, last, n, size) in arrivals.items()}


def onward_shares(per_rank: Sequence[RankTimes], direct: Charges,
                  peers: dict[int, list[int]], stage_of: dict[int, int]
                  ) -> dict[int, dict[int, float]]:
    """Per rank x, the shares of the waits x caused that x passes on to the ranks x
    waited for (the rest, 1 - their sum, x keeps as its own doing). x's lateness is
    weighed in three parts: its compute beyond the median of its peers (its pipeline
    stage, which does the same work; else the job), kept; its straggler wait, passed on
    to the ranks it waited for in its collectives (`direct`, in proportion); and its
    pipeline bubble beyond the least of its stage's, passed on to its point-to-point
    peers (`peers`, evenly). A slow rank that waits for nobody keeps all; a rank of
    median speed that arrived last because it waited passes all on."""
    work = {r.rank: r.breakdown_ms.compute + r.breakdown_ms.recompute for r in per_rank}
    bubble = {r.rank: r.breakdown_ms.bubble for r in per_rank}
    onward: dict[int, dict[int, float]] = {}
    for r in per_rank:
        group = [p for p in work if stage_of.get(p) == stage_of.get(r.rank)]
        excess = max(0.0, work[r.rank] - median(work[p] for p in group))
        late_bubble = max(0.0, bubble[r.rank] - min(bubble[p] for p in group))
        waited = max(0.0, r.breakdown_ms.straggler_wait)
        mine = direct.get(r.rank, {})
        total_direct = sum(mine.values())
        pipe = [p for p in dict.fromkeys(peers.get(r.rank, ())) if p != r.rank]
        waited = waited if total_direct > 0 else 0.0
        late_bubble = late_bubble if pipe else 0.0
        whole = excess + waited + late_bubble
        if whole <= 0:
            continue
        shares: dict[int, float] = defaultdict(float)
        for y, ms in mine.items():
            shares[y] += (waited / whole) * (ms / total_direct)
        for y in pipe:
            shares[y] += (late_bubble / whole) / len(pipe)
        onward[r.rank] = dict(shares)
    return onward


def charge_to_roots(direct: Charges, onward: dict[int, dict[int, float]]) -> Charges:
    """Each waiter's charges (`direct`: the ranks it waited for in its collectives)
    passed on to where the lateness began: a charge to rank x follows x's `onward` shares
    (x keeps the rest, all of it when x has none), as far as the chain goes; where the
    chain comes back to a rank on it (ranks of a pipeline wait for each other both
    ways), the rank that would pass it on keeps it. Each rank's shares are worked out
    once (a walk of the graph, not of every path). A waiter is never charged to itself:
    what a chain would bring back to the waiter is dropped."""
    roots: dict[int, dict[int, float]] = {}
    on_stack: set[int] = set()

    def root_shares(x: int) -> dict[int, float]:
        if x in roots:
            return roots[x]
        on_stack.add(x)
        out: dict[int, float] = defaultdict(float)
        passes = {y: w for y, w in onward.get(x, {}).items() if w > 0}
        out[x] += 1.0 - sum(passes.values())
        for y, w in sorted(passes.items()):
            if y in on_stack:
                out[x] += w
                continue
            for root, v in root_shares(y).items():
                out[root] += w * v
        on_stack.discard(x)
        roots[x] = dict(out)
        return roots[x]

    charged: Charges = {}
    for waiter, culprits in sorted(direct.items()):
        mine: dict[int, float] = defaultdict(float)
        for x, ms in sorted(culprits.items()):
            for root, w in root_shares(x).items():
                mine[root] += ms * w
        charged[waiter] = {r: ms for r, ms in mine.items() if ms > 1e-9 and r != waiter}
    return charged


def stragglers(ctx: RunContext, stage_of: dict[int, int] | None = None
               ) -> tuple[Straggler, ...]:
    """Ranked list (most severe first) of ranks flagged as stragglers: those the others
    visibly wait for, then hidden ones (`hidden_stragglers`). `stage_of` maps pipeline
    ranks to their stage (peers for the compute comparison)."""
    per_rank, step_time_ms = ctx.attribution.per_rank, ctx.attribution.step_time_ms
    # a rank's own time: the step less the time it waited for others (collective waits
    # and pipeline receives); a straggler's is longer than the median rank's
    own = {r.rank: r.step_time_ms - r.breakdown_ms.straggler_wait - r.breakdown_ms.bubble
           for r in per_rank}
    typical_own = median(own.values()) if own else 0.0
    out: list[Straggler] = []
    for rank, rec in waited_on(ctx.con, ctx.run, per_rank, stage_of).items():
        share = rec.times_last / rec.n_instances if rec.n_instances else 0.0
        fair = 1.0 / max(rec.group_ranks, 1)
        ms = rec.waited_on_ms
        per_waiter = ms / max(rec.waiters, 1)  # the mean rank's wait for it
        if share < max(MIN_LAST_SHARE, MIN_SHARE_OVER_FAIR * fair):
            continue
        chance = chance_of_being_last(rec.times_last, rec.n_instances, rec.group_ranks)
        if chance > MAX_CHANCE:
            continue
        if step_time_ms <= 0 or per_waiter < MIN_STEP_FRACTION * step_time_ms:
            continue
        deviation = own.get(rank, typical_own) - typical_own
        if deviation < MIN_STEP_FRACTION * step_time_ms:
            continue  # late only because it waited for someone upstream
        out.append(Straggler(
            rank=rank, host=rec.host, hidden=False, slowdown=per_waiter / step_time_ms,
            waited_on_ms=ms, waiting_ranks=rec.waiters, step_time_deviation_ms=deviation,
            arrived_last=rec.times_last, matched_collectives=rec.n_instances,
            evidence=(
                f"arrived last at {rec.times_last} of the {rec.n_instances} matched "
                f"collectives it took part in; {_waiters_text(rec, step_time_ms)}; its own "
                f"time per step (not waiting for others) is {deviation:+.1f} ms from the "
                "median rank")))
    out += hidden_stragglers(ctx.con, ctx.run, step_time_ms, per_rank, stage_of or {},
                             {s.rank for s in out})
    return tuple(sorted(out, key=lambda s: -s.slowdown))


def _waiters_text(rec: WaitRecord, step_time_ms: float) -> str:
    """'15 rank(s) waited for it 21.9 ms/step in all (1.46 ms each on average, up to 1.52
    ms: 13% of the step), in its collectives or behind ranks that waited for it'."""
    mean = rec.waited_on_ms / max(rec.waiters, 1)
    return (f"{rec.waiters} rank(s) waited for it {rec.waited_on_ms:.1f} ms/step in all "
            f"({mean:.2f} ms each on average, up to {rec.worst_ms:.2f} ms: "
            f"{100 * rec.worst_ms / step_time_ms:.0f}% of the step), in its collectives or "
            "behind ranks that waited for it")


# A hidden straggler: the waits it causes can land outside straggler_wait (a data-parallel
# all-reduce whose wait sits under backward compute shows as exposed communication), so
# its own time looks like everyone's. It is flagged when its compute per step exceeds the
# median of its peers (the ranks in the same pipeline stage, which do the same work) by at
# least HIDDEN_COMPUTE_EXCESS and by MIN_STEP_FRACTION of the step, and it passes the
# arrival test above (last at most collectives it joins, beyond chance). A rank that is late
# only because it waited upstream has no excess compute and is never flagged.
HIDDEN_COMPUTE_EXCESS = 0.15


def _peers(rank: int, ranks: list[int], stage_of: dict[int, int]) -> list[int]:
    """Ranks doing the same work as `rank`: its pipeline stage, else the whole job."""
    if rank in stage_of:
        return [r for r in ranks if stage_of.get(r) == stage_of[rank] and r != rank]
    return [r for r in ranks if r != rank and r not in stage_of]


def _arrivals(con: duckdb.DuckDBPyConnection, run: str
              ) -> tuple[dict[int, tuple[int, int, int]], dict[int, dict[int, float]]]:
    """(times_last, n_instances, group_ranks) per rank, and the ms per step each waiter
    waited for it (analyzers/sql/stragglers/arrivals.sql)."""
    arrivals: dict[int, tuple[int, int, int]] = {}
    waits: dict[int, dict[int, float]] = defaultdict(dict)
    for rank, times_last, n, group_ranks, waiter, ns in con.sql(
            sql("stragglers/arrivals.sql"), params={"run": run}).fetchall():
        arrivals[int(rank)] = (int(times_last), int(n), int(group_ranks))
        if waiter is not None and ns > 0:
            waits[int(rank)][int(waiter)] = float(ns) / 1e6
    return arrivals, waits


def _arrives_last(times_last: int, n: int, group_ranks: int) -> bool:
    share = times_last / n if n else 0.0
    fair = 1.0 / max(group_ranks, 1)
    return (share >= max(MIN_LAST_SHARE, MIN_SHARE_OVER_FAIR * fair)
            and chance_of_being_last(times_last, n, group_ranks) <= MAX_CHANCE)


def hidden_stragglers(con: duckdb.DuckDBPyConnection, run: str, step_time_ms: float,
                      per_rank: Sequence[RankTimes], stage_of: dict[int, int],
                      already: set[int]) -> list[Straggler]:
    """Stragglers whose victims' waits are not (all) attributed as straggler_wait."""
    compute = {r.rank: r.breakdown_ms.compute + r.breakdown_ms.recompute for r in per_rank}
    attributed = {r.rank: r.breakdown_ms.straggler_wait for r in per_rank}
    arrivals, waits = _arrivals(con, run)
    out = []
    for rank, (times_last, n, group_ranks) in sorted(arrivals.items()):
        peers = [compute[p] for p in _peers(rank, sorted(compute), stage_of)]
        if rank in already or rank not in compute or len(peers) < 2 or step_time_ms <= 0:
            continue
        typical = median(peers)
        excess = compute[rank] - typical
        if excess < max(HIDDEN_COMPUTE_EXCESS * typical, MIN_STEP_FRACTION * step_time_ms):
            continue
        if not _arrives_last(times_last, n, group_ranks):
            continue
        who = waits[rank]
        total = sum(who.values())
        worst = max(who.values(), default=0.0)
        shown = sum(min(attributed.get(w, 0.0), ms) for w, ms in who.items())
        where = "pipeline stage" if rank in stage_of else "job"
        out.append(Straggler(
            rank=rank, host=_host(con, run, rank), hidden=True,
            slowdown=min(excess, worst) / step_time_ms,
            waited_on_ms=total, waiting_ranks=len(who),
            step_time_deviation_ms=excess, arrived_last=times_last,
            matched_collectives=n, compute_ms=compute[rank], peer_compute_ms=typical,
            evidence=(
                f"arrived last at {times_last} of the {n} matched collectives it took part "
                f"in; its compute is {compute[rank]:.2f} ms/step, "
                f"{100 * excess / typical:.0f}% above the median of the {len(peers)} other "
                f"ranks of its {where} ({typical:.2f} ms); {len(who)} rank(s) waited for it "
                f"{total:.2f} ms/step in all (up to {worst:.2f} ms each), of which only "
                f"{shown:.2f} ms shows as straggler wait: the rest is hidden in exposed "
                f"communication or under compute")))
    return out


def _host(con: duckdb.DuckDBPyConnection, run: str, rank: int) -> str | None:
    row = con.execute(sql("stragglers/rank_host.sql"), {"run": run, "rank": rank}).fetchone()
    return row[0] if row else None

