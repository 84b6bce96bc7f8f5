"""Hosts' clocks aligned from the trace itself (docs/timeline.md, "Clocks").

Every rank's times are on its host's clock; hosts' clocks differ (hundreds of µs to
seconds) and drift. The members of a matched collective instance finish together, and a
send finishes with its recv, so the differences of their ends measure the clocks' offsets.
`materialize` (at ingest, inside the attribution's transaction) gathers the ends in DuckDB
(clocks/ends.sql, per batch of whole hosts, so that only one batch's ranks are held at
once), fits one robust line per pair of hosts that meet (clocks/pairs.sql:
medians, so a broken match or a late kernel does not pull it), then solves the hosts'
offsets (and drifts, when they lower the residual) by least squares over that graph of
pairs — a system of hosts x hosts, small — and writes `clock_offsets`. A host whose
residual is large, or that meets no other host in enough instances, is not aligned, and
says why. Readers correct times through the view `rank_clocks`.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import duckdb
import numpy as np

from stepscope.analyzers._sql import run_script, sql
from stepscope.analyzers.results import ClockHost, Clocks
from stepscope.ingest.db import Room, room_for_bytes

# A host is aligned when the median disagreement of its aligned ends is within this
# (a collective's members finish within a few µs of each other) ...
MAX_RESIDUAL_NS = 50_000
# ... over at least this many instances it shares with another host.
MIN_MATCHED = 3
# A rank whose ends differ from its host's by more than this gets its own row.
RANK_DEV_NS = 20_000
# A drift term is kept when it at least halves the pairs' residual and moves an end by
# more than this over the span of the trace.
DRIFT_MIN_NS = 2_000
# The evidence is gathered per batch of whole hosts of about this many ranks (the
# attribution's batch size): its per-rank rows are those of one batch, whatever the job.
BATCH_RANKS = 64
# DuckDB's working memory for the fit per gathered host end (clocks/pairs.sql and
# residuals.sql over clk_ends): the 202,752 ends of 2,048 simulated ranks were fitted
# at a 20 MiB limit and not at 16 (~100 B each), so this leaves half again as margin.
END_BYTES = 160


@dataclass(frozen=True)
class PairFit:
    """clocks/pairs.sql's row: how far host b's clock leads host a's."""

    a: int
    b: int
    n: int
    const: float
    slope: float
    intercept: float
    const_res: float
    line_res: float
    span: float


def materialize(con: duckdb.DuckDBPyConnection, run: str, room: Room | None = None,
                batch_ranks: int = BATCH_RANKS) -> None:
    """Estimate and store run `run`'s clock offsets (replacing its earlier rows); the
    evidence's temp tables are dropped when they are written. With the attribution's
    `room`, its cache is shed before each batch of hosts, and DuckDB's limit is lowered
    to what the step needs (`room_for_bytes`): the floor while the evidence is gathered
    (one batch at a time), then END_BYTES per host end for the fit, so that the step
    does not fill a room sized for the attribution's largest batch."""
    hosts = con.execute(sql("clocks/hosts.sql"), {"run": run}).fetchall()
    with _within(room, 0):
        gather_ends(con, run, room.shed if room else None, batch_ranks)
    (ends,), = con.execute(sql("clocks/evidence_rows.sql")).fetchall()
    with _within(room, END_BYTES * int(ends)):
        _fit_and_write(con, run, hosts)


def _within(room: Room | None, wanted: int) -> AbstractContextManager[None]:
    """`room.within` the room for `wanted` bytes (nothing without a room)."""
    return nullcontext() if room is None else room.within(room_for_bytes(wanted))


def _fit_and_write(con: duckdb.DuckDBPyConnection, run: str,
                   hosts: list[tuple[str, int, list[int]]]) -> None:
    """Fit the hosts' clocks to the gathered ends (clocks/pairs.sql, `solve`), check them
    (clocks/residuals.sql), and write clock_offsets: a row per host, and one per rank whose
    clock is not its host's."""
    (t0,), = con.execute(sql("clocks/t0.sql")).fetchall()
    rows: list[dict[str, object]] = []
    if len(hosts) > 1 and t0 is not None:
        fits = [PairFit(*r) for r in con.execute(sql("clocks/pairs.sql"), {"t0": t0}).fetchall()]
        offsets, slopes = solve(len(hosts), fits)
        clocks = [{"host_no": i, "offset": float(offsets[i]), "slope": float(slopes[i])}
                  for i in range(len(hosts))]
        res = {h: (r, n) for h, r, n in con.execute(sql("clocks/residuals.sql"),
                                                    {"clocks": clocks, "t0": t0}).fetchall()}
        reached = connected(len(hosts), fits)
        for host, no, _ in hosts:
            residual, n = res.get(no, (None, 0))
            note = host_note(no, n, residual, no in reached)
            rows.append(_row(host, None, offsets[no], slopes[no], t0, residual, n, note))
        for rank, host, dev, n in con.execute(sql("clocks/rank_devs.sql")).fetchall():
            no = next(i for h, i, _ in hosts if h == host)
            note = host_note(no, n, res.get(no, (None, 0))[0], no in reached)
            rows.append(_row(host, rank, offsets[no] + dev, slopes[no], t0,
                             res.get(no, (None, 0))[0], n, note))
    elif hosts:
        rows.append(_row(hosts[0][0], None, 0.0, 0.0, t0 or 0, 0, 0, None))
    if rows:  # a run without Kineto ranks (Flight Recorder dumps, NCCL logs alone) has none
        run_script(con, "clocks/write.sql", {"run": run, "rows": rows})
    run_script(con, "clocks/drop.sql", {})


def gather_ends(con: duckdb.DuckDBPyConnection, run: str,
                shed: Callable[[], None] | None, batch_ranks: int) -> None:
    """Fill the evidence's temp tables (clocks/start.sql) batch by batch of whole hosts
    (clocks/ends.sql): every step of it is per host or per rank, so the rows are those of
    all hosts at once, and only one batch's per-rank ends are held."""
    run_script(con, "clocks/start.sql", {"run": run, "batch_ranks": batch_ranks})
    for batch, lo, hi in con.execute(sql("clocks/batches.sql")).fetchall():
        if shed is not None:
            shed()
        run_script(con, "clocks/ends.sql", {"run": run, "batch": batch, "lo": lo, "hi": hi,
                                            "min_ns": RANK_DEV_NS})


def _row(host: str, rank: int | None, offset: float, slope: float, t0: int,
         residual: int | None, n: int, note: str | None) -> dict[str, object]:
    return {"host": host, "rank": rank, "offset_ns": round(offset),
            "drift_ppm": round(slope * 1e6, 4), "ref_ns": t0, "residual_ns": residual,
            "n_matched": n, "aligned": note is None, "note": note}


def host_note(no: int, n: int, residual: int | None, reached: bool) -> str | None:
    """Why host number `no` is not aligned (None: it is)."""
    if no == 0:
        return None
    if not reached or n < MIN_MATCHED:
        return f"meets the other hosts in {n} matched instance(s): too few to align"
    if residual is None or residual > MAX_RESIDUAL_NS:
        return (f"residual {residual / 1e3 if residual is not None else float('nan'):.1f} µs "
                f"after alignment (over {MAX_RESIDUAL_NS / 1e3:.0f} µs): not aligned on noise")
    return None


def connected(n_hosts: int, fits: list[PairFit]) -> set[int]:
    """The hosts linked to host 0 through pairs with enough instances."""
    seen, todo = {0}, [0]
    edges = [(f.a, f.b) for f in fits if f.n >= MIN_MATCHED]
    while todo:
        h = todo.pop()
        for a, b in edges:
            for x, y in ((a, b), (b, a)):
                if x == h and y not in seen:
                    seen.add(y)
                    todo.append(y)
    return seen


def solve(n_hosts: int, fits: list[PairFit]) -> tuple[np.ndarray, np.ndarray]:
    """Offsets (ns at t0) and slopes (ns/ns) of every host against host 0: the weighted
    least-squares solution of o_b - o_a = the pair's value over all pairs (weights: the
    pairs' instances), with the drift term only where it earns its place (DRIFT_MIN_NS and
    halving the pooled residual)."""
    usable = [f for f in fits if f.n >= 1]
    const_res = np.median([f.const_res for f in usable]) if usable else 0.0
    line_res = np.median([f.line_res for f in usable]) if usable else 0.0
    drifts = any(abs(f.slope) * f.span > DRIFT_MIN_NS for f in usable)
    use_drift = drifts and line_res <= 0.5 * const_res
    offsets = _least_squares(n_hosts, usable,
                             [f.intercept if use_drift else f.const for f in usable])
    slopes = (_least_squares(n_hosts, usable, [f.slope for f in usable]) if use_drift
              else np.zeros(n_hosts))
    return offsets, slopes


def _least_squares(n_hosts: int, fits: list[PairFit], values: list[float]) -> np.ndarray:
    """x with x[0] = 0 minimizing sum n (x_b - x_a - value)^2 over the pairs."""
    if not fits or n_hosts < 2:
        return np.zeros(n_hosts)
    a = np.zeros((len(fits), n_hosts - 1))
    w = np.sqrt(np.array([f.n for f in fits], dtype=float))
    for i, f in enumerate(fits):
        if f.b > 0:
            a[i, f.b - 1] += 1.0
        if f.a > 0:
            a[i, f.a - 1] -= 1.0
    x, *_ = np.linalg.lstsq(a * w[:, None], np.array(values) * w, rcond=None)
    return np.concatenate([[0.0], x])


def clocks_section(con: duckdb.DuckDBPyConnection, run: str) -> Clocks | None:
    """The report's clocks (None for a run on one host, or written before schema 8)."""
    rows = con.execute(sql("clocks/read.sql"), {"run": run}).fetchall()
    hosts = [r for r in rows if r[1] is None]
    if len(hosts) < 2:
        return None
    items = tuple(ClockHost(host=h, rank=rk, offset_us=round(o / 1e3, 1),
                            drift_ppm=d, residual_us=None if res is None else round(res / 1e3, 1),
                            matched=int(n), aligned=bool(al), note=note)
                  for h, rk, o, d, _, res, n, al, note in rows)
    residual = max((c.residual_us or 0.0) for c in items if c.rank is None)
    aligned = all(c.aligned for c in items)
    return Clocks(hosts=items, aligned=aligned, residual_us=residual,
                  summary=clocks_summary(items, residual))


def clocks_summary(items: tuple[ClockHost, ...], residual: float) -> str:
    """'clocks: 2 hosts, offsets 0 / +400 µs, residual 2 µs' (and what was not aligned)."""
    hosts = [c for c in items if c.rank is None]
    shown = " / ".join(f"{c.offset_us:+,.0f}" if c.offset_us else "0" for c in hosts[:8])
    more = f" / … ({len(hosts) - 8} more)" if len(hosts) > 8 else ""
    drift = max((abs(c.drift_ppm) for c in hosts), default=0.0)
    text = (f"clocks: {len(hosts)} hosts, offsets {shown}{more} µs, "
            f"residual {residual:,.1f} µs")
    if drift:
        text += f", drift up to {drift:.2f} ppm"
    bad = [c for c in items if not c.aligned]
    if bad:
        text += f"; not aligned: {', '.join(c.host for c in bad[:4])} ({bad[0].note})"
    ranks = [c for c in items if c.rank is not None]
    if ranks:
        text += f"; {len(ranks)} rank(s) with a clock of their own"
    return text


__all__ = ["clocks_section", "materialize", "solve"]
