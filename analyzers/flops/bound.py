"""What the traces' shapes may claim: a bound on FLOPs, and MFU never above 100%.

FLOPs from shapes are only as good as the `Input Dims` Kineto recorded; one op with a
broken shape (`[2**40, 2**40]`) would otherwise make a report print "MFU 1.27e21" as a
fact. Two guards (docs/mfu.md, "Implausible shapes"):

* per op: an op's FLOPs must fit in the time of the compute kernels it launched at
  `BOUND_MARGIN` x the device's highest dense peak. An op beyond that is named in the
  report and left out of the model FLOPs (analyzers/sql/flops.sql, model_flops with
  `max_rate`). The margin covers the full-square attention convention (a causal
  kernel does half the work it is credited with) and boost clocks.
* per run: an MFU or HFU above 100% is never reported; `mfu` is None and the message
  says which FLOPs are too high (a model spec, or shapes of ops without kernels).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from stepscope.analyzers._sql import fetch_rows
from stepscope.analyzers.flops.counted_ops import counted_ops
from stepscope.analyzers.numbers import percent
from stepscope.analyzers.results import ImplausibleOp

if TYPE_CHECKING:
    import duckdb

    from stepscope.analyzers.context import RunContext

BOUND_MARGIN = 2.0
LISTED = 5


def device_peak(ctx: RunContext) -> float | None:
    """The highest dense peak (FLOP/s) the device can reach: the table's best dtype, or
    --peak-tflops when that is higher; None when neither is known."""
    peaks = [v * 1e12 for v in (ctx.device.peak.tflops.values() if ctx.device.peak else ())
             if v]
    if ctx.options.peak_tflops is not None:
        peaks.append(ctx.options.peak_tflops * 1e12)
    return max(peaks) if peaks else None


def rate_bound(ctx: RunContext) -> float | None:
    """The most FLOP/s an op's kernels may be credited with (None: no bound known)."""
    peak = device_peak(ctx)
    return BOUND_MARGIN * peak if peak is not None else None


class _Row(TypedDict):
    rank: int
    step: int | None
    op_id: int
    name: str
    flops: float
    kernel_ms: float
    flops_per_s: float
    n: int


def implausible_ops(con: duckdb.DuckDBPyConnection, run: str,
                    ctx: RunContext) -> tuple[tuple[ImplausibleOp, ...], int]:
    """The worst ops beyond the bound (at most LISTED) and how many there are."""
    bound, peak = rate_bound(ctx), device_peak(ctx)
    if bound is None or peak is None:
        return (), 0
    with counted_ops(con, run):
        rows = fetch_rows(con, "mfu/implausible_ops.sql",
                          {"run": run, "max_rate": bound, "limit": LISTED}, _Row)
    ops = tuple(ImplausibleOp(rank=r["rank"], step=r["step"], op_id=r["op_id"],
                              name=r["name"], flops=r["flops"], kernel_ms=r["kernel_ms"],
                              times_peak=r["flops_per_s"] / peak) for r in rows)
    return ops, int(rows[0]["n"]) if rows else 0


def implausible_message(ops: tuple[ImplausibleOp, ...], count: int) -> str | None:
    """One sentence naming the worst op left out, or None."""
    if not ops:
        return None
    op = ops[0]
    step = f", step {op.step}" if op.step is not None else ""
    return (f"{count} op(s) left out of the model FLOPs: their shapes claim more than "
            f"their kernels could do at {BOUND_MARGIN:g}x the peak, e.g. {op.name} "
            f"(rank {op.rank}{step}, op {op.op_id}): {op.flops:.3g} FLOPs in "
            f"{op.kernel_ms:.3g} ms of kernels, {op.times_peak:.3g}x the peak; its Input "
            "Dims cannot be right")


def above_peak_message(mfu: float, hfu: float, source: str | None) -> str | None:
    """Why an MFU/HFU above 100% is not reported, or None when both are at most 100%."""
    if mfu <= 1.0 and hfu <= 1.0:
        return None
    cause = ("the model spec (--model) claims more FLOPs per step than the GPUs can do"
             if source == "spec" else
             "the traces' shapes claim more FLOPs than the GPUs can do (ops without "
             "kernels to bound them, or a wrong peak: check --peak-tflops / --dtype)")
    return (f"MFU would be {percent(mfu)} (HFU {percent(hfu)}), above "
            f"100% of the peak, which is impossible; {cause}")
