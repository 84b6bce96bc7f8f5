"""The attribution's fast formulations against their plain definitions, on random inputs
shaped to break them (docs/attribution.md).

The SQL of analyzers/sql/attribution/ computes three things with tricks that are only
right if an argument holds: the priority sweep (packed running sums over one sort of the
whole batch), the recompute walk (started at the backward nodes, deep trees at the
roots) and the ops the host ran in a gap (equi-joins on time buckets). Each is run here,
statement by statement, on tables built in code, and compared with a brute-force Python
computation of the definition: overlapping windows, ops far longer than a bucket, zero
length ops, ties, ranks whose clocks are far apart, trees deeper than 200.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import duckdb
import pytest

from stepscope.analyzers._sql import SQL
from stepscope.ingest import schema
from stepscope.ingest.db import connect
from stepscope.ingest.sql_files import execute_statements

RUN = "r"


def _db(scratch: Path) -> duckdb.DuckDBPyConnection:
    """A migrated in-memory database whose attribution scratch folder is `scratch`."""
    con = connect()
    schema.migrate(con, None)
    execute_statements(con, SQL.statements("attribution/scratch.sql"), {"dir": str(scratch)})
    return con


def _scratch(con: duckdb.DuckDBPyConnection, ddl: str, rows: list[tuple[int | str, ...]]) -> None:
    """Write `rows` as the scratch file the statements read, e.g. `a_windows (rank
    INTEGER, ...)`, as the batch's earlier statements would."""
    name = ddl.split()[0]
    con.execute(f"CREATE TEMP TABLE {ddl}")
    if rows:
        marks = ", ".join("?" * len(rows[0]))
        con.executemany(f"INSERT INTO {name} VALUES ({marks})", rows)
    con.execute(f"COPY {name} TO (a_scratch_file('{name}')) (FORMAT parquet)")


def _statements(script: str, first: str, last: str) -> tuple[str, ...]:
    """The statements of `script` from the one that writes `first` to the one that
    writes `last` (a scratch file, a variable or a table), in order."""
    stmts = SQL.statements(script)
    def index(name: str) -> int:
        pattern = re.compile(rf"a_scratch_file\('{name}'\)|(VARIABLE|INSERT INTO) {name}\b")
        return next(i for i, s in enumerate(stmts)
                    if pattern.search(re.sub(r"--[^\n]*", "", s)))
    return stmts[index(first): index(last) + 1]


# ---------------------------------------------------------------- the priority sweep

def _sweep_reference(intervals: list[tuple[int, int, int, int]],
                     windows: list[tuple[int, int, int]]) -> list[tuple[int, int, int, int, int]]:
    """Segments (rank, s, e, cat, n_cat) by the definition: cut at every boundary, the
    first category with a running interval (7 idle)."""
    out = []
    for rank in {r for r, *_ in intervals} | {r for r, *_ in windows}:
        ivs = [(s, e, c) for r, s, e, c in intervals if r == rank and e > s]
        pts = sorted({t for s, e, _ in ivs for t in (s, e)}
                     | {t for r, ws, we in windows if r == rank for t in (ws, we)})
        for t, t_next in zip(pts, pts[1:], strict=False):
            n = [sum(1 for s, e, c in ivs if c == cat and s <= t < e) for cat in range(1, 7)]
            cat = next((i + 1 for i, k in enumerate(n) if k > 0), 7)
            out.append((rank, t, t_next, cat, n[cat - 1] if cat < 7 else 0))
    return sorted(out)


@pytest.mark.parametrize("seed", range(6))
def test_the_sweep_is_the_priority_rule(seed: int, tmp_path: Path) -> None:
    rnd = random.Random(seed)
    intervals, windows = [], []
    for rank in range(3):
        base = rnd.choice([0, 10**15, 1_700_000_000_000_000_000])  # far-apart clocks
        for _ in range(rnd.randint(0, 60)):
            s = base + rnd.randint(0, 2000)
            e = s + rnd.choice([0, -5, rnd.randint(1, 300), rnd.randint(1, 3000)])
            intervals.append((rank, s, e, rnd.randint(1, 6)))
        for _ in range(rnd.randint(1, 4)):  # windows may overlap each other
            ws = base + rnd.randint(-100, 2000)
            windows.append((rank, ws, ws + rnd.randint(0, 1500)))
    con = _db(tmp_path)
    _scratch(con, "a_intervals (rank INTEGER, s BIGINT, e BIGINT, cat INTEGER)", intervals)
    _scratch(con, "a_windows (rank INTEGER, window_start_ns BIGINT, window_end_ns BIGINT)",
             windows)
    execute_statements(con, _statements("attribution/attribution.sql", "a_segments",
                                        "a_segments"), {})
    got = con.execute("SELECT rank, s, e, cat, n_cat FROM a_scratch('a_segments') "
                      "ORDER BY ALL").fetchall()
    assert got == _sweep_reference(intervals, windows)


# ---------------------------------------------------------------- the recompute walk

BWD, FWD, PLAIN, BWD_OP = ("autograd::engine::evaluate_function: MmBackward0", "aten::mm",
                           "aten::add", "MmBackward0")


Op = tuple[int, int | None, str, int]


def _random_forest(rnd: random.Random, n: int, deep: bool) -> list[Op]:
    """(op_id, parent_id, name, depth): a random forest, or one with a chain 230 deep."""
    ops: list[Op] = []
    for op_id in range(n):
        parent = rnd.choice([None, *range(max(0, op_id - 8), op_id)]) if op_id else None
        if deep and 0 < op_id < 230:
            parent = op_id - 1
        depth = 0 if parent is None else ops[parent][3] + 1
        ops.append((op_id, parent, rnd.choice([BWD, FWD, FWD, PLAIN, PLAIN, BWD_OP]), depth))
    return ops


def _recompute_reference(ops: list[Op]) -> set[int]:
    """The original recursion: from the roots, at most 200 levels down; an op is
    recomputed when a forward op on its path has a backward node above it."""
    children: dict[int | None, list[int]] = {}
    for op_id, parent, _, _ in ops:
        children.setdefault(parent, []).append(op_id)
    names = {op_id: name for op_id, _, name, _ in ops}
    out: set[int] = set()
    stack = [(root, names[root] == BWD, False, 0) for root in children.get(None, [])]
    while stack:
        op_id, in_bwd, is_rc, lvl = stack.pop()
        if is_rc:
            out.add(op_id)
        if lvl >= 200:
            continue
        for c in children.get(op_id, []):
            stack.append((c, in_bwd or names[c] == BWD, is_rc or (in_bwd and names[c] == FWD),
                          lvl + 1))
    return out


@pytest.mark.parametrize(("seed", "deep"), [(0, False), (1, False), (2, False), (3, True)])
def test_the_recompute_walk_is_the_recursion(seed: int, deep: bool, tmp_path: Path) -> None:
    rnd = random.Random(seed)
    con = _db(tmp_path)
    expected = set()
    for rank in range(2):
        ops = _random_forest(rnd, 400, deep)
        con.executemany(
            "INSERT INTO cpu_ops (run, rank, op_id, parent_id, name, category, depth, "
            "sequence_number) VALUES (?, ?, ?, ?, ?, 'cpu_op', ?, ?)",
            [(RUN, rank, op_id, parent, name, depth, None if name == PLAIN else op_id)
             for op_id, parent, name, depth in ops])
        expected |= {(rank, op_id) for op_id in _recompute_reference(ops)}
    execute_statements(con, _statements("attribution/attribution.sql", "a_tree", "a_tree"),
                       {"run": RUN, "lo": 0, "hi": 1})
    got = set(con.execute("SELECT rank, op_id FROM a_scratch('a_tree')").fetchall())
    assert got == expected and (deep or expected)


# ---------------------------------------------------------------- what the host ran

def _host_reference(ops: list[tuple[int, int, int, int]],
                    gaps: list[tuple[int, int, int, int]]) -> list[tuple[int, int, str, int]]:
    """(rank, step, op name, time): each op's overlap with the host windows of a step,
    summed over the step's windows (the ops have no children, so it is their self time;
    each op has its own name, so a pair the join misses or finds twice shows)."""
    acc: dict[tuple[int, int, str], int] = {}
    for r, step, s, hb in gaps:
        for rank, op_id, a, e in ops:
            if hb > 0 and rank == r and a < s + hb and e > s:
                key = (r, step, f"op{op_id}")
                acc[key] = acc.get(key, 0) + min(e, s + hb) - max(a, s)
    return sorted((*k, v) for k, v in acc.items() if v > 0)


@pytest.mark.parametrize("seed", range(6))
def test_the_bucket_join_finds_every_overlap(seed: int, tmp_path: Path) -> None:
    rnd = random.Random(seed)
    ops, gaps = [], []
    for rank in range(3):
        base = rnd.choice([0, 10**15, 1_700_000_000_000_000_000])
        span = rnd.choice([5_000, 1_000_000])
        for op_id in range(rnd.randint(0, 150)):
            a = base + rnd.randint(0, span)
            dur = rnd.choice([0, rnd.randint(1, 200), rnd.randint(1, span), 50 * span])
            ops.append((rank, op_id, a, a + dur))
        steps = rnd.randint(0, 30)
        for step in range(steps):  # dense, sparse, overlapping and empty windows
            s = base + rnd.randint(0, span)
            gaps.append((rank, step % 3, s, rnd.choice([0, rnd.randint(1, 50),
                                                        rnd.randint(1, span // 3)])))
    con = _db(tmp_path)
    con.executemany("INSERT INTO cpu_ops (run, rank, op_id, start_ns, end_ns, name, category,"
                    " tid) VALUES (?, ?, ?, ?, ?, ?, 'cpu_op', 1)",
                    [(RUN, *op, f"op{op[1]}") for op in ops])
    _scratch(con, "i_gaps (rank INTEGER, step INTEGER, s BIGINT, host_bound_ns BIGINT)", gaps)
    execute_statements(con, _statements("attribution/idle.sql", "i_hwin", "host_activity"),
                       {"run": RUN, "lo": 0, "hi": 2})
    got = con.execute("SELECT rank, step, name, self_ns FROM host_activity WHERE run = ? "
                      "ORDER BY ALL", [RUN]).fetchall()
    assert got == _host_reference(ops, gaps)


# ---------------------------------------------------------------- collectives' exposure

def _exposure_reference(parts: list[tuple[int, int, int, int, int]],
                        segments: list[tuple[int, int, int, int, int]],
                        windows: list[tuple[int, int, int, int]]) -> list[tuple[int, ...]]:
    """(rank, coll_id, step, exposed, straggler, bubble, exposed claim): each segment of a
    part's category shared out among the parts running in it, per step window."""
    acc: dict[tuple[int, int, int], list[float]] = {}
    for rank, coll_id, ps, pe, cat in parts:
        for r, s, e, c, n in segments:
            if r != rank or c != cat or not (s < pe and e > ps and pe > ps):
                continue
            for wr, step, ws, we in windows:
                if wr == rank and s >= ws and e <= we:
                    row = acc.setdefault((rank, coll_id, step), [0.0, 0.0, 0.0, 0])
                    ov = min(pe, e) - max(ps, s)
                    row[cat - 3] += ov / n
                    row[3] += ov if cat == 3 else 0
    return sorted((*k, *(int(x + 0.5) for x in v[:3]), int(v[3])) for k, v in acc.items())


@pytest.mark.parametrize("seed", range(6))
def test_the_exposure_join_shares_every_overlap(seed: int, tmp_path: Path) -> None:
    rnd = random.Random(seed)
    parts, segments, windows = [], [], []
    for rank in range(3):
        base = rnd.choice([0, 10**15, 1_700_000_000_000_000_000])
        t = base
        for _ in range(rnd.randint(0, 80)):  # disjoint segments, as the sweep cuts them
            length = rnd.choice([1, rnd.randint(1, 50), rnd.randint(1, 5000)])
            segments.append((rank, t, t + length, rnd.randint(3, 7), rnd.choice([1, 2, 4])))
            t += length + rnd.choice([0, 0, rnd.randint(1, 100)])
        for coll_id in range(rnd.randint(0, 40)):  # parts overlap freely, some are empty
            s = base + rnd.randint(-100, t - base + 100)
            parts.append((rank, coll_id, s, s + rnd.choice([0, rnd.randint(1, 200),
                                                            rnd.randint(1, 20000)]),
                          rnd.randint(3, 5)))
        for step in range(rnd.randint(1, 3)):
            ws = base + rnd.randint(0, max(1, t - base))
            windows.append((rank, step, ws, ws + rnd.randint(0, t - base + 1)))
    con = _db(tmp_path)
    _scratch(con, "a_coll_parts (rank INTEGER, coll_id BIGINT, s BIGINT, e BIGINT, cat INTEGER)",
             parts)
    _scratch(con, "a_segments (rank INTEGER, s BIGINT, e BIGINT, cat INTEGER, n_cat BIGINT)",
             segments)
    _scratch(con, "a_windows (rank INTEGER, step INTEGER, window_start_ns BIGINT, "
             "window_end_ns BIGINT)", windows)
    execute_statements(con, _statements("attribution/attribution.sql",
                                        "stepscope_comm_bucket_ns", "collective_exposure"),
                       {"run": RUN})
    got = con.execute(
        "SELECT rank, coll_id, step, exposed_ns, straggler_wait_ns, bubble_ns, "
        "exposed_claim_ns FROM collective_exposure WHERE run = ? ORDER BY ALL", [RUN]
    ).fetchall()
    assert got == _exposure_reference(parts, segments, windows)


# ---------------------------------------------------------------- the gaps

@pytest.mark.parametrize("seed", range(6))
def test_gaps_are_the_maximal_runs_of_idle_segments(seed: int, tmp_path: Path) -> None:
    rnd = random.Random(seed)
    segments, windows, expected = [], [], []
    for rank in range(2):
        t = rnd.choice([0, 10**15])
        first = t
        for _ in range(rnd.randint(0, 120)):  # tiling segments, idle ones often adjacent
            length = rnd.randint(1, 100)
            segments.append((rank, t, t + length, rnd.choice([1, 3, 7, 7, 7])))
            t += length
        for step in range(rnd.randint(1, 4)):  # windows on segment edges, overlapping
            edges = [s for r, s, _, _ in segments if r == rank] + [t]
            ws, we = sorted(rnd.sample(edges, 2)) if len(edges) > 1 else (first, first)
            windows.append((rank, step, "gpu", ws, we))
            run: list[int] = []
            for _, s, e, cat in (x for x in segments if x[0] == rank and ws <= x[1]
                                 and x[2] <= we):
                if cat == 7 and run and run[1] == s:
                    run[1] = e
                    continue
                if run:
                    expected.append((rank, step, run[0], run[1]))
                run = [s, e] if cat == 7 else []
            if run:
                expected.append((rank, step, run[0], run[1]))
    con = _db(tmp_path)
    _scratch(con, "a_segments (rank INTEGER, s BIGINT, e BIGINT, cat INTEGER)", segments)
    _scratch(con, "a_windows (rank INTEGER, step INTEGER, timeline VARCHAR, "
             "window_start_ns BIGINT, window_end_ns BIGINT)", windows)
    execute_statements(con, _statements("attribution/idle.sql", "i_gaps", "i_gaps"),
                       {"run": RUN, "lo": 0, "hi": 1, "short_gap_ns": 30_000})
    got = con.execute("SELECT rank, step, s, e FROM a_scratch('i_gaps') ORDER BY ALL").fetchall()
    assert got == sorted(expected)
