"""Ground truth of the critical path across ranks and of what-if re-simulations, from the
GPU-job simulator's own knowledge (sample_traces/simulate_gpu.py): for every op it
recorded what set its start (`Op.why`: its launch, or the op whose end it waited for) and,
for a collective or a send/recv, which member arrived last (`Op.last`, which set the end).

The path of step k (docs/critical_path.md) ends where the reference rank's window ends
(the start of its first op of step k+1) and is followed backwards to where the window
starts, in the simulator's physical time (hosts' clock offsets exist only in the traces):

* an op that waited for another op's end: the gap is `idle`, then that op;
* an op that waited for its launch: `launch` (the runtime call), then `cpu` (the host from
  the end of the previous step's GPU work, where the CPU's cudaDeviceSynchronize returned,
  to the launch), then that last-ending op; in the first step, the host up to the window;
* a kernel: its whole interval; a collective or send/recv: the last member's interval on
  that member's rank (it arrived last: the others waited for it), then what set its start.

What-if truth: the same job simulated again with the change (a rank at the median speed,
an op kind or a collective k x faster), and its step time: the mean over ranks of each
rank's mean complete step (the report's step_time_ms).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable
from typing import Any

# (what, simulator change, the what-if as `stepscope whatif` options)
WHATIFS: tuple[tuple[str, dict[str, Any], dict[str, Any]], ...] = (
    ("slow rank at the median speed", {"slow_rank": None, "slow_factor": 1.0},
     {"rank": "slow_rank", "speedup": "median"}),
    ("fc1 GEMMs 2x faster", {"speedups": (("fc1", 2.0),)}, {"op": "fc1", "speedup": 2.0}),
    ("TP all-reduce 2x faster", {"speedups": (("all_reduce:tp", 2.0),)},
     {"collective": "all_reduce:tensor_model", "speedup": 2.0}),
)


def _category(op: Any) -> str:
    if op.kind == "kernel":
        return str(op.category)
    return "p2p" if op.kind == "p2p" else "collective"


def _trace_ns(cfg: Any, base_ns: int, rank: int, t: int) -> int:
    """The absolute ns a time of rank `rank` has in its trace (host clock offset)."""
    host = rank // cfg.gpus_per_node
    return base_ns + t + int(host * cfg.clock_offset_ms * 1e6)


class _Walk:
    """The backward walk of one step's path (see the module docstring)."""

    def __init__(self, by_step: dict[tuple[int, int], list[Any]]) -> None:
        self.by_step = by_step
        self.segments: list[tuple[int, str, str, int, int, Any]] = []

    def anchor(self, rank: int, step: int) -> Any:
        """The op whose end the CPU waited for before step `step` (the last-ending op of
        the previous step), or None in the first step."""
        ops = self.by_step.get((rank, step - 1))
        return max(ops, key=lambda o: o.end) if ops else None

    def add(self, rank: int, cat: str, name: str, s: int, e: int, op: Any, ws: int) -> bool:
        """Add a segment clipped at the window start; False when the walk is done."""
        if e > s or cat != "idle":
            self.segments.append((rank, cat, name, max(s, ws), e, op))
        return s > ws

    def run(self, probe: Any, ws: int) -> None:
        at_start, op = True, probe
        while True:
            if at_start:
                why = op.why
                if why == "launch":
                    if not self.add(op.rank, "launch", "launch", op.launch_ns, op.start, None, ws):
                        return
                    a = self.anchor(op.rank, op.step)
                    s = a.end if a is not None else ws
                    if not self.add(op.rank, "cpu", "host", s, op.launch_ns, None, ws) or a is None:
                        return
                    op, at_start = a, False
                else:
                    if not self.add(op.rank, "idle", "idle", why.end, op.start, None, ws):
                        return
                    op, at_start = why, False
            else:
                m = op if op.kind == "kernel" else op.last
                if not self.add(m.rank, _category(m), m.name, m.start, m.end, m, ws):
                    return
                op, at_start = m, True


def _windows(programs: dict[int, list[Any]]) -> dict[int, dict[int, tuple[int, int]]]:
    """Per rank and complete step: (window start, window end), as docs/attribution.md."""
    out: dict[int, dict[int, tuple[int, int]]] = {}
    for r, ops in programs.items():
        first: dict[int, int] = {}
        for op in ops:
            first[op.step] = min(first.get(op.step, op.start), op.start)
        out[r] = {k: (first[k], first[k + 1]) for k in sorted(first) if k + 1 in first}
    return out


def step_time_ms(programs: dict[int, list[Any]]) -> float:
    """The report's step time: mean over ranks of each rank's mean complete step."""
    means = [sum(e - s for s, e in w.values()) / len(w) for w in _windows(programs).values()]
    return sum(means) / len(means) / 1e6


def _path_facts(cfg: Any, base_ns: int, segments: list[tuple[int, str, str, int, int, Any]]
                ) -> dict[str, Any]:
    by_cat: dict[str, int] = defaultdict(int)
    by_rank: dict[str, int] = defaultdict(int)
    ops = []
    jumps, last_rank = 0, None
    for rank, cat, name, s, e, op in reversed(segments):
        by_cat[cat] += e - s
        by_rank[str(rank)] += e - s
        if op is not None:
            ops.append([rank, _trace_ns(cfg, base_ns, rank, op.start), name, cat, e - s])
        jumps += last_rank is not None and rank != last_rank
        last_rank = rank
    return {"path_ns": sum(by_cat.values()), "by_category_ns": dict(by_cat),
            "by_rank_ns": dict(by_rank), "jumps": jumps, "ops": ops}


def critical_path_truth(cfg: Any, programs: dict[int, list[Any]], facts: dict[str, Any],
                        simulate: Callable[[Any], tuple[dict[int, list[Any]], Any]],
                        base_ns: int) -> dict[str, Any]:
    """The path of every complete step, and the what-if re-simulations."""
    by_step: dict[tuple[int, int], list[Any]] = defaultdict(list)
    for r, ops in programs.items():
        for op in ops:
            by_step[(r, op.step)].append(op)
    windows = _windows(programs)
    steps = []
    for k in sorted({k for w in windows.values() for k in w}):
        # the reference rank: the longest window of the step, lowest rank on a tie
        ref = min((r for r in windows if k in windows[r]),
                  key=lambda r: (-(windows[r][k][1] - windows[r][k][0]), r))
        ws, we = windows[ref][k]
        probe = min(by_step[(ref, k + 1)], key=lambda o: o.start)
        walk = _Walk(by_step)
        walk.run(probe, ws)
        steps.append({"step": k, "reference_rank": ref, "window_ns": we - ws,
                      **_path_facts(cfg, base_ns, walk.segments)})
    whatifs = []
    for what, change, options in WHATIFS:
        options = {**options, **({"rank": cfg.slow_rank} if "rank" in options else {})}
        again, _spans = simulate(dataclasses.replace(cfg, **change))
        whatifs.append({"what": what, "options": options, "step_time_ms": step_time_ms(again)})
    return {"step_time_ms": step_time_ms(programs), "steps": steps, "whatif": whatifs}
