"""The dependency graph of a run as compact arrays, and the critical path of each step.

analyzers/sql/critical_path/graph.sql builds the graph set-based in DuckDB (nodes: every
GPU activity and collective call; edges: stream order, launch, the issue and consume
semantics of communication, inferred cross-stream waits, CPU waits at syncs; collective
instances and send/recv pairs). Here it becomes numpy arrays, and the path of a step is
the chain of what set each start, followed backwards from the end of the reference rank's
window (docs/critical_path.md). The chain is followed item by item in Python while it is
short (a step's chain is a few hundred items) and by pointer doubling over the step's
nodes (O(n log depth), vectorized) past a bound; docs/critical_path.md says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import numpy.typing as npt

from stepscope.analyzers._memory import GRAPH_MEMORY_LIMIT, bounded, release
from stepscope.analyzers._sql import run_script, sql
from stepscope.analyzers.breakdown.attribution import SHORT_GAP_NS
from stepscope.analyzers.flops.counted_ops import rank_batches

I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]
I8 = npt.NDArray[np.int8]
BOOL = npt.NDArray[np.bool_]
OBJ = npt.NDArray[np.object_]

# docs/critical_path.md: a start within XS_TOL of another stream's end that nothing else
# explains waited for it; a CPU that resumed within SYNC_TOL of a GPU op's end waited for
# it; an idle thread gap of GAP_MIN at a step boundary is an unrecorded wait.
XS_TOL_NS = 10_000
SYNC_TOL_NS = 100_000
GAP_MIN_NS = 20_000
# A thread silent (nothing recorded) this long inside a step, after launching an op the
# GPU had not started, that came back within SYNC_TOL of that op's end, waited for it
# (a host polling memory the GPU writes: DeepEP's dispatch). Ten times SYNC_TOL, so a
# host busy with its own work rarely comes back that near an op's end by chance; such
# silences last at most 247 us on five HTA / Kineto real traces, DeepSeek-V3's spins
# 2.1 to 22.7 ms (docs/critical_path.md).
POLL_MIN_NS = 10 * SYNC_TOL_NS
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
    """One run's graph, but its edges (Edges: the largest part, held only while what is
    derived from them is built). Nodes are numbered 0..n-1; `inst` is the collective
    instance of a node (-1: none) and `inst_t` that instance's transfer time (the last
    member's duration). cat (PATH_CATEGORIES) and kind (NODE_KINDS) are codes; a node's
    name is names[name_code], its group or launching op ops[op_code] (-1: none, which
    reads MISSING, the dictionary's last entry). n_edges and n_inferred count the edges
    and the inferred cross-stream waits among them. A node's stream stays in DuckDB
    (critical_path/graph.sql draws the stream edges from it; nothing after reads it),
    and the codes are 32 bits: on a large job every array of nodes counts."""
    rank: I64
    step: I64          # -1: launched outside any step
    s: I64
    e: I64
    cat: I8
    kind: I8
    launch_s: I64      # NEG: no launch call linked
    launch_e: I64      # the launch call's end (NEG: none linked)
    inst: I64
    inst_t: I64
    name_code: I32     # dense number of the name, by name
    op_code: I32       # dense number of the group / launching op, by op; -1: none
    names: OBJ         # name of each name_code
    ops: OBJ           # op of each op_code, then MISSING (what op_code -1 reads)
    n_edges: int
    n_inferred: int
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


@dataclass(frozen=True)
class Edges:
    """The graph's edges, ordered by dst: src (-1 for a launch), dst, kind (EDGE_KINDS
    code), the time t it allowed the start (on dst's clock), binding (it set the start),
    wait (syncs: how long the CPU waited). src and dst are node numbers, 32 bits: the
    edges are the largest part of the graph (652 k at 1,024 ranks), and a node number
    never nears 2**31."""
    src: I32
    dst: I32
    ekind: I8
    t: I64
    binding: BOOL
    wait: I64


Cols = dict[str, npt.NDArray[np.generic]]


def _col(cols: Cols, name: str, fill: int = NONE) -> I64:
    col = cols[name]
    if isinstance(col, np.ma.MaskedArray):
        col = col.filled(fill)
    return np.asarray(col, dtype=np.int64)


# A missing name or group reads '?', as it did when these columns came back as masked
# object arrays (numpy's fill value for objects): the reports stay as they were.
MISSING = "?"

# The graph is built a batch of ranks at a time (docs/scale.md, "Memory"): DuckDB then
# holds one batch's tables, not the whole job's, while the arrays gather the batches.
# 128 ranks to a batch peak as low as 64 do, in less time (each batch's statements scan
# their tables); docs/scale.md has the measurements.
RANKS_PER_BATCH = 128

NODE_COLUMNS = ("rank", "step", "s", "e", "cat", "kind", "launch_s", "launch_e",
                "name_code", "op_code")
EDGE_COLUMNS = ("src", "dst", "ekind", "t", "binding", "wait")
WINDOW_COLUMNS = ("w_rank", "w_step", "w_ws", "w_we", "w_succ", "w_probe")


def load(con: duckdb.DuckDBPyConnection, run: str,
         ranks_per_batch: int = RANKS_PER_BATCH) -> tuple[Graph, Edges]:
    """Build the graph of `run` in DuckDB (critical_path/graph.sql), `ranks_per_batch`
    ranks at a time, and read it back; the temporary tables are dropped once read, so
    they hold no memory afterwards. The macros it reads (sync_calls and blocking_copies,
    shared with the idle split) are installed first: a caller may hand a bare
    connection."""

    def build() -> tuple[Graph, Edges]:
        run_script(con, "waits/macros.sql", {})
        run_script(con, "critical_path/keys.sql", {})
        parts = _Parts(con, run)
        for lo, hi in rank_batches(con, run, ranks_per_batch) or [(0, -1)]:
            run_script(con, "critical_path/graph.sql", {
                "run": run, "lo": lo, "hi": hi, "base": parts.n_nodes,
                "xs_tol_ns": XS_TOL_NS, "sync_tol_ns": SYNC_TOL_NS,
                "gap_min_ns": GAP_MIN_NS, "poll_min_ns": POLL_MIN_NS})
            parts.add(con)
            release(con)  # what the batch freed, not kept while the arrays grow
        return parts.graph(con)

    try:  # DuckDB's part bounded (analyzers/_memory.py), its tables gone once read
        return bounded(con, GRAPH_MEMORY_LIMIT, build)
    finally:
        run_script(con, "critical_path/drop.sql", {})


# Each node has at most one edge of each kind into it (stream, issue, sync, launch,
# inferred) but consume, and consume edges are at most one per receive (a node): the
# edges are at most this many times the nodes. Reserved, not filled: the pages of an
# array's unused tail are never touched, so they take no memory.
EDGES_PER_NODE = len(EDGE_KINDS)


class _Column:
    """One column of the graph, filled batch by batch into an array reserved once (it
    grows, copying, only past its reservation): no batch's part is kept, and no join of
    the parts doubles the column at the end."""

    def __init__(self, dtype: type[np.generic], capacity: int) -> None:
        self.data: npt.NDArray[Any] = np.empty(max(capacity, 1), dtype=dtype)
        self.size = 0

    def append(self, values: npt.NDArray[Any]) -> None:
        end = self.size + values.size
        if end > self.data.size:
            grown = np.empty(max(end, 2 * self.data.size), dtype=self.data.dtype)
            grown[:self.size] = self.data[:self.size]
            self.data = grown
        self.data[self.size:end] = values
        self.size = end

    def values(self) -> npt.NDArray[Any]:
        return self.data[:self.size]


class _Parts:
    """The graph's arrays, gathered batch by batch. A batch's name and op codes number
    its own names and ops (critical_path/nodes.sql); graph() maps them to the codes of
    the run's dictionaries, in the same order (DuckDB orders text by its UTF-8 bytes,
    Python by code point: the same order). Node numbers are the run's already: a batch
    numbers its nodes from the count before it, in rank order."""

    def __init__(self, con: duckdb.DuckDBPyConnection, run: str) -> None:
        (nodes, windows), = con.execute(sql("critical_path/sizes.sql"), {"run": run}).fetchall()
        room = {**{c: int(nodes) for c in NODE_COLUMNS},
                **{c: EDGES_PER_NODE * int(nodes) for c in EDGE_COLUMNS},
                **{c: int(windows) for c in WINDOW_COLUMNS}}
        small = {"cat": np.int8, "kind": np.int8, "ekind": np.int8, "binding": np.bool_,
                 "w_succ": np.bool_, "src": np.int32, "dst": np.int32,
                 "name_code": np.int32, "op_code": np.int32}
        self.cols = {c: _Column(small.get(c, np.int64), n) for c, n in room.items()}
        self.names: list[list[str | None]] = []
        self.ops: list[list[str | None]] = []
        self.batch_ends: list[int] = []  # the node count after each batch
        self.syncs: dict[str, int] = {}
        self.n_nodes = 0

    def add(self, con: duckdb.DuckDBPyConnection) -> None:
        nodes = con.execute(sql("critical_path/nodes.sql")).fetchnumpy()
        for name in NODE_COLUMNS:
            fill = NEG if name in ("launch_s", "launch_e") else NONE
            self.cols[name].append(_col(nodes, name, fill))
        self.n_nodes += int(nodes["node"].size)
        self.batch_ends.append(self.n_nodes)
        del nodes
        edges = con.execute(sql("critical_path/edges.sql")).fetchnumpy()
        for name in ("src", "dst", "t"):
            self.cols[name].append(_col(edges, name))
        self.cols["ekind"].append(_col(edges, "kind"))
        self.cols["binding"].append(np.asarray(edges["binding"], dtype=bool))
        self.cols["wait"].append(_col(edges, "wait", 0))
        del edges
        wins = con.execute(sql("critical_path/windows.sql")).fetchnumpy()
        for name in ("rank", "step", "ws", "we", "probe"):
            self.cols[f"w_{name}"].append(_col(wins, name))
        self.cols["w_succ"].append(np.asarray(wins["has_successor"], dtype=bool))
        self.names.append([v for (v,) in con.execute(sql("critical_path/names.sql")).fetchall()])
        self.ops.append([v for (v,) in con.execute(sql("critical_path/ops.sql")).fetchall()])
        for how, n in con.execute(sql("critical_path/syncs.sql")).fetchall():
            self.syncs[str(how)] = self.syncs.get(str(how), 0) + int(n)

    def _recoded(self, name: str, batches: list[list[str | None]],
                 dictionary: list[str | None]) -> I32:
        """Column `name`'s batch codes, in place, as codes of `dictionary` (-1 stays -1)."""
        where = {v: i for i, v in enumerate(dictionary)}
        codes = self.cols[name].values()
        lo = 0
        for batch, hi in zip(batches, self.batch_ends, strict=True):
            to = np.asarray([*(where[v] for v in batch), NONE], dtype=np.int64)
            codes[lo:hi] = to[codes[lo:hi]]
            lo = hi
        return codes

    def graph(self, con: duckdb.DuckDBPyConnection) -> tuple[Graph, Edges]:
        names = _ordered({v for b in self.names for v in b})
        ops = _ordered({v for b in self.ops for v in b})
        name_code = self._recoded("name_code", self.names, names)
        op_code = self._recoded("op_code", self.ops, ops)
        inst = np.full(self.n_nodes, NONE, dtype=np.int64)
        inst_t = np.zeros(self.n_nodes, dtype=np.int64)
        members = con.execute(sql("critical_path/instances.sql")).fetchnumpy()
        node = _col(members, "node")
        inst[node], inst_t[node] = _col(members, "inst"), _col(members, "inst_t")
        del members, node
        v = {c: col.values() for c, col in self.cols.items()}
        edges = Edges(src=v["src"], dst=v["dst"], ekind=v["ekind"], t=v["t"],
                      binding=v["binding"], wait=v["wait"])
        order = np.lexsort((v["w_rank"], v["w_step"]))  # windows by step, then rank
        w = {c: v[c][order] for c in WINDOW_COLUMNS}
        return Graph(
            rank=v["rank"], step=v["step"], s=v["s"], e=v["e"],
            cat=v["cat"], kind=v["kind"], launch_s=v["launch_s"], launch_e=v["launch_e"],
            inst=inst, inst_t=inst_t, name_code=name_code, op_code=op_code,
            names=_dictionary(names), ops=_dictionary(ops),
            n_edges=int(edges.dst.size), n_inferred=int((edges.ekind == INFERRED).sum()),
            w_rank=w["w_rank"], w_step=w["w_step"], w_ws=w["w_ws"], w_we=w["w_we"],
            w_succ=w["w_succ"], w_probe=w["w_probe"],
            syncs=dict(sorted(self.syncs.items()))), edges


def _ordered(values: set[str | None]) -> list[str | None]:
    """Distinct values in DuckDB's order, NULL last (critical_path/names.sql)."""
    return sorted(v for v in values if v is not None) + ([None] if None in values else [])


def _dictionary(values: list[str | None]) -> OBJ:
    """The values of a dictionary in code order, then MISSING (what code -1 reads);
    NULL reads MISSING too."""
    return np.asarray([*(MISSING if v is None else v for v in values), MISSING], dtype=object)


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


def causes(g: Graph, edges: Edges) -> Causes:
    """What set each node's start and each collective's end, from the binding edges."""
    kind = np.full(g.n, NONE, dtype=np.int8)
    src = np.full(g.n, NONE, dtype=np.int64)
    t = np.full(g.n, NEG, dtype=np.int64)
    wait = np.zeros(g.n, dtype=np.int64)
    b = np.flatnonzero(edges.binding)
    dst = edges.dst[b]
    kind[dst], src[dst], t[dst] = edges.ekind[b], edges.src[b], edges.t[b]
    wait[dst] = edges.wait[b]
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
WALK_MAX = 1 << 14  # items a chain follows one by one before it turns to pointer doubling


def chain(parent: I64, start: int, walk_max: int = WALK_MAX) -> I64:
    """The items start, parent[start], parent[parent[start]], ... up to the first -1, in
    that order. On a cycle (only inconsistent matches make one) it stops before the
    first item seen twice.

    A step's path is a few hundred items of a graph of hundreds of thousands (233 k
    nodes at 1,024 ranks, twice as many items): its first `walk_max` items are followed
    one by one, and only a longer chain's rest by pointer doubling, whose log-depth
    arrays cover every item (docs/critical_path.md)."""
    walked: list[int] = []
    seen: set[int] = set()
    at = start
    while at >= 0 and len(walked) < walk_max:
        if at in seen:
            return np.asarray(walked, dtype=np.int64)
        walked.append(at)
        seen.add(at)
        at = int(parent[at])
    head = np.asarray(walked, dtype=np.int64)
    if at < 0:
        return head
    # the rest from `at`, cut at its own first repeat; together they are the chain up
    # to (at least) its first repeat, so the distinct prefix cuts it as one chain
    idx = np.concatenate([head, _doubled(parent, at)])
    return idx[:np.unique(idx).size]


def _doubled(parent: I64, start: int) -> I64:
    """chain() by pointer doubling: O(n log depth) vectorized work, and log depth arrays
    of n items alive at once."""
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
