"""The dependency graph of a run as compact arrays, and the critical path of each step.

analyzers/sql/critical_path/graph.sql builds the graph set-based in DuckDB (nodes: every
GPU activity and collective call; edges: stream order, launch, the issue and consume
semantics of communication, inferred cross-stream waits, CPU waits at syncs; collective
instances and send/recv pairs). Here it becomes numpy arrays, and the path of a step is
the chain of what set each start, followed backwards from the end of the reference rank's
window (docs/critical_path.md). The chain is found by pointer doubling over the step's
nodes (O(n log depth) vectorized), never by a Python loop over events.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np
import numpy.typing as npt

from stepscope.analyzers._memory import GRAPH_MEMORY_LIMIT, bounded
from stepscope.analyzers._sql import run_script, sql
from stepscope.analyzers.attribution import SHORT_GAP_NS

I64 = npt.NDArray[np.int64]
I8 = npt.NDArray[np.int8]
BOOL = npt.NDArray[np.bool_]
OBJ = npt.NDArray[np.object_]

# docs/critical_path.md: a start within XS_TOL of another stream's end that nothing else
# explains waited for it; a CPU that resumed within SYNC_TOL of a GPU op's end waited for
# it; an idle thread gap of GAP_MIN at a step boundary is an unrecorded wait.
XS_TOL_NS = 10_000
SYNC_TOL_NS = 100_000
GAP_MIN_NS = 20_000
# A start that waited for its launch: the call and this long after it (or its return, when
# the call ran longer) is the launch, as the breakdown's launch overhead
# (docs/attribution.md); a start later than that waited on the GPU for something the trace
# does not record (idle), not for the host.
LAUNCH_TOL_NS = SHORT_GAP_NS

# The graph keeps every per-node and per-edge string as a small integer code (the position
# in these tuples; names and groups index the run's own dictionaries), so its memory is a
# few int64 columns per node and edge, not a Python string each (docs/critical_path.md).
EDGE_KINDS = ("stream", "issue", "consume", "inferred", "sync", "launch")
STREAM, ISSUE, CONSUME, INFERRED, SYNC, LAUNCH_EDGE = range(len(EDGE_KINDS))
GPU_EDGES = (STREAM, ISSUE, CONSUME, INFERRED)
PATH_CATEGORIES = ("compute", "recompute", "memory", "collective", "p2p", "launch", "cpu",
                   "idle")
COMPUTE, RECOMPUTE, MEMORY, COLLECTIVE, P2P, LAUNCH, CPU, IDLE = range(len(PATH_CATEGORIES))
CATEGORY_NAMES: OBJ = np.asarray(PATH_CATEGORIES, dtype=object)
NODE_KINDS = ("kernel", "coll", "p2p")
KERNEL = 0
NONE = -1
NEG = np.iinfo(np.int64).min // 4  # "no constraint" in max-plus sums


@dataclass(frozen=True)
class Graph:
    """One run's graph. Nodes are numbered 0..n-1; `inst` is the collective instance of a
    node (-1: none) and `inst_t` that instance's transfer time (the last member's
    duration). cat (PATH_CATEGORIES), kind (NODE_KINDS) and ekind (EDGE_KINDS) are codes;
    a node's name is names[name_code], its group or launching op ops[op_code] (-1: none,
    which reads MISSING, the dictionary's last entry). Edges: src (-1 for a launch), dst,
    kind, the time t it allowed the start (on dst's clock), binding (it set the start),
    wait (syncs: how long the CPU waited)."""
    rank: I64
    step: I64          # -1: launched outside any step
    stream: I64
    s: I64
    e: I64
    cat: I8
    kind: I8
    launch_s: I64      # NEG: no launch call linked
    launch_e: I64      # the launch call's end (NEG: none linked)
    inst: I64
    inst_t: I64
    name_code: I64     # dense number of the name, by name
    op_code: I64       # dense number of the group / launching op, by op; -1: none
    names: OBJ         # name of each name_code
    ops: OBJ           # op of each op_code, then MISSING (what op_code -1 reads)
    src: I64
    dst: I64
    ekind: I8
    t: I64
    binding: BOOL
    wait: I64
    w_rank: I64
    w_step: I64
    w_ws: I64
    w_we: I64
    w_succ: BOOL
    w_probe: I64
    syncs: dict[str, int]  # CPU waits found: sync_call, blocking_copy, idle_thread

    @property
    def n(self) -> int:
        return int(self.rank.size)

    def name_of(self, nodes: I64) -> OBJ:
        """The names of `nodes` (looked up only for what is shown)."""
        return self.names[self.name_code[nodes]]

    def op_of(self, nodes: I64) -> OBJ:
        """The group or launching op of `nodes` (MISSING: none)."""
        return self.ops[self.op_code[nodes]]


def _col(cols: dict[str, npt.NDArray[np.generic]], name: str, fill: int = NONE) -> I64:
    col = cols[name]
    if isinstance(col, np.ma.MaskedArray):
        col = col.filled(fill)
    return np.asarray(col, dtype=np.int64)


def _code(cols: dict[str, npt.NDArray[np.generic]], name: str) -> I8:
    return np.asarray(_col(cols, name), dtype=np.int8)


# A missing name or group reads '?', as it did when these columns came back as masked
# object arrays (numpy's fill value for objects): the reports stay as they were.
MISSING = "?"


def _dictionary(con: duckdb.DuckDBPyConnection, query: str) -> OBJ:
    """The values of a dictionary query in code order, then MISSING (what code -1 reads);
    NULL reads MISSING too."""
    values = [MISSING if v is None else v for (v,) in con.execute(sql(query)).fetchall()]
    return np.asarray([*values, MISSING], dtype=object)


def load(con: duckdb.DuckDBPyConnection, run: str) -> Graph:
    """Build the graph of `run` in DuckDB (critical_path/graph.sql) and read it back;
    the temporary tables are dropped once read, so they hold no memory afterwards. The
    macro it reads (blocking_copies, shared with the idle split) is installed first: a
    caller may hand a bare connection."""
    params = {"run": run, "xs_tol_ns": XS_TOL_NS, "sync_tol_ns": SYNC_TOL_NS,
              "gap_min_ns": GAP_MIN_NS}

    def build() -> Graph:
        run_script(con, "waits/macros.sql", {})
        run_script(con, "critical_path/graph.sql", params)
        return _read(con)

    try:  # DuckDB's part bounded (analyzers/_memory.py), its tables gone once read
        return bounded(con, GRAPH_MEMORY_LIMIT, build)
    finally:
        run_script(con, "critical_path/drop.sql", {})


def _read(con: duckdb.DuckDBPyConnection) -> Graph:
    nodes = con.execute(sql("critical_path/nodes.sql")).fetchnumpy()
    edges = con.execute(sql("critical_path/edges.sql")).fetchnumpy()
    wins = con.execute(sql("critical_path/windows.sql")).fetchnumpy()
    syncs = dict(con.execute(sql("critical_path/syncs.sql")).fetchall())
    return Graph(
        rank=_col(nodes, "rank"), step=_col(nodes, "step"), stream=_col(nodes, "stream"),
        s=_col(nodes, "s"), e=_col(nodes, "e"), cat=_code(nodes, "cat"),
        kind=_code(nodes, "kind"), launch_s=_col(nodes, "launch_s", NEG),
        launch_e=_col(nodes, "launch_e", NEG),
        inst=_col(nodes, "inst"), inst_t=_col(nodes, "inst_t"),
        name_code=_col(nodes, "name_code"), op_code=_col(nodes, "op_code"),
        names=_dictionary(con, "critical_path/names.sql"),
        ops=_dictionary(con, "critical_path/ops.sql"),
        src=_col(edges, "src"), dst=_col(edges, "dst"), ekind=_code(edges, "kind"),
        t=_col(edges, "t"), binding=np.asarray(edges["binding"], dtype=bool),
        wait=_col(edges, "wait", 0),
        w_rank=_col(wins, "rank"), w_step=_col(wins, "step"), w_ws=_col(wins, "ws"),
        w_we=_col(wins, "we"), w_succ=np.asarray(wins["has_successor"], dtype=bool),
        w_probe=_col(wins, "probe"), syncs={str(k): int(v) for k, v in syncs.items()})


# ------------------------------------------------------------------ what set each start
@dataclass(frozen=True)
class Causes:
    """Per node, the binding edge's kind (EDGE_KINDS code, -1: none), source (-1: none)
    and time t; and per member of an instance, the member that arrived last (the one
    that set the end: the shortest duration; the member itself when it ties)."""
    kind: I8
    src: I64
    t: I64
    wait: I64
    last: I64


def causes(g: Graph) -> Causes:
    """What set each node's start and each collective's end, from the binding edges."""
    kind = np.full(g.n, NONE, dtype=np.int8)
    src = np.full(g.n, NONE, dtype=np.int64)
    t = np.full(g.n, NEG, dtype=np.int64)
    wait = np.zeros(g.n, dtype=np.int64)
    b = np.flatnonzero(g.binding)
    kind[g.dst[b]], src[g.dst[b]], t[g.dst[b]] = g.ekind[b], g.src[b], g.t[b]
    wait[g.dst[b]] = g.wait[b]
    return Causes(kind=kind, src=src, t=t, wait=wait, last=last_arrivers(g))


def last_arrivers(g: Graph) -> I64:
    """For each member of an instance, the member that arrived last (shortest duration,
    lowest rank on a tie) unless the member itself is one of the last; -1 off instances."""
    last = np.full(g.n, NONE, dtype=np.int64)
    members = np.flatnonzero(g.inst >= 0)
    if members.size == 0:
        return last
    dur = g.e[members] - g.s[members]
    order = np.lexsort((g.rank[members], dur, g.inst[members]))
    first = members[order][np.r_[True, np.diff(g.inst[members][order]) != 0]]
    by_inst = np.full(int(g.inst.max()) + 1, NONE, dtype=np.int64)
    by_inst[g.inst[first]] = first
    chosen = by_inst[g.inst[members]]
    own = dur == g.inst_t[members]
    last[members] = np.where(own, members, chosen)
    return last


# ------------------------------------------------------------------ chains
def chain(parent: I64, start: int) -> I64:
    """The items start, parent[start], parent[parent[start]], ... up to the first -1, in
    that order, by pointer doubling: O(n log depth) vectorized work. On a cycle (only
    inconsistent matches make one) it stops before the first item seen twice."""
    n = parent.size
    up = np.append(np.where(parent < 0, n, parent), n)  # n: the sentinel root
    jumps = [up]
    while jumps[-1][start] != n and (1 << (len(jumps) - 1)) <= n:
        jumps.append(jumps[-1][jumps[-1]])
    # depth of start: the largest d with the d-th ancestor not the sentinel (at most n)
    depth, at = 0, start
    for level in range(len(jumps) - 1, -1, -1):
        nxt = jumps[level][at]
        if nxt != n and depth + (1 << level) <= n:
            depth, at = depth + (1 << level), int(nxt)
    k = np.arange(min(depth, n) + 1)
    idx = np.full(k.size, start, dtype=np.int64)
    for level, jump in enumerate(jumps):
        bit = (k >> level) & 1 == 1
        idx[bit] = jump[idx[bit]]
    idx = idx[idx < n]
    # on a cycle every item after the first repeat repeats: keep the distinct prefix
    return idx[:np.unique(idx).size]
