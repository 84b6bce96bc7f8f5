"""Why did the job hang? Flight Recorder dumps of every rank -> one typed HangReport
(analyzers.results; its JSON Schema docs/hang.schema.json is generated from it).

Per process group (keyed by pg_name, which is the same on every rank; pg_id is local):
* the last collective every member completed;
* the first collective some members never entered (the **missing ranks**), or that all
  entered and some or none completed;
* completion lag: collectives some members saw complete and others did not. A
  collective cannot finish on one rank unless every rank's GPU took part, so a rank
  that never observed the completion its peers observed has a stalled GPU, driver or
  watchdog;
* desync: the same sequence number issued with a different op, dtype or shape;
* P2P ops left open, and whether the peer posted the matching op.

The verdict names suspect ranks, best first: ranks missing from a stuck collective with
nothing in flight anywhere (stuck outside NCCL: host code, a lock, data loading, a
crash), ranks that lag in completions, then the other missing ranks. SQL does the
per-rank work (analyzers/sql/hang/*.sql); this module only assembles the verdict.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Literal, TypedDict

import duckdb

from stepscope.analyzers._sql import fetch_rows, sql
from stepscope.analyzers.results import (
    CollectiveState,
    CompletionLag,
    GroupProgress,
    HangReport,
    Mismatch,
    MismatchField,
    P2PWait,
    RankOps,
    StuckCollective,
    StuckKind,
    Suspect,
)


class NoFlightRecorderError(LookupError):
    """The run has no Flight Recorder dump."""


# Row shapes of analyzers/sql/hang/*.sql, private to this module.
class _Sources(TypedDict):
    ranks: list[int] | None
    versions: list[object] | None
    nccl_versions: list[str | None] | None


class _Member(TypedDict):
    pg_name: str
    pg_desc: str
    rank: int
    membership_conflict: bool
    has_dump: bool
    enqueued: int | None
    completed: int | None
    n_open: int


class _Entry(TypedDict):
    profiling_name: str | None
    op: str | None
    input_sizes: list[list[int]] | None
    output_sizes: list[list[int]] | None
    input_dtypes: list[str] | None
    state: CollectiveState | None
    first_created_ns: int | None


class _MismatchRow(TypedDict):
    pg_name: str
    pg_desc: str
    seq: int
    op_differs: bool
    dtype_differs: bool
    sizes_differ: bool | None
    ranks: list[int]
    ops: list[list[str]]
    sizes: list[list[list[list[int]] | None]]
    dtypes: list[list[list[str] | None]]


class _P2PRow(TypedDict):
    pg_name: str
    pg_desc: str
    rank: int
    op: Literal["send", "recv"]
    peer_rank: int | None
    state: Literal["scheduled", "started"]
    input_sizes: list[list[int]] | None
    input_dtypes: list[str] | None
    peer_posted: bool | None


def build_hang_report(con: duckdb.DuckDBPyConnection, run: str) -> HangReport:
    """Analyse the Flight Recorder entries of `run`; raises NoFlightRecorderError."""
    params = {"run": run}
    sources = fetch_rows(con, "hang/sources.sql", params, _Sources)[0]
    dump_ranks = list(sources["ranks"] or [])
    if not dump_ranks:
        raise NoFlightRecorderError(run)
    versions, nccl = list(sources["versions"] or []), list(sources["nccl_versions"] or [])
    members = fetch_rows(con, "hang/members.sql", params, _Member)
    by_group: dict[str, list[_Member]] = defaultdict(list)
    for m in members:
        by_group[m["pg_name"]].append(m)
    groups = [_progress(rows) for rows in by_group.values()]
    stuck = [s for rows in by_group.values() if (s := _stuck(con, run, rows)) is not None]
    # the collective that hung first (enqueued earliest) leads; the rest follow from it
    stuck.sort(key=lambda s: (s.kind != "not_entered", s.first_created_ns or 1 << 63,
                              s.pg_name))
    lags = [lag for rows in by_group.values() if (lag := _lag(rows)) is not None]
    mismatches = [_mismatch(r)
                  for r in fetch_rows(con, "hang/mismatches.sql", params, _MismatchRow)]
    waits = [_p2p(r) for r in fetch_rows(con, "hang/p2p.sql", params, _P2PRow)]
    idle = _idle_ranks(con, run, dump_ranks)
    suspects = _suspects(stuck, lags, mismatches, idle)
    notes = _notes(groups, versions, dump_ranks, members)
    return HangReport(
        run=run, verdict=_verdict(suspects, stuck, mismatches, lags),
        suspect_ranks=[s.rank for s in suspects], suspects=suspects, stuck=stuck,
        mismatches=mismatches, completion_lags=lags, p2p_waits=waits,
        groups=sorted(groups, key=_group_key), dump_ranks=dump_ranks,
        fr_versions=sorted(str(v) for v in versions if v is not None),
        nccl_versions=sorted(str(v) for v in nccl if v is not None), notes=notes)


def _group_key(g: GroupProgress) -> tuple[int, str]:
    return (int(g.pg_name), "") if g.pg_name.isdigit() else (1 << 62, g.pg_name)


def _progress(rows: list[_Member]) -> GroupProgress:
    dumped = [r for r in rows if r["has_dump"]]
    completed = [c for r in dumped if (c := r["completed"]) is not None]
    enqueued = [e for r in dumped if (e := r["enqueued"]) is not None]
    return GroupProgress(
        pg_name=rows[0]["pg_name"], pg_desc=rows[0]["pg_desc"],
        ranks=[r["rank"] for r in rows],
        last_completed_by_all=min(completed) if completed else None,
        last_enqueued_max=max(enqueued) if enqueued else None,
        ranks_without_dump=[r["rank"] for r in rows if not r["has_dump"]],
        membership_conflict=bool(rows[0]["membership_conflict"]))


def _stuck(con: duckdb.DuckDBPyConnection, run: str,
           rows: list[_Member]) -> StuckCollective | None:
    # (rank, enqueued, completed) of the members whose dump shows their progress
    known = [(r["rank"], e, r["completed"]) for r in rows
             if r["has_dump"] and (e := r["enqueued"]) is not None]
    if not known:
        return None
    low = min(e for _, e, _ in known)
    high = max(e for _, e, _ in known)
    kind: StuckKind
    if high > low:
        seq, kind = low + 1, "not_entered"
        missing = [rank for rank, e, _ in known if e < seq]
    else:
        done = [c for _, _, c in known if c is not None]
        if not done or min(done) >= high:
            return None
        seq, kind, missing = min(done) + 1, "not_completed", []
    waiting = [rank for rank, e, c in known if e >= seq and (c is None or c < seq)]
    entry = _entry(con, run, rows[0]["pg_name"], seq)
    dtypes = entry["input_dtypes"] or []
    return StuckCollective(
        pg_name=rows[0]["pg_name"], pg_desc=rows[0]["pg_desc"], op=entry["op"],
        profiling_name=entry["profiling_name"], seq=seq,
        sizes=entry["input_sizes"], output_sizes=entry["output_sizes"],
        dtype=dtypes[0] if dtypes else None, state=entry["state"], kind=kind,
        first_created_ns=entry["first_created_ns"],
        missing_ranks=missing, waiting_ranks=waiting,
        ranks_without_dump=[r["rank"] for r in rows if not r["has_dump"]])


def _entry(con: duckdb.DuckDBPyConnection, run: str, pg: str, seq: int) -> _Entry:
    """The entry of collective `seq` of group `pg` (an aggregate: one row, all None when
    no dump holds it)."""
    return fetch_rows(con, "hang/entry.sql", {"run": run, "pg": pg, "seq": seq}, _Entry)[0]


def _lag(rows: list[_Member]) -> CompletionLag | None:
    # (rank, completed) of the members whose dump shows their completions
    known = [(r["rank"], c) for r in rows if r["has_dump"] and (c := r["completed"]) is not None]
    if len(known) < 2:
        return None
    top = max(c for _, c in known)
    behind = [(rank, c) for rank, c in known if c < top]
    if not behind:
        return None
    return CompletionLag(
        pg_name=rows[0]["pg_name"], pg_desc=rows[0]["pg_desc"],
        lagging_ranks=[rank for rank, _ in behind],
        ahead_ranks=[rank for rank, c in known if c == top],
        first_seq=min(c for _, c in behind) + 1, last_seq=top)


def _mismatch(row: _MismatchRow) -> Mismatch:
    flags: tuple[tuple[MismatchField, bool | None], ...] = (
        ("op", row["op_differs"]), ("dtype", row["dtype_differs"]),
        ("sizes", row["sizes_differ"]))
    fields = [name for name, flag in flags if flag]
    ranks = [RankOps(rank=r, ops=list(o), sizes=list(s), dtypes=list(d))
             for r, o, s, d in zip(row["ranks"], row["ops"], row["sizes"], row["dtypes"],
                                   strict=True)]
    return Mismatch(pg_name=row["pg_name"], pg_desc=row["pg_desc"], seq=row["seq"],
                    fields=fields, ranks=ranks)


def _p2p(row: _P2PRow) -> P2PWait:
    dtypes = row["input_dtypes"] or []
    return P2PWait(pg_name=row["pg_name"], pg_desc=row["pg_desc"], rank=row["rank"],
                   op=row["op"], peer_rank=row["peer_rank"], state=row["state"],
                   sizes=row["input_sizes"], dtype=dtypes[0] if dtypes else None,
                   peer_posted=row["peer_posted"])


def _idle_ranks(con: duckdb.DuckDBPyConnection, run: str, dump_ranks: list[int]) -> set[int]:
    """Dumped ranks with no collective or P2P op in flight."""
    busy = {r for (r,) in con.execute(sql("hang/busy_ranks.sql"), {"run": run}).fetchall()}
    return set(dump_ranks) - busy


def _label(pg_desc: str, pg_name: str) -> str:
    return f"{pg_desc} (pg {pg_name})"


def _suspects(stuck: list[StuckCollective], lags: list[CompletionLag],
              mismatches: list[Mismatch], idle: set[int]) -> list[Suspect]:
    reasons: dict[int, list[str]] = defaultdict(list)
    missing_in: dict[int, int] = defaultdict(int)
    for s in stuck:
        for r in s.missing_ranks:
            missing_in[r] += 1
            reasons[r].append(
                f"never entered {s.profiling_name or s.op or 'collective'} #{s.seq} of "
                f"{_label(s.pg_desc, s.pg_name)} while {_who(s.waiting_ranks)} waited in it")
    lagging: set[int] = set()
    for lag in lags:
        for r in lag.lagging_ranks:
            lagging.add(r)
            reasons[r].append(
                f"did not see {_seq_range(lag.first_seq, lag.last_seq)} of "
                f"{_label(lag.pg_desc, lag.pg_name)} complete, which "
                f"{_who(lag.ahead_ranks)} completed (its GPU, driver or watchdog stalled)")
    for m in mismatches:
        odd = _odd_ranks(m)
        for r in odd:
            reasons[r].append(f"issued {', '.join(m.fields)} different from its peers for "
                              f"#{m.seq} of {_label(m.pg_desc, m.pg_name)} (desync)")
    for r in idle & set(missing_in):
        reasons[r].insert(0, "has no collective or P2P op in flight: it is stuck outside "
                             "NCCL (host code, a lock, data loading, a crash)")
    silent = _silent(stuck, reasons)
    primary = {r for r in missing_in if r in idle} | lagging | silent | {
        r for m in mismatches for r in _odd_ranks(m)}
    # the weakest evidence last: a missing dump may only be a dump not collected
    ordered = sorted(reasons, key=lambda r: (
        r not in idle or r not in missing_in, r not in lagging, r not in primary,
        r in silent, -missing_in.get(r, 0), r))
    keep = [r for r in ordered if r in primary] or ordered
    return [Suspect(rank=r, idle=r in idle, reasons=reasons[r]) for r in keep]


def _silent(stuck: list[StuckCollective], reasons: dict[int, list[str]]) -> set[int]:
    """Members with no dump of a group whose dumped members wait in a stuck collective:
    a process that crashed or was killed (a GPU error, an OOM) writes no dump, so the
    missing dump is itself the evidence; their reasons are added to `reasons`."""
    out: set[int] = set()
    for s in stuck:
        if not s.waiting_ranks:
            continue
        for r in s.ranks_without_dump:
            out.add(r)
            reasons[r].append(
                f"wrote no Flight Recorder dump while {_who(s.waiting_ranks)} waited in "
                f"{s.profiling_name or s.op or 'collective'} #{s.seq} of "
                f"{_label(s.pg_desc, s.pg_name)}: it may have crashed or been killed (a "
                "GPU error, an OOM) before it could dump")
    return out


def _odd_ranks(m: Mismatch) -> list[int]:
    """The ranks in the minority for a desync (all of them when there is a tie)."""
    variants: dict[str, list[int]] = defaultdict(list)
    for r in m.ranks:
        variants[repr((r.ops, r.dtypes, r.sizes if "sizes" in m.fields else None))].append(
            r.rank)
    if len(variants) < 2:
        return []
    top = max(len(v) for v in variants.values())
    majority = [v for v in variants.values() if len(v) == top]
    if len(majority) > 1:
        return sorted(r.rank for r in m.ranks)
    return sorted(r for v in variants.values() if len(v) < top for r in v)


def _ranks(ranks: list[int]) -> str:
    """[0, 1, 2, 3, 5] -> '0-3, 5'."""
    out: list[str] = []
    for r in sorted(ranks):
        if out and out[-1].split("-")[-1] == str(r - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{r}"
        else:
            out.append(str(r))
    return ", ".join(out) if out else "none"


def _seq_range(first: int, last: int) -> str:
    return f"collective #{first}" if first == last else f"collectives #{first}-#{last}"


def _who(ranks: list[int]) -> str:
    """'rank 12' or 'ranks 13-15'."""
    return ("rank " if len(ranks) == 1 else "ranks ") + _ranks(ranks)


def _verdict(suspects: list[Suspect], stuck: list[StuckCollective],
             mismatches: list[Mismatch], lags: list[CompletionLag]) -> str:
    if not stuck and not mismatches and not lags:
        return ("No hang in the Flight Recorder dumps: every member of every process group "
                "reached the same collective and completed it.")
    parts = []
    first = next((s for s in stuck if s.missing_ranks), None)
    if first is not None:
        parts.append(
            f"{_label(first.pg_desc, first.pg_name)} is stuck in "
            f"{first.profiling_name or first.op or 'collective'} #{first.seq}: "
            f"{_who(first.waiting_ranks)} wait in it, {_who(first.missing_ranks)} "
            "never entered it.")
    elif stuck:
        s = stuck[0]
        who = ("every member" if not s.ranks_without_dump else
               f"every member with a dump ({_who(s.waiting_ranks)}; no dump from "
               f"{_who(s.ranks_without_dump)})")
        parts.append(f"{_label(s.pg_desc, s.pg_name)} is stuck in "
                     f"{s.profiling_name or s.op or 'collective'} #{s.seq}: {who} "
                     "entered it and it never completed.")
    if mismatches:
        parts.append(f"{len(mismatches)} collective(s) were issued differently across ranks "
                     "(desync).")
    if suspects:
        idle = [s.rank for s in suspects if s.idle]
        parts.append(f"Suspect {_who([s.rank for s in suspects])}"
                     + (f"; {_who(idle)} had nothing in flight (stuck outside NCCL)"
                        if idle else "") + ".")
    return " ".join(parts)


def _notes(groups: list[GroupProgress], versions: list[object], dump_ranks: list[int],
           members: list[_Member]) -> list[str]:
    notes = []
    if len({str(v) for v in versions}) > 1:
        notes.append(f"dumps disagree on the Flight Recorder format version ({versions}); "
                     "they may come from different runs")
    missing = sorted({r["rank"] for r in members if not r["has_dump"]})
    if missing:
        notes.append(f"no dump for rank(s) {_ranks(missing)}: what they did is unknown")
    conflicts = [g.pg_name for g in groups if g.membership_conflict]
    if conflicts:
        notes.append(f"dumps disagree on the members of group(s) {', '.join(conflicts)}")
    unknown = sorted({r["pg_name"] for r in members if r["has_dump"] and r["enqueued"] is None})
    if unknown:
        notes.append(f"{len(unknown)} group(s) have only P2P ops or no entries; their "
                     "collective progress is unknown (see p2p_waits)")
    return notes
