"""What-if: a step's time recomputed on its dependency graph with some ops faster
(docs/critical_path.md, "What-if").

Every start becomes the latest of what it depends on (max-plus): its launch (shifted with
the CPU when the CPU had waited for a GPU op of the step), the previous op on its stream,
the communication it waits for (issue, consume, inferred waits), each with the gap
observed when that dependency set the start and none otherwise; a kernel ends its
duration later; a collective or send/recv ends the transfer time (the last member's
duration) after its last member arrives. Arrivals are compared through the instance's
observed end, which every member saw at the same instant, so no clock needs aligning.
With no change the evaluation reproduces every observed time exactly.

The graph of a step is evaluated level by level in topological order (Kahn): each round
handles, vectorized, every item whose inputs are known; the rounds are as many as the
longest chain of dependencies in items, the work linear in nodes and edges.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from stepscope.analyzers.critical_path.graph import (
    COMPUTE,
    I32,
    I64,
    KERNEL,
    LAUNCH_EDGE,
    NEG,
    RECOMPUTE,
    SYNC,
    Edges,
    Graph,
)

F64 = npt.NDArray[np.float64]
INT = npt.NDArray[np.signedinteger[Any]]  # item numbers and edge offsets, 32 or 64 bits


@dataclass(frozen=True)
class Scaling:
    """Duration multipliers of one what-if: per node (kernels) and per instance (the
    transfer time of a collective or send/recv); 1.0 = unchanged."""
    node: F64
    inst: F64


def launch_latency(g: Graph, edges: Edges) -> I64:
    """Per node, the launch delay it would have if its launch set its start: the one
    observed when it did, else the median of its rank's launch-bound starts (0 if none)."""
    delay = np.where(g.launch_s > NEG, g.s - g.launch_s, 0)
    b = np.flatnonzero(edges.binding & np.isin(edges.ekind, (LAUNCH_EDGE, SYNC)))
    bound = edges.dst[b]
    # per rank present (a dense code: a trace may claim any rank number, 2**31 - 2 too)
    ranks, rank_code = np.unique(g.rank, return_inverse=True)
    typical = np.zeros(max(ranks.size, 1), dtype=np.int64)
    if bound.size:  # the median per rank, by sorting
        r, dl = rank_code[bound], delay[bound]
        order = np.lexsort((dl, r))
        r, dl = r[order], dl[order]
        first = np.flatnonzero(np.r_[True, r[1:] != r[:-1]])
        count = np.diff(np.r_[first, r.size])
        typical[r[first]] = (dl[first + (count - 1) // 2] + dl[first + count // 2]) // 2
    own = np.zeros(g.n, dtype=bool)
    own[bound] = True
    return np.where(own, delay, np.minimum(delay, typical[rank_code]))


@dataclass(frozen=True)
class StepGraph:
    """The max-plus graph of one step: items (node starts, node ends, instances) with
    constants c, durations d (instances only), and weighted edges src -> dst, ordered by
    src (stable): the edges out of item x are edst[estart[x]:estart[x + 1]], weights ew.
    Item numbers and edge offsets are 32 bits (items and edges are far below 2**31 even
    at 1,024 ranks: 326 k and 461 k): the graph lives through every what-if."""
    nodes: I64        # global node ids of the step (the first `n_own`) and its end probes
    n_own: int
    inst: I64         # global instance ids
    c: I64
    estart: I32
    edst: I32
    ew: I64
    kernel_edges: I64  # the start -> end edges of kernels (weights: the durations)
    kernel_nodes: I64
    inst_items: I64
    base_d: I64        # observed kernel durations, aligned with kernel_items
    base_t: I64        # observed transfer times, aligned with inst_items
    hint: I64          # each item's observed time (which stuck item goes first)


def _local(g: Graph, steps: I64) -> tuple[I64, int, I64]:
    """The nodes of `steps`, then the nodes whose start ends one of their windows but
    lie outside them (the next step's first op: only its start is used)."""
    own = np.flatnonzero(np.isin(g.step, steps))
    probe = g.w_probe[np.isin(g.w_step, steps) & g.w_succ & (g.w_probe >= 0)]
    probes = np.unique(probe[~np.isin(g.step[probe], steps)])
    nodes = np.concatenate([own, probes])
    loc = np.full(g.n, -1, dtype=np.int64)
    loc[own] = np.arange(own.size)
    return nodes, own.size, loc


def step_graph(g: Graph, edges: Edges, steps: I64, delay: I64) -> StepGraph:
    """The max-plus graph of the ops of `steps` (see the module docstring): what happened
    before them stays as observed."""
    nodes, n_own, loc = _local(g, steps)
    n_loc = nodes.size
    # items: the starts first (item i: the start of nodes[i]), then ends, then instances
    own_nodes = nodes[:n_own]
    is_member = g.inst[own_nodes] >= 0
    insts = np.unique(g.inst[own_nodes][is_member])
    inst_item = np.full(int(g.inst.max()) + 2 if g.n else 1, -1, dtype=np.int64)
    inst_item[insts] = 2 * n_loc + np.arange(insts.size)
    n_items = 2 * n_loc + insts.size
    c = np.full(n_items, NEG, dtype=np.int64)
    pos = np.full(g.n, -1, dtype=np.int64)
    pos[nodes] = np.arange(n_loc)
    # ---- edges into starts, a chunk of edges at a time: the temporaries are as long as
    # a chunk, not as the edges (on a large job the edges are most of the report's
    # memory, docs/scale.md "Memory"); the chunks' edges keep their order
    wait = np.zeros(g.n, dtype=np.int64)  # first every CPU wait: a launch's floor reads it
    for sl in _chunks(edges.dst.size):
        into = edges.dst[sl]
        sync = (edges.ekind[sl] == SYNC) & (pos[into] >= 0)
        np.maximum.at(wait, into[sync], edges.wait[sl][sync])
    es, ed, ew = [], [], []
    for sl in _chunks(edges.dst.size):
        src, dst, w = _edges_into_starts(g, edges, sl, (pos, loc, delay, wait, c), n_loc)
        es.append(src)
        ed.append(dst)
        ew.append(w)
    del wait
    es, ed, ew = [np.concatenate(es)], [np.concatenate(ed)], [np.concatenate(ew)]
    # ---- starts to ends: kernels by their duration, members through their instance
    kern = np.flatnonzero(~is_member)
    es.append(kern)
    ed.append(n_loc + kern)
    ew.append(g.e[own_nodes[kern]] - g.s[own_nodes[kern]])
    mem = np.flatnonzero(is_member)
    mi = inst_item[g.inst[own_nodes[mem]]]
    es += [mem, mi]
    ed += [mi, n_loc + mem]
    ew += [-g.e[own_nodes[mem]], g.e[own_nodes[mem]]]
    # members of those instances outside the step keep their observed arrival
    away = np.flatnonzero((g.inst >= 0) & (loc < 0) & (inst_item[np.maximum(g.inst, 0)] >= 0))
    np.maximum.at(c, inst_item[g.inst[away]], -(g.e[away] - g.s[away]))
    first_kernel_edge, base_d = es[0].size, ew[1].copy()
    # ordered by source once (each evaluation walks the edges out of an item); the
    # kernels' start -> end edges have increasing sources (their starts), so they stay in
    # their order, and where they went is where the order holds them
    esrc = np.concatenate(es)
    del es
    estart = np.concatenate([[0], np.cumsum(np.bincount(esrc, minlength=n_items))],
                            dtype=np.int32)  # before the order: one less array alive
    order = np.argsort(esrc, kind="stable")
    del esrc
    # each list is joined and let go before it is put in order: two arrays of the step
    # graph's edges alive at a time besides the order, not three
    items = np.concatenate(ed, dtype=np.int32)
    del ed
    edst = items[order]
    del items
    joined = np.concatenate(ew)
    del ew
    weights = joined[order]
    del joined
    kernel_edges = np.flatnonzero((order >= first_kernel_edge)
                                  & (order < first_kernel_edge + kern.size))
    del order
    # a start with no known cause stays where it was
    loose = np.flatnonzero((np.bincount(edst, minlength=n_items)[:n_loc] == 0) & (c[:n_loc] == NEG))
    c[loose] = g.s[nodes[loose]]
    return StepGraph(
        nodes=nodes, n_own=n_own, inst=insts, c=c, estart=estart, edst=edst, ew=weights,
        kernel_edges=kernel_edges,
        kernel_nodes=own_nodes[kern], inst_items=2 * n_loc + np.arange(insts.size),
        base_d=base_d, base_t=np.asarray(g.inst_t[_first_member(g, insts)],
                                                dtype=np.int64),
        hint=np.concatenate([g.s[nodes], g.e[nodes],
                             g.e[_first_member(g, insts)]]).astype(np.int64))


EDGE_CHUNK = 1 << 18  # edges handled together while a step graph is built


def _chunks(n: int) -> list[slice]:
    """Slices of EDGE_CHUNK items covering 0..n-1; one empty slice when n is 0, so that
    what is gathered over the chunks has its type even without edges."""
    return [slice(lo, min(lo + EDGE_CHUNK, n)) for lo in range(0, max(n, 1), EDGE_CHUNK)]


def _edges_into_starts(g: Graph, edges: Edges, sl: slice,
                       arrays: tuple[I64, I64, I64, I64, I64],
                       n_loc: int) -> tuple[I64, I64, I64]:
    """The edges of chunk `sl` into the starts of the step graph's nodes: those from a
    node of the step as (source item, start item, weight); those from outside (and the
    launches: the CPU floor after a wait) raise the start's constant in c, in place.
    arrays: pos (item of each node, -1: none), loc (own node's position, -1: none),
    delay, wait (the CPU wait before each node's launch), c."""
    pos, loc, delay, wait, c = arrays
    take = sl.start + np.flatnonzero(pos[edges.dst[sl]] >= 0)
    dst, kind, t = edges.dst[take], edges.ekind[take], edges.t[take]
    lag = np.where(edges.binding[take], g.s[dst] - t, np.minimum(0, g.s[dst] - t))
    lag = np.where(np.isin(kind, (LAUNCH_EDGE, SYNC)), delay[dst], lag)
    sync = kind == SYNC
    src = edges.src[take]
    del take
    inside = (src >= 0) & (loc[np.maximum(src, 0)] >= 0)
    floor = np.where(kind == LAUNCH_EDGE, t - wait[dst], t) + lag
    del t, kind
    outside = ~inside
    np.maximum.at(c, pos[dst[outside]], floor[outside])  # start items are 0..n_loc-1
    del floor, outside
    w = np.where(sync, g.launch_s[dst] - g.e[np.maximum(src, 0)], 0) + lag
    return n_loc + loc[src[inside]], pos[dst[inside]], w[inside]


def _first_member(g: Graph, insts: I64) -> I64:
    """One member node of each instance (they share inst_t)."""
    members = np.flatnonzero(g.inst >= 0)
    first = np.full(int(g.inst.max()) + 1 if g.n else 1, 0, dtype=np.int64)
    first[g.inst[members[::-1]]] = members[::-1]
    return first[insts]


def evaluate(n: int, c: I64, d: I64, src: I64, dst: I64, w: I64,
             hint: I64 | None = None) -> tuple[I64, int]:
    """value(x) = d[x] + max(c[x], max over edges src->x of value(src) + w), for every
    item, level by level (Kahn). A cycle (only inconsistent matches make one: observed
    times are causal) stalls it; with `hint` (each item's observed time) the earliest
    stuck item is then taken with the inputs known so far, and the count of such breaks
    is returned; without, the items on cycles stay NEG."""
    order = np.argsort(src, kind="stable")
    start = np.searchsorted(src[order], np.arange(n + 1))
    return evaluate_sorted(c, d, start, dst[order], w[order], hint)


def evaluate_sorted(c: I64, d: I64, start: INT, dst: INT, w: I64,
                    hint: I64 | None = None) -> tuple[I64, int]:
    """evaluate() over edges already ordered by source: those out of item x are
    dst[start[x]:start[x + 1]], weights w (no copy of the edges is made)."""
    n = c.size
    indeg = np.bincount(dst, minlength=n)
    best = c.copy()
    value = np.full(n, NEG, dtype=np.int64)
    done = np.zeros(n, dtype=bool)
    frontier = np.flatnonzero(indeg == 0)
    breaks = 0
    while True:
        if frontier.size == 0:
            stuck = np.flatnonzero(~done)
            if stuck.size == 0 or hint is None:
                break
            frontier = stuck[[int(np.argmin(hint[stuck]))]]
            breaks += 1
        v = np.maximum(best[frontier], NEG) + d[frontier]
        value[frontier] = v
        done[frontier] = True
        first, count = start[frontier], start[frontier + 1] - start[frontier]
        total = int(count.sum())
        idx = np.repeat(first - np.cumsum(count) + count, count) + np.arange(total)
        to = dst[idx]
        np.maximum.at(best, to, np.repeat(v, count) + w[idx])
        np.subtract.at(indeg, to, 1)
        touched = np.unique(to)
        frontier = touched[(indeg[touched] == 0) & ~done[touched]]
    return value, breaks


def run_step(sg: StepGraph, scale: Scaling | None) -> tuple[I64, int]:
    """Every item's value with the what-if applied (None: the observed durations), and
    how many dependency cycles had to be broken."""
    ew = sg.ew
    d = np.zeros(sg.c.size, dtype=np.int64)
    if scale is None:
        d[sg.inst_items] = sg.base_t
    else:
        ew = ew.copy()
        ew[sg.kernel_edges] = np.rint(sg.base_d * scale.node[sg.kernel_nodes]).astype(np.int64)
        d[sg.inst_items] = np.rint(sg.base_t * scale.inst[sg.inst]).astype(np.int64)
    return evaluate_sorted(sg.c, d, sg.estart, sg.edst, ew, sg.hint)


def window_times(g: Graph, sg: StepGraph, values: I64) -> tuple[I64, I64]:
    """Every window's new start and end, aligned with g's window arrays: the first start
    of its rank's ops of its step; the start of the next step's first op, or the last end
    of the step's ops when there is no next step. -1 for a window outside the graph."""
    n_loc = sg.nodes.size
    own = sg.nodes[:sg.n_own]
    starts, ends = values[:n_loc], values[n_loc:2 * n_loc]
    win = _window_of(g, own)
    hit = win >= 0
    ws = np.full(g.w_rank.size, np.iinfo(np.int64).max, dtype=np.int64)
    last = np.full(g.w_rank.size, NEG, dtype=np.int64)
    np.minimum.at(ws, win[hit], starts[:sg.n_own][hit])
    np.maximum.at(last, win[hit], ends[:sg.n_own][hit])
    pos = np.full(g.n, -1, dtype=np.int64)
    pos[sg.nodes] = np.arange(n_loc)
    probe = g.w_probe
    at = pos[np.maximum(probe, 0)]
    succ = g.w_succ & (probe >= 0) & (at >= 0)
    we = np.where(succ, starts[np.maximum(at, 0)], last)
    bad = (ws == np.iinfo(np.int64).max) | (we <= NEG)
    return np.where(bad, -1, ws), np.where(bad, -1, we)


def _window_of(g: Graph, nodes: I64) -> I64:
    """The index (in g's window arrays) of the window of each of `nodes` (its rank and
    step), -1 for none. Ranks and steps are coded densely over the windows' own, so the
    lookup table is windows' ranks x steps whatever numbers a trace claims (a rank
    2**31 - 2 made a table of 2**31 ranks: 16 GiB)."""
    ranks, steps = np.unique(g.w_rank), np.unique(g.w_step)
    if ranks.size == 0 or nodes.size == 0:
        return np.full(nodes.size, -1, dtype=np.int64)
    table = np.full(ranks.size * steps.size, -1, dtype=np.int64)
    table[np.searchsorted(ranks, g.w_rank) * steps.size
          + np.searchsorted(steps, g.w_step)] = np.arange(g.w_rank.size)
    r = np.minimum(np.searchsorted(ranks, g.rank[nodes]), ranks.size - 1)
    step = np.maximum(g.step[nodes], 0)  # launched outside any step: as step 0
    k = np.minimum(np.searchsorted(steps, step), steps.size - 1)
    known = (ranks[r] == g.rank[nodes]) & (steps[k] == step)
    return np.where(known, table[r * steps.size + k], -1)


# ------------------------------------------------------------------ what-if specs
COMPUTE_CATS = (COMPUTE, RECOMPUTE)


@dataclass(frozen=True)
class WhatIf:
    """What to make faster: ranks' GPU compute, the kernels of an op kind (a kernel or
    launching CPU op name containing `op`), or a collective (`all_reduce`, or
    `all_reduce:GROUP` with GROUP in the process group's name or description); by
    `speedup` x, or (ranks only) to the median rank's speed, kernel by kernel."""
    ranks: tuple[int, ...] = ()
    op: str | None = None
    collective: str | None = None
    speedup: float | None = None  # None: the median speed (ranks only)

    @property
    def kind(self) -> Literal["rank", "op", "collective"]:
        return "rank" if self.ranks else "op" if self.op is not None else "collective"

    @property
    def target(self) -> str:
        if self.ranks:
            return ",".join(map(str, self.ranks))
        return str(self.op if self.op is not None else self.collective)

    @property
    def how(self) -> str:
        """The factor in words: a speedup under 1 is a slowdown ('0.5' is '2x slower')."""
        k = self.speedup
        if k is None:
            return "at the median speed"
        if k < 1:
            return f"{1 / k:.3g}x slower"
        return f"{k:.3g}x faster" if k > 1 else "at the measured speed (1x)"

    @property
    def label(self) -> str:
        how = self.how
        if self.ranks:
            who = "rank" if len(self.ranks) == 1 else "ranks"
            return f"{who} {self.target} ran {how}"
        if self.op is not None:
            return f"the kernels matching '{self.op}' ran {how}"
        return f"{self.collective} ran {how}"


def _contains(values: npt.NDArray[np.object_], pattern: str) -> npt.NDArray[np.bool_]:
    """Which of `values` (a dictionary: each distinct name once) contain `pattern`,
    case-insensitively; None contains only the empty pattern."""
    text = np.char.lower(np.asarray([str(v) if v is not None else "" for v in values],
                                    dtype=str))
    return np.asarray(np.char.find(text, pattern.lower()) >= 0, dtype=bool)


def _median_speed(g: Graph, rank: int, kernels: npt.NDArray[np.bool_], factor: F64) -> F64:
    """Set, per node of `rank`, the factor that brings each of its kernels to the median
    over ranks of the mean duration of that kernel name."""
    idx = np.flatnonzero(kernels)
    names, code = np.unique(g.name_code[idx], return_inverse=True)
    ranks, rcode = np.unique(g.rank[idx], return_inverse=True)
    key = code * ranks.size + rcode
    total = np.bincount(key, weights=(g.e - g.s)[idx], minlength=names.size * ranks.size)
    count = np.bincount(key, minlength=names.size * ranks.size)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (total / count).reshape(names.size, ranks.size)
    typical = np.nanmedian(np.where(count.reshape(mean.shape) > 0, mean, np.nan), axis=1)
    mine = np.searchsorted(ranks, rank)
    if mine >= ranks.size or ranks[mine] != rank:
        return factor
    own = idx[g.rank[idx] == rank]
    ratio = typical[code[g.rank[idx] == rank]] / mean[code[g.rank[idx] == rank], mine]
    factor[own] = np.where(np.isfinite(ratio), ratio, 1.0)
    return factor


def scaling(g: Graph, spec: WhatIf) -> Scaling:
    """The duration multipliers of a what-if."""
    node = np.ones(g.n)
    inst = np.ones(int(g.inst.max()) + 1 if g.n else 1)
    k = 1.0 / spec.speedup if spec.speedup else 1.0
    kernels = (g.kind == KERNEL) & np.isin(g.cat, COMPUTE_CATS)
    if spec.ranks:
        for rank in spec.ranks:  # the ranks asked for, not events
            if spec.speedup is None:
                _median_speed(g, rank, kernels, node)
            else:
                node[kernels & (g.rank == rank)] = k
    elif spec.op is not None:
        # matched on the dictionaries, then spread to the nodes by their codes
        hit = (g.kind == KERNEL) & (_contains(g.names, spec.op)[g.name_code]
                                    | _contains(g.ops, spec.op)[g.op_code])
        node[hit] = k
    elif spec.collective is not None:
        name, _, group = spec.collective.partition(":")
        hit = (g.kind != KERNEL) & (g.names == name)[g.name_code]
        if group:
            hit &= _contains(g.ops, group)[g.op_code]
        inst[g.inst[hit & (g.inst >= 0)]] = k
        node[hit & (g.inst < 0)] = k  # calls matched to no other rank: their own duration
    return Scaling(node=node, inst=inst)
