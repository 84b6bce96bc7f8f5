"""The critical path of one step as segments (docs/critical_path.md).

Items: node x's end is item x, its start item n + x. The end of a kernel follows from its
start (its own interval); the end of a collective or send/recv from the start of the
member that arrived last (the transfer after it arrived, on that member's rank: here the
path jumps to the rank it waited for); a start from the end of what set it (its binding
edge) or from nothing (a launch with no CPU wait before it, or no known cause). The chain
of items from the end of the reference rank's window back to its start is the path; each
segment is timed on its own rank's clock, and a jump at a collective carries the offset
between the two ranks' clocks (members end at the same instant), so the segments tile the
window exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stepscope.analyzers.critical_path.graph import (
    BOOL,
    CATEGORY_NAMES,
    CPU,
    GPU_EDGES,
    I8,
    I64,
    IDLE,
    KERNEL,
    LAUNCH,
    LAUNCH_EDGE,
    LAUNCH_TOL_NS,
    MISSING,
    NEG,
    NONE,
    OBJ,
    STREAM,
    SYNC,
    Causes,
    Graph,
    chain,
)


@dataclass(frozen=True)
class Path:
    """One step's path, latest segment first: rank, category, label, node (-1 for host,
    launch and idle time), start and end on the reference rank's clock."""
    step: int
    reference_rank: int
    ws: int
    we: int
    rank: I64
    cat: OBJ
    label: OBJ
    node: I64
    s: I64
    e: I64
    off: I64 | None = None  # per segment, its rank's clock minus the reference rank's

    @property
    def length_ns(self) -> int:
        return int((self.e - self.s).sum())


def overlapped(g: Graph, why: Causes) -> BOOL:
    """Per node: its start was set by the previous op on its stream, which ended after
    it started. The trace's stream of a graph replay's kernels can run them at once
    (a CUDA graph's parallel branches; 31 such kernels on HTA's trace_diff/test): the
    previous one did not set the start, both were released together. Its start then
    follows the previous op's start, so the path never counts the overlap twice."""
    src = np.maximum(why.src, 0)
    along: BOOL = (why.kind == STREAM) & (why.src >= 0) & (g.e[src] > g.s)
    return along


def parents(g: Graph, why: Causes) -> I64:
    """The item graph's parent pointers (see the module docstring)."""
    n = g.n
    node = np.arange(n)
    end_parent = n + np.where(g.inst >= 0, np.where(why.last >= 0, why.last, node), node)
    start_parent = np.where(overlapped(g, why), n + why.src, why.src)
    return np.concatenate([end_parent, start_parent])


def reference(g: Graph, step: int) -> int | None:
    """Index (in the window arrays) of the step's reference window: the longest, lowest
    rank on a tie; None when the step has no window with a known end node."""
    idx = np.flatnonzero((g.w_step == step) & (g.w_probe >= 0))
    if idx.size == 0:
        return None
    order = np.lexsort((g.w_rank[idx], -(g.w_we[idx] - g.w_ws[idx])))
    return int(idx[order[0]])


def _labels(g: Graph, nodes: I64) -> OBJ:
    """A node's label: the kernel name, or `collective (group)` for communication (only
    `collective` for one of no process group, as DeepEP's: never `all_to_all (?)`)."""
    names = g.name_of(nodes).astype(str)
    groups = g.op_of(nodes)
    comm = g.kind[nodes] != KERNEL
    out = names.astype(object)
    out[comm] = [f"{nm} ({gr})" if gr and gr != MISSING else str(nm)
                 for nm, gr in zip(names[comm], groups[comm], strict=True)]
    return out


def _segments(g: Graph, why: Causes, items: I64) -> tuple[I64, I8, I64, I64, I64, I64]:
    """Per chain element up to three segments (rank, category code, node, s, e, clock
    delta), in walk order (see the module docstring)."""
    n = g.n
    is_end = items < n
    x = np.where(is_end, items, items - n)
    member = is_end & (g.inst[x] >= 0)
    shown = np.where(member, np.where(why.last[x] >= 0, why.last[x], x), x)
    delta = np.where(member, g.e[x] - g.e[shown], 0)
    kind = why.kind[x]
    cpu_wait = (~is_end) & np.isin(kind, (SYNC, LAUNCH_EDGE))
    gpu_gap = (~is_end) & np.isin(kind, GPU_EDGES)
    # a start alongside the previous op on its stream: that op's run up to the start
    along = (~is_end) & overlapped(g, why)[x]
    prev = np.maximum(why.src[x], 0)
    # a start that waited for its launch: the launch is the call and LAUNCH_TOL after its
    # start (or its return, when later); what the start waited beyond that is idle
    lead = np.minimum(g.s[x], np.maximum(g.launch_s[x] + LAUNCH_TOL_NS, g.launch_e[x]))
    # slot 0: the busy interval (end items), the GPU gap, or the wait after the launch
    s0 = np.where(is_end, g.s[shown], np.where(cpu_wait, lead,
                                               np.where(along, g.s[prev],
                                                        np.where(gpu_gap, why.t[x], NEG))))
    e0 = np.where(is_end, g.e[shown], g.s[x])
    c0 = np.where(is_end, g.cat[shown], np.where(along, g.cat[prev], IDLE)).astype(np.int8)
    n0 = np.where(is_end, shown, np.where(along, prev, NONE))
    # slot 1: the launch; slot 2: the host before it (from the GPU op the CPU waited
    # for, else open)
    src_e = np.where(why.src[x] >= 0, g.e[np.maximum(why.src[x], 0)], NEG)
    s2 = np.where(kind == SYNC, src_e, NEG)
    per = 3
    rank = np.column_stack([g.rank[shown], g.rank[x], g.rank[x]]).ravel()
    cat = np.column_stack([c0, np.full(x.size, LAUNCH, dtype=np.int8),
                           np.full(x.size, CPU, dtype=np.int8)]).ravel()
    node = np.column_stack([n0, np.full(x.size, NONE), np.full(x.size, NONE)]).ravel()
    s = np.column_stack([s0, g.launch_s[x], s2]).ravel()
    e = np.column_stack([e0, lead, g.launch_s[x]]).ravel()
    valid = np.column_stack([~cpu_wait | (lead < g.s[x]), cpu_wait, cpu_wait]).ravel()
    off = np.repeat(np.cumsum(delta), per)
    return (rank[valid], cat[valid], node[valid], (s + np.where(s > NEG, off, 0))[valid],
            (e + off)[valid], off[valid])


def step_path(g: Graph, why: Causes, parent: I64, step: int) -> Path | None:
    """The path of `step` on its reference rank, or None when no window of it ends at a
    known node."""
    w = reference(g, step)
    if w is None:
        return None
    probe, ws, we = int(g.w_probe[w]), int(g.w_ws[w]), int(g.w_we[w])
    start = g.n + probe if bool(g.w_succ[w]) else probe
    items = chain(parent, start)
    rank, code, node, s, e, off = _segments(g, why, items)
    cat = CATEGORY_NAMES[code]  # the path's own segments only
    # clip at the window start: the first segment reaching it is cut there, later ones go
    reach = np.flatnonzero(s <= ws)
    keep = int(reach[0]) + 1 if reach.size else s.size
    s, e = np.maximum(s[:keep], ws), np.minimum(e[:keep], we)
    rank, cat, node, off = rank[:keep], cat[:keep], node[:keep], off[:keep]
    real: BOOL = e > s
    labels = np.full(node.size, None, dtype=object)
    has = node >= 0
    labels[has] = _labels(g, node[has])
    labels[~has] = cat[~has]
    return Path(step=step, reference_rank=int(g.w_rank[w]), ws=ws, we=we,
                rank=rank[real], cat=cat[real], label=labels[real], node=node[real],
                s=s[real], e=e[real], off=off[real])
