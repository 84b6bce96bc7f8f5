"""What-if: a step's time recomputed on its dependency graph with some ops faster
(docs/critical_path.md, "What-if").

Every start becomes the latest of what it depends on (max-plus): its launch call, the
previous op on its stream, the communication it waits for (issue, consume, inferred
waits), each with the gap observed when that dependency set the start and none
otherwise; a kernel ends its duration later; a collective or send/recv ends the transfer
time (the last member's duration) after its last member arrives. Arrivals are compared
through the instance's observed end, which every member saw at the same instant, so no
clock needs aligning. The launch calls of a rank are a chain too (cpu_calls): the host's
own work between them keeps its length, and what it waited for (a sync's GPU op, the op
that freed a full launch queue) moves them, so a CPU paced by the GPU moves with it.
With no change the evaluation reproduces every observed time exactly.

The graph of a step is evaluated level by level in topological order (Kahn): each round
handles, vectorized, every item whose inputs are known; the rounds are as many as the
longest chain of dependencies in items, the work linear in nodes and edges.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from stepscope.analyzers.critical_path.graph import (
    BOOL,
    COMPUTE,
    GAP_MIN_NS,
    I32,
    I64,
    KERNEL,
    LAUNCH_EDGE,
    LAUNCH_TOL_NS,
    NEG,
    NONE,
    RECOMPUTE,
    STREAM,
    SYNC,
    SYNC_TOL_NS,
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
    observed when it did, else the median of its rank's launch-bound starts (0 if none)
    that started within LAUNCH_TOL_NS of their call's return (one that started later
    waited for something the trace does not record, docs/critical_path.md: a GPU still
    busy with work before the trace made that median milliseconds)."""
    delay = np.where(g.launch_s > NEG, g.s - g.launch_s, 0)
    b = np.flatnonzero(edges.binding & np.isin(edges.ekind, (LAUNCH_EDGE, SYNC)))
    bound = edges.dst[b]
    # per rank present (a dense code: a trace may claim any rank number, 2**31 - 2 too)
    ranks, rank_code = np.unique(g.rank, return_inverse=True)
    typical = np.zeros(max(ranks.size, 1), dtype=np.int64)
    quick = bound[g.s[bound] - np.maximum(g.launch_s[bound], g.launch_e[bound])
                  <= LAUNCH_TOL_NS]
    if quick.size:  # the median per rank, by sorting
        r, dl = rank_code[quick], delay[quick]
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
    es, ed, ew = [], [], []
    pred = stream_predecessors(g, edges)
    for sl in _chunks(edges.dst.size):
        src, dst, w = _edges_into_starts(g, edges, sl, (pos, loc, c), n_loc, pred)
        es.append(src)
        ed.append(dst)
        ew.append(w)
    # the host: each rank's launch calls as a chain (cpu_calls), after the instances
    calls = cpu_calls(g, edges, nodes, (pos, loc, delay), 2 * n_loc + insts.size)
    c = np.concatenate([c, calls.c])
    n_items = c.size
    es, ed, ew = ([np.concatenate([*es, calls.src])], [np.concatenate([*ed, calls.dst])],
                  [np.concatenate([*ew, calls.w])])
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
        hint=np.concatenate([g.s[nodes], g.e[nodes], g.e[_first_member(g, insts)],
                             calls.cs, calls.ce]).astype(np.int64))


EDGE_CHUNK = 1 << 18  # edges handled together while a step graph is built


def _chunks(n: int) -> list[slice]:
    """Slices of EDGE_CHUNK items covering 0..n-1; one empty slice when n is 0, so that
    what is gathered over the chunks has its type even without edges."""
    return [slice(lo, min(lo + EDGE_CHUNK, n)) for lo in range(0, max(n, 1), EDGE_CHUNK)]


def _edges_into_starts(g: Graph, edges: Edges, sl: slice, arrays: tuple[I64, I64, I64],
                       n_loc: int, pred: I64) -> tuple[I64, I64, I64]:
    """The GPU edges of chunk `sl` into the starts of the step graph's nodes (the launches
    and CPU waits are the host chain's, cpu_calls): those from a node of the step as
    (source item, start item, weight); those from outside raise the start's constant in
    c, in place. arrays: pos (item of each node, -1: none), loc (own node's position,
    -1: none), c."""
    pos, loc, c = arrays
    take = sl.start + np.flatnonzero((pos[edges.dst[sl]] >= 0)
                                     & ~np.isin(edges.ekind[sl], (LAUNCH_EDGE, SYNC)))
    dst, t = edges.dst[take], edges.t[take]
    src, after, branch = parallel_branches(g, edges, take, pred)
    binding = edges.binding[take]
    del take
    t = np.where(after, g.e[np.maximum(src, 0)], np.where(branch, g.s[np.maximum(src, 0)], t))
    lag = np.where(binding, g.s[dst] - t, np.minimum(0, g.s[dst] - t))
    inside = (src >= 0) & (loc[np.maximum(src, 0)] >= 0)
    floor = t + lag
    del t
    outside = ~inside
    np.maximum.at(c, pos[dst[outside]], floor[outside])  # start items are 0..n_loc-1
    del floor, outside
    # from the source's end item, or its start item for a parallel branch
    src_item = np.where(branch[inside], 0, n_loc) + loc[src[inside]]
    return src_item, pos[dst[inside]], lag[inside]


BRANCH_WALK = 64  # ops a parallel branch's start looks back on its stream (below)


def stream_predecessors(g: Graph, edges: Edges) -> I64:
    """Per node, the previous node on its stream (-1: none)."""
    pred = np.full(g.n, NONE, dtype=np.int64)
    m = edges.ekind == STREAM
    pred[edges.dst[m]] = edges.src[m]
    return pred


def parallel_branches(g: Graph, edges: Edges, take: I64,
                      pred: I64) -> tuple[I64, BOOL, BOOL]:
    """The sources of the edges `take`, with the stream edges that join two branches of
    a graph replay the trace shows on one stream (the previous op ended after the op
    started, which stream order forbids: docs/critical_path.md, "What-if") moved to what
    the op waited for: the nearest earlier op on the stream that had ended by its start
    (`after`: the edge runs from its end), else the previous op's start (`branch`: both
    were released together). So a longer or shorter parallel branch moves nothing on
    the other, and a faster op still moves the op after it on its own branch."""
    src, dst = edges.src[take].astype(np.int64), edges.dst[take]
    over = (edges.ekind[take] == STREAM) & (src >= 0) & (g.e[np.maximum(src, 0)] > g.s[dst])
    cand, todo = src.copy(), over.copy()
    for _ in range(BRANCH_WALK):
        i = np.flatnonzero(todo)
        if i.size == 0:
            break
        cand[i] = pred[cand[i]]
        todo[i] = (cand[i] >= 0) & (g.e[np.maximum(cand[i], 0)] > g.s[dst[i]])
    after = over & ~todo & (cand >= 0)
    return np.where(after, cand, src), after, over & ~after


# A launch call this much longer than its rank's quickest waited for the GPU (a full launch
# queue), when a GPU op of its rank launched before it started or ended at most
# BLOCK_TOL_NS before the call returned: that op freed the queue (docs/critical_path.md).
BLOCK_MIN_NS = GAP_MIN_NS
BLOCK_TOL_NS = SYNC_TOL_NS


@dataclass(frozen=True)
class Calls:
    """The host's launch calls in the step graph: items base..base+n-1 are the calls'
    starts, the next n their ends, with observed times cs, ce; constants c (NEG: none)
    and the edges src -> dst, weight w, into and out of them."""
    cs: I64
    ce: I64
    c: I64
    src: I64
    dst: I64
    w: I64


def cpu_calls(g: Graph, edges: Edges, nodes: I64, arrays: tuple[I64, I64, I64],
              base: int) -> Calls:
    """Each rank's launch calls as a chain (docs/critical_path.md, "What-if"): a call
    starts the observed host time after the previous one returned, less a CPU wait
    between them, and no earlier than the observed time after the GPU op that wait
    waited for; it returns its own duration after it starts, and a call that waited
    for a full launch queue no earlier than observed after the GPU op that freed it; a
    GPU op starts no earlier than its launch delay after its call. So a CPU paced by the
    GPU (syncs, a full queue) moves with the GPU, and only its own work stays as it was.
    arrays: pos (item of each node, -1: none), loc (own node's position, -1: none),
    delay (launch_latency)."""
    pos, loc, delay = arrays
    local = np.flatnonzero(g.launch_s[nodes] > NEG)  # start items of launched nodes
    if local.size == 0:
        none = np.zeros(0, dtype=np.int64)
        return Calls(cs=none, ce=none, c=none, src=none, dst=none, w=none)
    x = nodes[local]
    order = np.lexsort((x, g.launch_s[x], g.rank[x]))
    local, x = local[order], x[order]
    new = np.r_[True, (g.rank[x][1:] != g.rank[x][:-1])
                | (g.launch_s[x][1:] != g.launch_s[x][:-1])]
    call = np.cumsum(new) - 1
    head = x[new]
    n = int(head.size)
    rank, cs = g.rank[head], g.launch_s[head]
    ce = np.maximum(g.launch_e[head], cs)
    first = np.r_[True, rank[1:] != rank[:-1]] if n else np.zeros(0, dtype=bool)
    src, wait = _cpu_waits(g, edges, head)
    fresh = (src >= 0) & (first | (src != np.r_[NONE, src[:-1]]))  # a wait before it
    waited = np.where(fresh, wait, 0)
    start, end = base + np.arange(n), base + n + np.arange(n)
    c = np.full(2 * n, NEG, dtype=np.int64)
    c[:n][first] = (cs - waited)[first]
    j = np.flatnonzero(~first)
    es, ed, ew = [end[j - 1]], [start[j]], [cs[j] - ce[j - 1] - waited[j]]
    k = np.flatnonzero(fresh)
    y = src[k]
    inside = loc[y] >= 0
    es.append(len(nodes) + loc[y[inside]])
    ed.append(start[k[inside]])
    ew.append(cs[k[inside]] - g.e[y[inside]])
    out = k[~inside]
    c[out] = np.maximum(c[out], cs[out])
    dur = ce - cs
    quick = _rank_min(rank, dur)  # a call that did not wait (a full queue may last)
    blocked = dur >= quick + BLOCK_MIN_NS
    es.append(start)
    ed.append(end)
    ew.append(np.where(blocked, quick, dur))
    b = np.flatnonzero(blocked)
    item, t = _blockers(g, (pos, loc), len(nodes), rank[b], cs[b], ce[b])
    known = item >= 0
    es.append(item[known])
    ed.append(end[b[known]])
    ew.append(ce[b[known]] - t[known])
    c[n + b[~known]] = ce[b[~known]]
    es.append(end[call])
    ed.append(local)
    ew.append(delay[x] - dur[call])
    return Calls(cs=cs, ce=ce, c=c, src=np.concatenate(es).astype(np.int64),
                 dst=np.concatenate(ed).astype(np.int64), w=np.concatenate(ew).astype(np.int64))


def _cpu_waits(g: Graph, edges: Edges, head: I64) -> tuple[I64, I64]:
    """Per launch call (its first node `head`): the GPU op the CPU last waited for before
    it (the sync edge's source, -1: none) and how long it waited."""
    src = np.full(g.n, NONE, dtype=np.int64)
    wait = np.zeros(g.n, dtype=np.int64)
    for sl in _chunks(edges.dst.size):
        sync = sl.start + np.flatnonzero(edges.ekind[sl] == SYNC)
        src[edges.dst[sync]] = edges.src[sync]
        wait[edges.dst[sync]] = edges.wait[sync]
    return src[head], wait[head]


def _rank_min(rank: I64, values: I64) -> I64:
    """Per item, the least of `values` over the items of its rank (`rank` sorted)."""
    if rank.size == 0:
        return np.zeros(0, dtype=np.int64)
    first = np.flatnonzero(np.r_[True, rank[1:] != rank[:-1]])
    count = np.diff(np.r_[first, rank.size])
    return np.repeat(np.minimum.reduceat(values, first), count)


def _blockers(g: Graph, arrays: tuple[I64, I64], n_loc: int, rank: I64, cs: I64,
              ce: I64) -> tuple[I64, I64]:
    """For each blocked call (rank, start cs, return ce): the item of the GPU event that
    freed the queue (the latest start or end of an op of its rank launched before the
    call, during the call and at most BLOCK_TOL_NS before its return; a start on a tie)
    and its time; item -1 when there is none or it lies outside the step graph."""
    pos, loc = arrays
    item = np.full(rank.size, NONE, dtype=np.int64)
    t = np.zeros(rank.size, dtype=np.int64)
    if rank.size == 0:
        return item, t
    node = np.r_[np.arange(g.n), np.arange(g.n)]
    at = np.r_[g.s, g.e]
    is_start = np.r_[np.ones(g.n, dtype=bool), np.zeros(g.n, dtype=bool)]
    ranks, code = np.unique(g.rank, return_inverse=True)
    lo = int(at.min())
    span = int(at.max()) - lo + 1
    key = code[node] * span + (at - lo)
    order = np.lexsort((is_start, key))
    key, node, at, is_start = key[order], node[order], at[order], is_start[order]
    mine = np.searchsorted(ranks, rank)
    q = mine * span + np.clip(ce - lo, -1, span - 1)
    hit = np.searchsorted(key, q, side="right") - 1
    ok = hit >= 0
    hit = np.maximum(hit, 0)
    ev, et = node[hit], at[hit]
    ok &= (g.rank[ev] == rank) & (et >= cs) & (ce - et <= BLOCK_TOL_NS) \
        & (g.launch_s[ev] < cs)
    as_item = np.where(is_start[hit], pos[ev], np.where(loc[ev] >= 0, n_loc + loc[ev], NONE))
    ok &= as_item >= 0
    item[ok], t[ok] = as_item[ok], et[ok]
    return item, t


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


def _median_speed(g: Graph, rank: int, kernels: npt.NDArray[np.bool_], factor: F64,
                  peers: Mapping[int, int] | None = None) -> F64:
    """Set, per node of `rank`, the factor that brings each of its kernels to the median
    over its peers (the other ranks of its group in `peers`, rank -> group, the
    pipeline stage; without, or for a name no peer runs, every other rank) of the mean
    duration of that kernel name.
    The ranks of another pipeline stage run the same kernel names on other shapes: a
    median over every rank would take a wider stage's speed for the typical one."""
    idx = np.flatnonzero(kernels)
    names, code = np.unique(g.name_code[idx], return_inverse=True)
    ranks, rcode = np.unique(g.rank[idx], return_inverse=True)
    key = code * ranks.size + rcode
    total = np.bincount(key, weights=(g.e - g.s)[idx], minlength=names.size * ranks.size)
    count = np.bincount(key, minlength=names.size * ranks.size)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (total / count).reshape(names.size, ranks.size)
    mean = np.where(count.reshape(mean.shape) > 0, mean, np.nan)
    mine = np.searchsorted(ranks, rank)
    if mine >= ranks.size or ranks[mine] != rank:
        return factor
    others = ranks != rank
    known = peers or {}
    group = np.asarray([known.get(int(r), NONE) for r in ranks],  # the ranks, not events
                       dtype=np.int64)
    same = others & (group == group[mine]) & (group[mine] >= 0)
    typical = _nanmedian(mean[:, same])
    typical = np.where(np.isnan(typical), _nanmedian(mean[:, others]), typical)
    own = idx[g.rank[idx] == rank]
    ratio = typical[code[g.rank[idx] == rank]] / mean[code[g.rank[idx] == rank], mine]
    factor[own] = np.where(np.isfinite(ratio), ratio, 1.0)
    return factor


def _nanmedian(values: F64) -> F64:
    """The median of each row over its known values; NaN for a row with none."""
    out = np.full(values.shape[0], np.nan)
    known = (~np.isnan(values)).any(axis=1)
    if known.any():
        out[known] = np.nanmedian(values[known], axis=1)
    return out


def scaling(g: Graph, spec: WhatIf, peers: Mapping[int, int] | None = None) -> Scaling:
    """The duration multipliers of a what-if; `peers` groups the ranks a rank at the
    median speed is compared with (_median_speed)."""
    node = np.ones(g.n)
    inst = np.ones(int(g.inst.max()) + 1 if g.n else 1)
    k = 1.0 / spec.speedup if spec.speedup else 1.0
    kernels = (g.kind == KERNEL) & np.isin(g.cat, COMPUTE_CATS)
    if spec.ranks:
        for rank in spec.ranks:  # the ranks asked for, not events
            if spec.speedup is None:
                _median_speed(g, rank, kernels, node, peers)
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
