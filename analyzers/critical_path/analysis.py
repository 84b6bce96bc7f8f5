"""The report's critical-path section and the what-if (docs/critical_path.md).

`Analysis` holds one run's dependency graph (graph.py beside this module): the path of
each complete step (path.py) and what-if recomputations of every step on its graph
(whatif.py). `critical_path_section` builds the typed section, with the what-ifs the
advisor uses: each straggler at the median speed, the slowest pipeline stage at the
median stage's speed, and the op and the collective with most time on the path 2x
faster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from statistics import median

import duckdb
import numpy as np

from stepscope.analyzers._sql import run_script, sql
from stepscope.analyzers.context import RunContext, no_gpu_timeline
from stepscope.analyzers.critical_path.graph import (
    KERNEL,
    LAUNCH_EDGE,
    LAUNCH_TOL_NS,
    MISSING,
    NEG,
    PATH_CATEGORIES,
    POLL_MIN_NS,
    SYNC_TOL_NS,
    XS_TOL_NS,
    Causes,
    Graph,
    causes,
    load,
)
from stepscope.analyzers.critical_path.path import Path, parents, step_path
from stepscope.analyzers.critical_path.whatif import (
    StepGraph,
    WhatIf,
    launch_latency,
    run_step,
    scaling,
    step_graph,
    window_times,
)
from stepscope.analyzers.parallel.pipeline import PipelineTopology, topology
from stepscope.analyzers.results import (
    CriticalPath,
    PathOp,
    PathRun,
    PathShare,
    StepPath,
    Straggler,
    WhatIfResult,
)
from stepscope.ingest.errors import UsageError

MAX_RUNS = 200         # runs of one step kept in the report (the rest counted)
TOP_OPS = 10
TOP_RANKS = 8
MAX_STRAGGLER_WHATIFS = 4
MIN_STAGE_IMBALANCE = 1.05  # slowest stage's compute over the median stage's
REPLAY_TOL_NS = 1_000  # a window the unchanged graph gives back this close is reproduced
# the default what-ifs whose target has time on the path by construction
ON_PATH_REASONS = ("top_op", "top_collective")
LABELS = {"cpu": "host (CPU before a launch)", "launch": "kernel launch",
          "idle": "idle (waiting)"}


class Analysis:
    """One run's graph, the path of each complete step, and what-ifs on it. The graph's
    edges are read once, into what set each start (the paths) and the what-if's max-plus
    graph, and not kept: on a large job they are the largest part (docs/scale.md,
    "Memory")."""

    def __init__(self, con: duckdb.DuckDBPyConnection, run: str,
                 stage_of: Mapping[int, int] | None = None) -> None:
        g, edges = load(con, run)
        # a rank at the median speed is compared with the ranks of its pipeline stage
        self.peers = stage_of
        self.g: Graph = g
        self.delay = launch_latency(g, edges)
        self.steps: tuple[int, ...] = tuple(sorted({int(k) for k in g.w_step}))
        # every complete step together (a faster step k-1 moves where step k starts),
        # built first, while the fewest other arrays are alive (its temporaries set the peak)
        self._graph = step_graph(g, edges, np.asarray(self.steps, dtype=np.int64),
                                 self.delay)
        self.why = causes(g, edges)
        del edges
        self.parent = parents(g, self.why)
        self.cycles = 0  # dependency cycles the last evaluation broke
        self.history = _history(g, self.why, self.steps)
        self._observed: dict[int, dict[int, int]] | None = None

    def path(self, step: int) -> Path | None:
        return step_path(self.g, self.why, self.parent, step)

    def graph(self) -> StepGraph:
        """The max-plus graph of every complete step together."""
        return self._graph

    def windows(self, spec: WhatIf | None) -> dict[int, dict[int, int]]:
        """Per step, per rank: the window length (ns) with the what-if applied (None:
        as observed); windows on a cycle of the graph are left out."""
        scale = None if spec is None else scaling(self.g, spec, self.peers)
        sg = self.graph()
        values, self.cycles = run_step(sg, scale)
        ws, we = window_times(self.g, sg, values)
        out: dict[int, dict[int, int]] = {}
        ok = (ws >= 0) & (we >= 0)
        for step, rank, a, b in zip(self.g.w_step[ok], self.g.w_rank[ok], ws[ok], we[ok],
                                    strict=True):  # one per window (ranks x steps)
            out.setdefault(int(step), {})[int(rank)] = int(b - a)
        return out

    def replay_note(self) -> str | None:
        """The replay self-check: the graph evaluated with no change must give back every
        complete step's window (within REPLAY_TOL_NS; a window on a broken cycle is not
        given back). None when it does, else the sentence the report shows instead of
        its what-ifs: a what-if built on a graph that does not replay the run would
        measure its gains from the wrong place."""
        if self._observed is None:
            self._observed = self.windows(None)
        g = self.g
        got = np.asarray([self._observed.get(int(k), {}).get(int(r), -1)
                          for k, r in zip(g.w_step, g.w_rank, strict=True)], dtype=np.int64)
        want = g.w_we - g.w_ws
        miss = (got < 0) | (np.abs(got - want) > REPLAY_TOL_NS)
        if not miss.any():
            return None
        worst = float(np.where(got[miss] < 0, want[miss], np.abs(got - want)[miss]).max())
        return (f"the dependency graph with no change does not reproduce {int(miss.sum())} "
                f"of {miss.size} step windows (worst {worst / 1e6:.3f} ms off"
                + (f"; {self.cycles} dependency cycle(s) broken" if self.cycles else "")
                + "): no what-if is computed on it")

    def whatif(self, spec: WhatIf, measured_ms: float, what: str | None = None,
               reason: str | None = None) -> WhatIfResult:
        """The step time with `spec` applied, as the report measures it: the mean over
        ranks of each rank's mean complete step."""
        if self._observed is None:
            self._observed = self.windows(None)
        after = self.windows(spec)
        steady = _steady(after) if self.history else after
        base = _mean_step({k: w for k, w in self._observed.items() if k in steady})
        predicted = measured_ms - (base - _mean_step(steady)) / 1e6
        label = what or spec.label
        sentence = whatif_sentence(label, predicted, measured_ms,
                                   on_path=reason in ON_PATH_REASONS)
        per_step = {str(k): sum(w.values()) / len(w) / 1e6 for k, w in after.items() if w}
        return WhatIfResult(
            what=label, kind=spec.kind, target=spec.target, speedup=spec.speedup,
            step_time_ms=measured_ms,
            predicted_step_time_ms=predicted, gain_ms=measured_ms - predicted,
            per_step_ms=per_step, sentence=sentence, reason=reason)


def whatif_sentence(label: str, predicted_ms: float, measured_ms: float,
                    on_path: bool = False) -> str:
    """'if X, the step would be 9.10 ms instead of 10.00 ms (-0.90 ms)'; a change that
    rounds to nothing says so instead of '76.80 ms instead of 76.80 ms (-0.00 ms)', and
    for a target on the path (`on_path`) why: another chain as long takes over."""
    if abs(predicted_ms - measured_ms) < 0.005:
        why = ("it is on the path, but another chain about as long (the host, another "
               "stream) takes over" if on_path else "the step does not wait for it")
        return (f"if {label}, the step would stay at {measured_ms:.2f} ms (less than "
                f"0.01 ms gained: {why})")
    return (f"if {label}, the step would be {predicted_ms:.2f} ms instead of "
            f"{measured_ms:.2f} ms ({predicted_ms - measured_ms:+.2f} ms)")


MISSING_SHOWN = 10  # ranks named in the one line; a list of 100,000 made a 689 KB line


def check(a: Analysis, spec: WhatIf) -> None:
    """UsageError (one line) when the what-if names nothing in the run, or when the
    graph with no change does not give the run back (the replay self-check)."""
    g = a.g
    if spec.speedup is None and not spec.ranks:
        raise UsageError("--speedup median applies to --rank; give a factor (e.g. 2)")
    if spec.speedup is not None and not 0 < spec.speedup <= 1e6:
        raise UsageError("--speedup must be a factor in (0, 1e6], or median")
    known = {int(r) for r in np.unique(g.rank)}
    missing = sorted(set(spec.ranks) - known)
    if missing:
        shown = ", ".join(map(str, missing[:MISSING_SHOWN])) + (
            f" and {len(missing) - MISSING_SHOWN} more" if len(missing) > MISSING_SHOWN else "")
        raise UsageError(f"rank(s) {shown} have no GPU ops in this run "
                         f"(ranks {min(known, default=0)}-{max(known, default=0)})")
    if spec.op is not None and not (scaling(g, spec).node != 1.0).any():
        raise UsageError(f"no kernel or launching op matches '{spec.op}'")
    scale = scaling(g, spec)
    if spec.collective is not None and not ((scale.inst != 1.0).any()
                                            or (scale.node != 1.0).any()):
        names = sorted({str(n) for n in g.name_of(np.flatnonzero(g.kind != KERNEL))})
        raise UsageError(f"no matched collective '{spec.collective}' in this run (have: "
                         f"{', '.join(names) or 'none'}; NAME:GROUP picks a group)")
    replay = a.replay_note()
    if replay is not None:
        raise UsageError(replay)


def what_if(ctx: RunContext, spec: WhatIf) -> WhatIfResult:
    """The step time of the run with `spec` applied (`stepscope whatif`)."""
    if ctx.info.timeline == "cpu":
        raise UsageError(f"{no_gpu_timeline(ctx.info)}: the what-if works on GPU kernels and "
                         "collectives")
    a = analysis_of(ctx.con, ctx.run)
    if not a.steps:
        raise UsageError("no complete step with GPU ops in this run: nothing to recompute")
    check(a, spec)
    return a.whatif(spec, ctx.attribution.step_time_ms)


def analysis_of(con: duckdb.DuckDBPyConnection, run: str) -> Analysis:
    """The run's Analysis, its ranks at the median speed compared within their pipeline
    stage (`stepscope whatif`, the dashboard)."""
    topo = topology(con, run)
    return Analysis(con, run, topo.stage_of if topo is not None else None)


def _history(g: Graph, why: Causes, steps: tuple[int, ...]) -> bool:
    """Whether the first complete step shows GPU work from before the trace: one of its
    ops was launched and started more than the launch tolerance after its call returned
    with nothing recorded holding it (the GPU still ran earlier steps' work)."""
    if not steps:
        return False
    first = np.flatnonzero((g.step == steps[0]) & (why.kind == LAUNCH_EDGE))
    ready = np.maximum(g.launch_s[first] + LAUNCH_TOL_NS, g.launch_e[first])
    return bool((g.s[first] - ready > LAUNCH_TOL_NS).any())


def _steady(windows: dict[int, dict[int, int]]) -> dict[int, dict[int, int]]:
    """The steps a what-if's gain is measured on when the first complete step shows
    work from before the trace (_history): all but the first when there are two or
    more. That step starts where the unrecorded work left each rank (a GPU behind its
    CPU, ranks out of phase), which the graph keeps as observed: its window mixes that
    history with the change (docs/critical_path.md, "What-if")."""
    steps = sorted(windows)
    return {k: windows[k] for k in (steps[1:] if len(steps) > 1 else steps)}


def _mean_step(windows: dict[int, dict[int, int]]) -> float:
    """Mean over ranks of each rank's mean window (ns), over the steps given."""
    per_rank: dict[int, list[int]] = {}
    for by_rank in windows.values():
        for rank, ns in by_rank.items():
            per_rank.setdefault(rank, []).append(ns)
    means = [sum(v) / len(v) for v in per_rank.values()]
    return sum(means) / len(means) if means else 0.0


# ------------------------------------------------------------------ one step's summary
def _shares(keys: np.ndarray, ns: np.ndarray, total: float, n_steps: int = 1
            ) -> list[tuple[str, float, float]]:
    uniq, inv = np.unique(keys.astype(str), return_inverse=True)
    sums = np.bincount(inv, weights=ns, minlength=uniq.size)
    order = np.argsort(-sums, kind="stable")
    return [(str(uniq[i]), float(sums[i]) / 1e6 / n_steps,
             float(sums[i]) / total if total else 0.0) for i in order]


def _top_ops(paths: Sequence[Path], n_steps: int) -> tuple[PathOp, ...]:
    labels = np.concatenate([p.label for p in paths]).astype(str)
    cats = np.concatenate([p.cat for p in paths]).astype(str)
    ranks = np.concatenate([p.rank for p in paths])
    ns = np.concatenate([p.e - p.s for p in paths]).astype(float)
    shown = np.array([LABELS.get(c, lb) for c, lb in zip(cats, labels, strict=True)], dtype=str)
    total = float(ns.sum())
    out = []
    for key, ms, share in _shares(shown, ns, total, n_steps)[:TOP_OPS]:
        hit = shown == key
        out.append(PathOp(op=key, category=str(cats[hit][0]), ms=ms, share=share,
                          count=int(hit.sum()) // n_steps or 1,
                          ranks=tuple(int(r) for r in np.unique(ranks[hit]))))
    return tuple(out)


def _runs(p: Path) -> tuple[tuple[PathRun, ...], int]:
    """Consecutive segments on one rank, in time order; capped at MAX_RUNS."""
    rank, cat = p.rank[::-1], p.cat[::-1].astype(str)
    s, e = p.s[::-1], p.e[::-1]
    if rank.size == 0:
        return (), 0
    first = np.flatnonzero(np.r_[True, rank[1:] != rank[:-1]])
    bounds = np.r_[first, rank.size]
    runs = []
    for a, b in zip(bounds[:-1][:MAX_RUNS], bounds[1:][:MAX_RUNS], strict=True):
        top = _shares(cat[a:b], (e[a:b] - s[a:b]).astype(float), 1.0)[0][0]
        runs.append(PathRun(rank=int(rank[a]), start_ms=float(s[a] - p.ws) / 1e6,
                            ms=float(e[b - 1] - s[a]) / 1e6, category=top, segments=int(b - a)))
    return tuple(runs), max(0, first.size - MAX_RUNS)


def step_summary(p: Path, mean_step_ms: float) -> StepPath:
    ns = (p.e - p.s).astype(float)
    total = float(ns.sum())
    by_rank = _shares(p.rank, ns, total)
    cats = dict.fromkeys(PATH_CATEGORIES, 0.0)
    for key, ms, _share in _shares(p.cat, ns, total):
        cats[key] = ms
    runs, left = _runs(p)
    return StepPath(
        step=p.step, reference_rank=p.reference_rank, window_ms=(p.we - p.ws) / 1e6,
        path_ms=total / 1e6, mean_step_ms=mean_step_ms,
        jumps=int((p.rank[1:] != p.rank[:-1]).sum()) if p.rank.size else 0,
        ranks=tuple(int(k) for k, _ms, _s in by_rank), by_category_ms=cats,
        by_rank=tuple(PathShare(key=k, ms=ms, share=sh) for k, ms, sh in by_rank[:TOP_RANKS]),
        top_ops=_top_ops([p], 1), runs=runs, runs_left_out=left)


# ------------------------------------------------------------------ the section
def _stage_whatif(ctx: RunContext, topo: PipelineTopology | None) -> tuple[WhatIf, str] | None:
    """The slowest pipeline stage at the median stage's compute speed, when it is
    slower by MIN_STAGE_IMBALANCE."""
    if topo is None or topo.stages < 2:
        return None
    by_rank = ctx.attribution.by_rank
    stages: dict[int, list[float]] = {}
    for rank, stage in topo.stage_of.items():
        if rank in by_rank:
            b = by_rank[rank].breakdown_ms
            stages.setdefault(stage, []).append(b.compute + b.recompute)
    # the median rank of each stage: one slow rank is a straggler, not a slow stage
    means = {s: median(v) for s, v in stages.items() if v}
    if len(means) < 2:
        return None
    slowest = max(means, key=lambda s: means[s])
    typical = median(means.values())
    if typical <= 0 or means[slowest] < MIN_STAGE_IMBALANCE * typical:
        return None
    k = means[slowest] / typical
    ranks = tuple(sorted(r for r, s in topo.stage_of.items() if s == slowest))
    return (WhatIf(ranks=ranks, speedup=k),
            f"pipeline stage {slowest} ran at the median stage's speed ({k:.2f}x faster)")


def _hot(paths: Sequence[Path], cats: Iterable[str]) -> str | None:
    """The label of the op with most path time among the categories `cats`."""
    cat = np.concatenate([p.cat for p in paths]).astype(str)
    hit = np.isin(cat, list(cats))
    if not hit.any():
        return None
    labels = np.concatenate([p.label for p in paths])[hit]
    ns = np.concatenate([p.e - p.s for p in paths])[hit].astype(float)
    return _shares(labels, ns, 1.0)[0][0]


def _default_whatifs(ctx: RunContext, paths: Sequence[Path], late: Sequence[Straggler],
                     topo: PipelineTopology | None) -> list[tuple[WhatIf, str | None, str]]:
    """(what-if, its wording, reason): each straggler at the median speed, the slowest
    stage at the median stage's, the op and the collective with most path time 2x."""
    specs: list[tuple[WhatIf, str | None, str]] = [
        (WhatIf(ranks=(s.rank,)), None, "straggler") for s in late[:MAX_STRAGGLER_WHATIFS]]
    stage = _stage_whatif(ctx, topo)
    if stage is not None:
        specs.append((*stage, "pipeline_stage"))
    kernel = _hot(paths, ("compute", "recompute"))
    if kernel is not None:
        specs.append((WhatIf(op=kernel, speedup=2.0), f"'{kernel}' ran 2x faster", "top_op"))
    label = _hot(paths, ("collective", "p2p"))
    if label is not None:
        name, _, group = label.partition(" (")
        group = group.rstrip(")")
        if group == MISSING:  # a library's kernel of no process group (custom all-reduce)
            label, group = name, ""
        spec = name + (f":{group}" if group else "")
        specs.append((WhatIf(collective=spec, speedup=2.0), f"{label} ran 2x faster",
                      "top_collective"))
    return specs


def _notes(a: Analysis, ctx: RunContext, paths: Sequence[Path]) -> tuple[str, ...]:
    g = a.g
    out = []
    ns = np.concatenate([p.e - p.s for p in paths]).astype(float)
    idle = float(ns[np.concatenate([p.cat for p in paths]) == "idle"].sum())
    if ns.sum() > 0 and idle > 0.1 * ns.sum():
        unlinked = int((g.launch_s <= NEG).sum())
        out.append(f"{100 * idle / ns.sum():.0f}% of the path is unexplained waiting: ops that "
                   "started later than anything recorded allowed (another stream's work "
                   "holding the GPU, an event wait not in the trace"
                   + (f"; {unlinked} GPU ops have no launch call linked" if unlinked else "")
                   + ")")
    cats = np.concatenate([p.cat for p in paths])
    host = float(ns[np.isin(cats, ("cpu", "launch"))].sum())
    if ns.sum() > 0 and host > 0.5 * ns.sum():
        recorded = host_recorded(ctx, paths)
        busy = _busy_note(ctx, host / ns.sum(), recorded)
        bound = not busy or recorded[1] >= MIN_RECORDED_HOST * recorded[0]
        out.append(f"{100 * host / ns.sum():.0f}% of the path is the host (CPU work before "
                   "a launch, the launches)" + (
                       ": the GPU waits for the CPU, so faster kernels or collectives barely "
                       "shorten the step; the idle split says what the host ran" if bound
                       else ""))
        out.extend(busy)
    out.extend(_wait_note(g))
    n_ranks, world = int(ctx.info.ranks or 0), int(ctx.info.world_size or 0)
    if len(np.unique(g.rank)) == 1:
        out.append("one rank traced: the path stays on it (no collective instance to follow "
                   "to another rank)")
    if 0 < n_ranks < world:
        out.append(f"{n_ranks} of {world} ranks traced: a collective whose other members are "
                   "missing ends when observed, so the path cannot jump to untraced ranks")
    inferred = g.n_inferred
    if inferred:
        out.append(f"{inferred} cross-stream waits inferred (a start within "
                   f"{XS_TOL_NS // 1000} us after another stream's op ended, that nothing "
                   "else explains)")
    idle = g.syncs.get("idle_thread", 0)
    if idle:
        out.append(f"{idle} CPU waits inferred at step boundaries (a thread idle until "
                   f"{SYNC_TOL_NS // 1000} us after a GPU op ended; no sync call recorded)")
    polls = g.syncs.get("poll", 0)
    if polls:
        out.append(f"{polls} CPU waits inferred inside steps (a thread that recorded nothing "
                   f"for at least {POLL_MIN_NS / 1e6:g} ms after launching an op the GPU had "
                   f"not started, and came back within {SYNC_TOL_NS // 1000} us of its end: a "
                   "host polling memory the GPU writes, as DeepEP's dispatch does); the path "
                   "follows each to that op, as after a sync call")
    return tuple(out)


# The host time on the path that the host spent in recorded work (its waits left out)
# for the note to say the host set the step: the rest is silence, which may be a wait the
# trace does not show.
MIN_RECORDED_HOST = 0.5


def _busy_note(ctx: RunContext, host_share: float, recorded: tuple[float, float]
               ) -> list[str]:
    """Why a host-bound path and a mostly busy GPU (the breakdown) are one story, said
    when the GPU was busy at least half the step: the busy share is how much the GPU
    worked, the path what the step waited for. Said only as far as the host's recorded
    work bears it out (`recorded`: host ns on the path, and of them ns the host recorded
    work in); otherwise the note says the host share is an upper bound."""
    b = ctx.attribution.breakdown_ms
    step = ctx.attribution.step_time_ms
    if step <= 0 or b.idle > 0.5 * step:
        return []
    busy = f"the breakdown has the GPU busy {100 * (1 - b.idle / step):.0f}% of the step"
    on_path, worked = recorded
    if on_path <= 0 or worked >= MIN_RECORDED_HOST * on_path:
        return [f"{busy} and the path is {100 * host_share:.0f}% host: both hold. The host's "
                "own work (CPU ops and launches, its waits for the GPU left out) took longer "
                "than the GPU's, so the GPU's work had slack and the host set the step's "
                "length; the busy share says how much the GPU worked, the path what the "
                "step waited for"]
    return [f"{busy}, yet the path is {100 * host_share:.0f}% host: the two disagree. The "
            f"host recorded work (CPU ops and runtime calls, its waits for the GPU left out) "
            f"in only {100 * worked / on_path:.0f}% of the path's host time "
            f"({worked / 1e6:.2f} of {on_path / 1e6:.2f} ms); the rest it recorded nothing, "
            "which a wait for the GPU that the trace does not show (a host polling memory "
            "the GPU writes, a lock) would make GPU time. Read the host share as at most "
            "that, and the breakdown as what the GPU did"]


def host_recorded(ctx: RunContext, paths: Sequence[Path]) -> tuple[float, float]:
    """The path's host (cpu) time, ns over the steps, and how much of it the host spent
    in recorded work (critical_path/host_work.sql: CPU ops and runtime calls of any
    thread, its waits for the GPU left out), each segment on its own rank's clock."""
    on_path = worked = 0.0
    run_script(ctx.con, "waits/macros.sql", {})
    for p in paths:
        host = p.cat == "cpu"
        if not host.any():
            continue
        off = p.off[host] if p.off is not None else np.zeros(int(host.sum()), dtype=np.int64)
        rank, s, e = p.rank[host], p.s[host] - off, p.e[host] - off
        on_path += float((e - s).sum())
        for r in np.unique(rank):  # the ranks the path's host time is on: a few
            mine = rank == r
            lo, hi = int(s[mine].min()), int(e[mine].max())
            cover = [_covered(_islands(ctx, int(r), lo, hi, what), s[mine], e[mine])
                     for what in ("work", "wait")]
            worked += float(cover[0] - cover[1])
    return on_path, worked


def _islands(ctx: RunContext, rank: int, lo: int, hi: int, what: str) -> np.ndarray:
    rows = ctx.con.execute(sql("critical_path/host_work.sql"),
                           {"run": ctx.run, "rank": rank, "lo": lo, "hi": hi,
                            "what": what}).fetchall()
    return np.asarray(rows, dtype=np.int64).reshape(-1, 2)


def _covered(islands: np.ndarray, s: np.ndarray, e: np.ndarray) -> int:
    """How much of the intervals [s, e) the disjoint, ordered `islands` cover (ns)."""
    if islands.size == 0:
        return 0
    a, b = islands[:, 0], islands[:, 1]
    before = np.concatenate([[0], np.cumsum(b - a)])

    def upto(t: np.ndarray) -> np.ndarray:  # covered time before t
        i = np.searchsorted(a, t, side="right")
        last = np.maximum(i - 1, 0)
        part = np.where(i > 0, np.clip(t - a[last], 0, (b - a)[last]), 0)
        return before[last] * (i > 0) + part

    return int((upto(e) - upto(s)).sum())


def _wait_note(g: Graph) -> list[str]:
    """Async copies found to block: CPU waits that the path follows to the GPU (their
    waiting is never host time on the path)."""
    copies = g.syncs.get("blocking_copy", 0)
    if not copies:
        return []
    return [f"{copies} async copies returned only once their copy had ended (into pageable "
            "host memory: .item(), .cpu(), .tolist()): CPU waits for the GPU like a sync "
            "call, so the path follows each to the GPU work it waited for and the waiting "
            "is GPU time on the path, not host"]


def critical_path_section(ctx: RunContext, late: Sequence[Straggler],
                          topo: PipelineTopology | None) -> CriticalPath:
    """The section: the path of every complete step and the default what-ifs."""
    if ctx.info.timeline == "cpu":
        return CriticalPath(message=f"{no_gpu_timeline(ctx.info)}: the critical path follows "
                                    "GPU kernels, their launches and collectives; there are "
                                    "none here")
    a = Analysis(ctx.con, ctx.run, topo.stage_of if topo is not None else None)
    if a.g.n == 0 or not a.steps:
        return CriticalPath(message="no complete step with GPU ops: nothing to follow")
    means = {s.step: s.step_time_ms for s in ctx.attribution.per_step}
    paths = [p for p in (a.path(k) for k in a.steps) if p is not None]
    if not paths:
        return CriticalPath(message="no step window ends at a GPU op of the graph")
    steps = tuple(step_summary(p, means.get(p.step, 0.0)) for p in paths)
    n = len(paths)
    ns = np.concatenate([p.e - p.s for p in paths]).astype(float)
    total = float(ns.sum())
    cats = dict.fromkeys(PATH_CATEGORIES, 0.0)
    for key, ms, _sh in _shares(np.concatenate([p.cat for p in paths]), ns, total, n):
        cats[key] = ms
    by_rank = _shares(np.concatenate([p.rank for p in paths]), ns, total, n)
    measured = ctx.attribution.step_time_ms
    replay = a.replay_note()  # evaluates the graph with no change
    cycles = a.cycles
    whatifs = () if replay is not None else tuple(
        a.whatif(spec, measured, what, reason) for spec, what, reason in
        _default_whatifs(ctx, paths, late, topo))
    notes = _notes(a, ctx, paths) + ((
        f"{cycles} dependency cycle(s) broken in the what-if: collective matches that "
        "contradict the recorded times",) if cycles else ()) + (
        (replay,) if replay is not None else ())
    return CriticalPath(
        steps=steps, path_ms=total / 1e6 / n, by_category_ms=cats,
        by_rank=tuple(PathShare(key=k, ms=ms, share=sh) for k, ms, sh in by_rank[:TOP_RANKS]),
        top_ops=_top_ops(paths, n), whatifs=whatifs, nodes=a.g.n, edges=a.g.n_edges,
        inferred={"cross_stream_waits": a.g.n_inferred,
                  "cpu_waits": int(a.g.syncs.get("idle_thread", 0) + a.g.syncs.get("poll", 0)),
                  "sync_calls": int(a.g.syncs.get("sync_call", 0)
                                    + a.g.syncs.get("blocking_copy", 0))},
        notes=notes)
