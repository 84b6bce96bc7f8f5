"""Which run to compare with, and what makes two runs hard to compare: Compare's default
baseline is a comparable run, and differences in device, model or world size are said
out loud. Pure functions of report models and the nightly history (no Streamlit).

A comparable baseline, best first: the previous night of the same nightly job; else the
newest other run on the same device with the same model (the same model FLOPs per step,
within MODEL_TOLERANCE, or, without FLOPs, mostly the same kernels); else the newest on
the same device; else the newest run, with the warnings saying why it is a poor match.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import polars as pl

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


def choose(target: str, others: Sequence[str], history_previous: str | None,
           device_of: Mapping[str, str | None], report_of: Callable[[str], Report],
           ops_of: Callable[[str], Mapping[str, float]]) -> Baseline | None:
    """The default baseline for run `target` among `others` (newest first). Reports are
    built only for the runs on the target's device, newest first, until one matches."""
    if not others:
        return None
    if history_previous in others:
        return Baseline(str(history_previous), "the previous night of the same nightly job")
    device = [o for o in others if device_of.get(o) == device_of.get(target)]
    for o in device:
        if same_model(report_of(target), report_of(o), ops_of(target), ops_of(o)):
            return Baseline(o, "the newest run with the same device and model")
    if device:
        return Baseline(device[0], "the newest run on the same device (none with the same "
                                   "model)")
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
