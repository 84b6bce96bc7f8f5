"""Which run to compare with, and what makes two runs hard to compare: Compare's default
baseline is a comparable run, and differences in device, model or world size are said
out loud. Pure functions of report models and the nightly history (no Streamlit).

A comparable baseline, best first: the previous night of the same nightly job; else the
newest other run on the same device with the same model spec (model.json beside the
traces; analyzers.comparable); else, where either lacks a spec, the newest on the same
device with the same op shapes per rank; else the newest on the same device; else the
newest run, with the reason and the warnings saying why it is a poor match. Among the
comparable runs, one with the target's GPUs per node (the same machines) comes first. Model FLOPs
per step alone never make two runs comparable: two different models can match them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from stepscope.analyzers.comparable import same_shapes
from stepscope.analyzers.flops.model_spec import ModelSpec
from stepscope.analyzers.results import Diff, DiffSide, Report
from stepscope.dashboard.render.format import fixed

MODEL_TOLERANCE = 0.02   # model FLOPs per step within 2%: the same model and batch
KERNEL_OVERLAP = 0.5     # without FLOPs: at least half of the top ops' names in common
TOP_OPS = 30


@dataclass(frozen=True)
class Baseline:
    run: str
    reason: str  # why this one, in words


def previous_night(run: str, history: Mapping[str, pl.DataFrame]) -> str | None:
    """The night before `run` in its nightly job's history (still in the database)."""
    for frame in history.values():
        runs = frame.get_column("run").to_list() if "run" in frame.columns else []
        if run in runs:
            kept = frame.filter(pl.col("in_db")) if "in_db" in frame.columns else frame
            earlier = [r for r in kept.get_column("run").to_list() if r != run]
            before = [r for r in earlier if runs.index(r) < runs.index(run)]
            if before:
                return str(before[-1])
    return None


def _top_ops(ops: Mapping[str, float]) -> set[str]:
    return set(sorted(ops, key=lambda k: -ops[k])[:TOP_OPS])


def same_model(a: Report, b: Report, ops_a: Mapping[str, float],
               ops_b: Mapping[str, float]) -> bool:
    """Same model FLOPs per step (within MODEL_TOLERANCE) or, when either lacks FLOPs,
    mostly the same top kernels."""
    fa, fb = a.mfu.model_flops_per_step, b.mfu.model_flops_per_step
    if fa and fb:
        return abs(fa - fb) <= MODEL_TOLERANCE * max(fa, fb)
    ta, tb = _top_ops(ops_a), _top_ops(ops_b)
    return bool(ta and tb) and len(ta & tb) / len(ta | tb) >= KERNEL_OVERLAP


@dataclass(frozen=True)
class RunKey:
    """What says two runs are the same job: the model spec and the op shapes per rank,
    then (between runs of one model) the same GPUs per node."""
    spec: ModelSpec | None
    shapes: frozenset[tuple[str, str]]
    gpus_per_node: int | None = None


def comparable(a: RunKey, b: RunKey) -> str | None:
    """Why two runs (on the same device) are comparable, or None: the same model spec
    when both have one (different specs never are), else the same op shapes per rank."""
    if a.spec is not None and b.spec is not None:
        return "the same model spec" if a.spec == b.spec else None
    if same_shapes(a.shapes, b.shapes):
        return "the same op shapes per rank"
    return None


def same_job_series(runs: Sequence[str], device_of: Mapping[str, str | None],
                    key_of: Callable[[str], RunKey]) -> list[list[str]]:
    """`runs` (oldest first) as series of one job each: a run joins the first series
    whose first run is on its device and `comparable` with it, else starts its own. A
    trend joins only a series' runs with a line (two models' MFU are no trend)."""
    series: list[list[str]] = []
    for run in runs:
        home = next((s for s in series if device_of.get(s[0]) == device_of.get(run)
                     and comparable(key_of(s[0]), key_of(run)) is not None), None)
        if home is None:
            series.append([run])
        else:
            home.append(run)
    return series


def model_differs(key_a: RunKey, key_b: RunKey, a: Report, b: Report,
                  ops_a: Mapping[str, float], ops_b: Mapping[str, float]) -> bool:
    """Whether the warning says the models differ: by their specs when both have one,
    else by FLOPs per step or kernels (same_model)."""
    if key_a.spec is not None and key_b.spec is not None:
        return key_a.spec != key_b.spec
    return not same_model(a, b, ops_a, ops_b)


def choose(target: str, others: Sequence[str], history_previous: str | None,
           device_of: Mapping[str, str | None], key_of: Callable[[str], RunKey]
           ) -> Baseline | None:
    """The default baseline for run `target` among `others` (newest first): the previous
    night, else the newest comparable run on the target's device, else the newest on
    that device, else the newest, the reason saying which."""
    if not others:
        return None
    if history_previous in others:
        return Baseline(str(history_previous), "the previous night of the same nightly job")
    device = [o for o in others if device_of.get(o) == device_of.get(target)]
    mine = key_of(target)
    found = [(o, why) for o in device if (why := comparable(mine, key_of(o))) is not None]
    node = [(o, why) for o, why in found
            if mine.gpus_per_node is not None and key_of(o).gpus_per_node == mine.gpus_per_node]
    if node:
        return Baseline(node[0][0], f"the newest run on the same device with {node[0][1]} "
                                    f"and {mine.gpus_per_node} GPUs per node")
    if found:
        return Baseline(found[0][0], f"the newest run on the same device with {found[0][1]}")
    if device:
        return Baseline(device[0], "the newest run on the same device; none has the same "
                                   "model spec or op shapes per rank")
    return Baseline(others[0], "the newest other run: none ran on the same device")


def _flops_per_gpu(side: DiffSide) -> float | None:
    if not side.model_flops_per_step or not side.world_size:
        return None
    return side.model_flops_per_step / side.world_size


def warnings(diff: Diff, model_differs: bool) -> list[str]:
    """What makes this comparison unfair, loudly: device, model, world size."""
    a, b = diff.a, diff.b
    out = []
    if a.device != b.device:
        out.append(f"Different devices: {a.run} ran on {a.device or 'unknown'}, {b.run} on "
                   f"{b.device or 'unknown'}. MFU is measured against each device's own "
                   "peak, and the times are not comparable.")
    if model_differs:
        fa, fb = a.model_flops_per_step, b.model_flops_per_step
        flops = (f" (model FLOPs per step {fa:.3g} vs {fb:.3g})" if fa and fb else "")
        out.append(f"Different models or batches{flops}: {a.run} and {b.run} do different "
                   "work per step, so their step times and MFU answer different questions.")
    if a.world_size != b.world_size:
        out.append(f"Different world sizes: {a.world_size} → {b.world_size} GPUs. Each GPU's "
                   "share of the work changes (see below).")
    return out


def work_per_gpu(diff: Diff) -> str | None:
    """Why a faster step can have a lower MFU: each GPU's share of the work changed."""
    a, b = diff.a, diff.b
    fa, fb = _flops_per_gpu(a), _flops_per_gpu(b)
    ca, cb = a.breakdown_ms.compute, b.breakdown_ms.compute
    if fa is None or fb is None or abs(fb / fa - 1) < MODEL_TOLERANCE:
        return None
    ratio = fb / fa
    faster = b.step_time_ms < a.step_time_ms
    text = (f"Work per GPU: each GPU of {b.run} does {fixed(ratio, 2)}× the model FLOPs per "
            f"step of {a.run}'s ({a.world_size} → {b.world_size} GPUs), and its compute went "
            f"{ca:.2f} → {cb:.2f} ms/step.")
    lower = b.mfu is not None and a.mfu is not None and b.mfu < a.mfu
    if faster and lower:
        rest_a, rest_b = a.step_time_ms - ca, b.step_time_ms - cb
        text += (f" The step is faster ({a.step_time_ms:.2f} → {b.step_time_ms:.2f} ms) but "
                 f"by less than the work shrank: the time outside compute went "
                 f"{rest_a:.2f} → {rest_b:.2f} ms and is now "
                 f"{100 * rest_b / b.step_time_ms:.0f}% of the step, so MFU fell.")
    return text
