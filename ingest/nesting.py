"""The CPU ops' nesting (depth and parent on their thread) in one ordered pass, with NumPy.

The rank tables need, for every CPU op, how many ops of its thread are open when it starts
(its depth) and which of them encloses it (its parent). In SQL that took two window sorts,
an ASOF join per level and three intermediate tables (about 95 ms CPU for the 65k ops of
a 35 MB A100 trace); here it is one sort of the ops' start and end edges, a running sum
and two binary searches over arrays (vectorised: no Python loop over the ops).

The rules are those read/cpu_depth.sql documents (and rank_tables.sql applied before):
  * edges in (thread, time, class, end DESC, op_id, is_end) order, where a start has
    class 1, an end class 0, and a zero-length op's end class 1 (right after its start);
    an op's depth = the starts before its start edge - the ends before it;
  * its parent = the latest-starting op of its thread one level up; an op that outlives
    that one (a partially overlapping span: gloo send/recv) takes the op two levels up
    instead when that one still encloses its end.
Ops whose pid or tid is no number are left to read/cpu_depth.sql (no thread to nest on).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import duckdb

from stepscope.ingest.sql_files import sql

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    IntArray = npt.NDArray[np.int64]

NO_PARENT = -1
"""The parent of an op nothing encloses (op ids are event positions: never negative)."""


def build_cpu_depth(con: duckdb.DuckDBPyConnection) -> None:
    """Create temp table cpu_depth (op_id, start_ns, depth, parent_id) from
    cpu_raw: the nesting computed here, stored by read/cpu_depth.sql."""
    import numpy as np  # loads with the first trace read, not with the ingest package

    ops = con.execute(sql("read/nesting_input.sql")).fetchnumpy()
    op_id, pid, tid, start, end = (np.asarray(ops[c], dtype=np.int64) for c in
                                   ("op_id", "pid", "tid", "start_ns", "end_ns"))
    order, depth = _depths(pid, tid, start, end, op_id)
    parent = _parents(pid[order], tid[order], depth, end[order], op_id[order])
    con.register("cpu_nesting", {"op_id": op_id[order], "start_ns": start[order],
                                 "depth": depth, "parent_id": parent})
    try:
        con.execute(sql("read/cpu_depth.sql"), {"no_parent": NO_PARENT})
    finally:
        con.unregister("cpu_nesting")


def _depths(pid: IntArray, tid: IntArray, start: IntArray, end: IntArray,
            op_id: IntArray) -> tuple[IntArray, IntArray]:
    """The ops in start order per thread (indices into the inputs) and each one's depth.

    One sort of the 2n edges; the running sum of +1 (start) / -1 (end) before a start
    edge is its op's depth. Every thread closes all it opens, so the sum is back at 0
    where the next thread begins and needs no reset."""
    import numpy as np

    n = len(op_id)
    is_end = np.repeat(np.array([0, 1], dtype=np.int8), n)
    zero = (end == start).astype(np.int8)
    edge_class = np.concatenate([np.ones(n, dtype=np.int8), zero])
    neg_end = -np.concatenate([end, end])
    edges = np.lexsort((is_end, np.concatenate([op_id, op_id]), neg_end, edge_class,
                        np.concatenate([start, end]), np.concatenate([tid, tid]),
                        np.concatenate([pid, pid])))
    step = 1 - 2 * is_end[edges].astype(np.int64)
    open_before = np.cumsum(step) - step
    starts = edges < n  # the first n edges are the starts
    return edges[starts], open_before[starts]


def _parents(pid: IntArray, tid: IntArray, depth: IntArray, end: IntArray,
             op_id: IntArray) -> IntArray:
    """Each op's parent id (NO_PARENT for none); inputs in start order per thread."""
    import numpy as np

    n = len(op_id)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    new_thread = np.ones(n, dtype=bool)
    new_thread[1:] = (pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1])
    thread = np.cumsum(new_thread) - 1
    level = thread * (int(depth.max()) + 1) + depth  # one key per (thread, depth)
    # the ops grouped by level, in start order within each (a stable sort), and each
    # level's rank among the levels: one sorted key per op, (level rank, start order)
    by_level = np.argsort(level, kind="stable")
    sorted_level = level[by_level]
    first = np.ones(n, dtype=bool)
    first[1:] = sorted_level[1:] != sorted_level[:-1]
    levels = sorted_level[first]
    sorted_key = (np.cumsum(first) - 1) * n + by_level

    def latest_above(up: int, ops: IntArray) -> IntArray:
        """For the ops at start-order indices `ops`: the start-order index of the latest
        op `up` levels up on the same thread that started before it; -1 for none."""
        wanted = level[ops] - up
        rank = np.searchsorted(levels, wanted)
        found = (depth[ops] >= up) & (rank < len(levels))
        found[found] = levels[rank[found]] == wanted[found]
        at = np.searchsorted(sorted_key, rank * n + ops) - 1
        found &= at >= 0
        found[found] = sorted_key[at[found]] // n == rank[found]
        return np.where(found, by_level[np.maximum(at, 0)], -1)

    chosen = latest_above(1, np.arange(n, dtype=np.int64))
    # a span that outlives its parent (few, none in most traces) takes the op two
    # levels up instead when that one encloses its end
    outlives = np.flatnonzero((chosen >= 0) & (end[chosen] < end))
    two_up = latest_above(2, outlives)
    encloses = (two_up >= 0) & (end[two_up] >= end[outlives])
    chosen[outlives[encloses]] = two_up[encloses]
    return np.where(chosen >= 0, op_id[chosen], NO_PARENT)
