"""Plan: the layout planner (`stepscope plan`) as a form: candidate TP/PP/DP/ZeRO
layouts with memory, communication, bubble and predicted MFU. With a run selected whose
model spec is known (model.json beside its traces), the planner starts from that run's
calibration (`stepscope plan --from RUN`) and says so; otherwise, or on request, from
the fixed assumptions."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl
import streamlit as st

from stepscope.analyzers.flops.peaks import by_id, lookup, table
from stepscope.analyzers.plan.calibrate import tier
from stepscope.analyzers.plan.from_run import Constraints, plan_from
from stepscope.analyzers.plan.layouts import (
    DEFAULT_EFFICIENCY,
    DEFAULT_NETWORK_GBS,
    Job,
    default_shape,
    plan_result,
)
from stepscope.analyzers.results import Calibration, PlanResult, Report
from stepscope.dashboard.app import charts, data
from stepscope.dashboard.app.context import PageContext
from stepscope.dashboard.app.widgets import MISSING, chart_and_table, plain
from stepscope.dashboard.render.format import pct
from stepscope.dashboard.render.plan import TERM_LABELS
from stepscope.ingest import UsageError

TITLE = "Plan"
HEADER = "Plan a layout"
ANY = "any"


@dataclass(frozen=True)
class Start:
    """Where the form starts: the run's facts where it has them, the planner's defaults
    elsewhere; `facts` and `assumed` say which is which, in words."""
    gpus: int = 64
    device: str = "H100-SXM"
    per_node: int = 8
    network_gbs: float = DEFAULT_NETWORK_GBS
    efficiency: float = DEFAULT_EFFICIENCY
    facts: tuple[str, ...] = ()
    assumed: tuple[str, ...] = ()


def measured_network(report: Report) -> float | None:
    """The best bus bandwidth the run's collectives reached across nodes (GB/s per GPU),
    NCCL's own measurement where it has one; None on one node."""
    seen = [c.measured_bus_bw_gbs or c.bus_bw_gbs for c in report.collectives
            if c.crosses_nodes and not c.is_p2p]
    return max((b for b in seen if b), default=None)


def run_start(report: Report, devices: list[str]) -> Start:
    """The form's start from one run: GPUs, device, GPUs per node, the network bandwidth
    its collectives measured and its kernel efficiency (the MFU waterfall's first stage)."""
    run, facts, assumed = report.run, [], []
    gpus = report.run.world_size
    facts.append(f"GPUs ({gpus})") if gpus else assumed.append("GPUs (8)")
    peak = lookup(run.device)
    device = peak.id if peak and peak.id in devices else None
    (facts.append(f"GPU ({device})") if device else
     assumed.append(f"GPU (H100-SXM: the peak table has no '{run.device}')"))
    per_node = report.layout.gpus_per_node
    (facts.append(f"GPUs per node ({per_node})") if per_node else
     assumed.append("GPUs per node (8)"))
    net = measured_network(report)
    (facts.append(f"network ({net:.1f} GB/s per GPU, measured across nodes)") if net else
     assumed.append(f"network ({DEFAULT_NETWORK_GBS:g} GB/s per GPU: no collective "
                    "crossed nodes)"))
    measured = next((1 + w.points / 100 for w in report.mfu.waterfall
                     if w.name == "kernel_efficiency"), None) if report.mfu.mfu else None
    eff = round(measured, 3) if measured is not None and 0.05 <= measured <= 1 else None
    (facts.append(f"kernel efficiency ({eff:g})") if eff else
     assumed.append(f"kernel efficiency ({DEFAULT_EFFICIENCY:g}: "
                    + ("no MFU for this run)" if measured is None else
                       f"the run's own, {measured:.2g}, is outside 0.05-1)")))
    return Start(gpus=int(gpus or 8), device=device or "H100-SXM", per_node=per_node or 8,
                 network_gbs=net or DEFAULT_NETWORK_GBS, efficiency=eff or DEFAULT_EFFICIENCY,
                 facts=tuple(facts), assumed=(*assumed, *MODEL_ASSUMED))


def _start(ctx: PageContext, devices: list[str]) -> Start:
    if ctx.run is None:
        return Start(assumed=("GPUs (64)", "GPU (H100-SXM)", "GPUs per node (8)",
                              f"network ({DEFAULT_NETWORK_GBS:g} GB/s per GPU)",
                              f"kernel efficiency ({DEFAULT_EFFICIENCY:g})", *MODEL_ASSUMED))
    return run_start(data.report(ctx.config.db, ctx.run, ctx.dtype, ctx.peak_tflops), devices)


PLAN_COLUMNS = {
    "layout": st.column_config.TextColumn(help="tensor, pipeline, data parallel degrees and "
                                               "the ZeRO stage"),
    "mb": st.column_config.NumberColumn(help="microbatches per step"),
    "GB": st.column_config.NumberColumn(help="memory per GPU"),
    "TP ms": st.column_config.NumberColumn(help="tensor-parallel communication per step"),
    "DP ms": st.column_config.NumberColumn(help="exposed data-parallel communication"),
}
# the form's values that no trace tells (the planner's defaults, docs/planner.md)
MODEL_ASSUMED = ("parameters (8 B)", "sequence (8192)", "global batch (4 Mi tokens)")


def render(ctx: PageContext) -> None:
    st.header(HEADER)
    cal, source = (None, "") if ctx.run is None else data.calibration(
        ctx.config.db, ctx.run, ctx.dtype)
    if cal is not None and not st.toggle("Use the fixed assumptions instead", key="pl_fixed"):
        render_calibrated(ctx, cal, source)
        return
    if cal is None and ctx.run is not None:
        st.info(f"Not calibrated on {plain(ctx.run)}: {plain(source)}. Planning with the fixed "
                "assumptions below.")
    render_fixed(ctx)


def _calibration_caption(cal: Calibration, source: str) -> str:
    nvlink, network = tier(cal.links, "nvlink"), tier(cal.links, "network")
    return (f"Calibrated on run **{plain(cal.run)}** ({plain(source)}), the sidebar's run: kernel "
            f"efficiency {cal.kernel_efficiency:.1%}, NVLink {nvlink.latency_us:.1f} µs/hop + "
            f"{nvlink.bus_bw_gbs:.0f} GB/s ({plain(nvlink.source)}), network "
            f"{network.latency_us:.1f} µs/hop + {network.bus_bw_gbs:.0f} GB/s "
            f"({plain(network.source)}), DP overlap {cal.dp_overlap:.2f}"
            + (f", bubble {cal.bubble.ratio:.2f} × its model" if cal.bubble else "")
            + (f", memory {cal.memory.scale:.2f} × the formulas (measured peak "
               f"{cal.memory.measured_gb:.2f} GB {plain(cal.memory.measured_kind)})"
               if cal.memory else "")
            + ". Predictions keep this run's model and global batch.")


def render_calibrated(ctx: PageContext, cal: Calibration, source: str) -> None:
    """Layouts of the run's model predicted from the run's own calibration."""
    st.caption(_calibration_caption(cal, source))
    with st.form("plan_from_form"):
        c = st.columns(4)
        gpus = c[0].number_input("GPUs", 1, 1_000_000, cal.gpus, key="pf_gpus")
        per_node = c[1].number_input("GPUs per node", 1, 1024, cal.gpus_per_node,
                                     key="pf_per_node")
        tp = c[2].selectbox("TP", [ANY, 1, 2, 4, 8, 16, 32, 64], key="pf_tp")
        pp = c[3].number_input("PP (0: any)", 0, 100_000, 0, key="pf_pp")
        st.form_submit_button("Plan", type="primary")
    constraints = Constraints(gpus=int(gpus), gpus_per_node=int(per_node),
                              tp=None if tp == ANY else int(str(tp)), pp=int(pp) or None)
    device = lookup(data.report(ctx.config.db, cal.run, ctx.dtype).run.device)
    try:
        result = plan_from(cal, device, constraints, 15)
    except UsageError as exc:
        st.warning(plain(str(exc)))
        return
    base = result.baseline
    cols = st.columns(2)
    cols[0].metric(f"{plain(cal.run)}, measured", f"{cal.step_ms:.2f} ms, MFU {pct(cal.mfu)}")
    if base is not None:
        cols[1].metric("The model at its layout", f"{base.step_ms:.2f} ms, MFU "
                       f"{pct(base.mfu)}")
    _show(result)


def _show(result: PlanResult) -> None:
    if not result.plans:
        why = result.none_reason or "the GPUs, layers and global batch allow none"
        st.warning(f"No layout among {result.evaluated} evaluated: {plain(why)}.")
        return
    best = result.plans[0]
    st.markdown(f"**Best: TP {best.tp} × PP {best.pp} × DP {best.dp}**, ZeRO {best.zero}, "
                f"{best.microbatches} microbatches of {best.micro_batch}, recompute "
                f"{best.recompute}: predicted MFU **{pct(best.mfu)}**, "
                f"{best.step_ms:.2f} ms/step, {best.memory_gb:.1f} GB per GPU "
                f"({result.feasible} of {result.evaluated} layouts fit).")
    chart_and_table(charts.plan_scatter(result), _frame(result), "layouts", "plans",
                    column_config=PLAN_COLUMNS)
    if best.terms:
        with st.expander("What the best layout's step is made of"):
            st.dataframe(pl.DataFrame([{"term": TERM_LABELS.get(t.name, t.name),
                                        "ms": round(t.ms, 3), "uses": t.uses}
                                       for t in best.terms]), hide_index=True,
                         placeholder=MISSING)


def _frame(result: PlanResult) -> pl.DataFrame:
    """One row per layout, short columns so that none is cut at 1000 px (PLAN_COLUMNS
    explains them)."""
    return pl.DataFrame([{
        "layout": f"TP{p.tp} PP{p.pp} DP{p.dp} Z{p.zero}", "mb": p.microbatches,
        "recompute": p.recompute, "GB": round(p.memory_gb, 1),
        "bubble ms": round(p.bubble_ms, 1), "TP ms": round(p.tp_comm_ms, 1),
        "DP ms": round(p.dp_exposed_ms, 1), "step ms": round(p.step_ms, 1),
        "MFU %": round(100 * p.mfu, 1), "fits": p.fits}
        for p in result.plans])


def render_fixed(ctx: PageContext) -> None:
    """The standard formulas at a fixed kernel efficiency and network bandwidth."""
    devices = [d.id for d in table().devices]
    start = _start(ctx, devices)
    st.caption((f"From the run: {plain(', '.join(start.facts))}. " if start.facts else "")
               + "Assumed until you change them: " + ", ".join(start.assumed) + ".")
    with st.form("plan_form"):
        c = st.columns(4)
        params = c[0].number_input("Parameters (billions)", 0.1, 10_000.0, 8.0, key="pl_params")
        gpus = c[1].number_input("GPUs", 1, 1_000_000, start.gpus, key="pl_gpus")
        device = c[2].selectbox("GPU", devices, index=devices.index(start.device), key="pl_gpu")
        per_node = c[3].number_input("GPUs per node", 1, 64, start.per_node,
                                   key="pl_per_node")
        c = st.columns(4)
        seq = c[0].number_input("Sequence length", 128, 1_048_576, 8192, key="pl_seq")
        batch = c[1].number_input("Global batch (Mi tokens)", 0.125, 1024.0, 4.0, key="pl_batch")
        net = c[2].number_input("Network GB/s per GPU", 1.0, 2000.0,
                                min(max(start.network_gbs, 1.0), 2000.0), key="pl_net")
        eff = c[3].number_input("Kernel efficiency", 0.05, 1.0, start.efficiency, key="pl_eff")
        st.form_submit_button("Plan", type="primary")
    layers, hidden, heads = default_shape(params * 1e9)
    job = Job(params=params * 1e9, gpus=int(gpus), gpus_per_node=int(per_node), seq=int(seq),
              global_batch_tokens=batch * 2**20, layers=layers, hidden=hidden, heads=heads,
              network_gbs=net, efficiency=eff)
    peak = by_id(device)
    assert peak is not None  # chosen from the table
    result = plan_result(job, peak, 15)
    if result.dtype_reason:
        st.caption(plain(result.dtype_reason))
    if not result.plans:
        st.warning(f"No feasible layout among {result.evaluated} evaluated: the model does not "
                   "fit; add GPUs or choose a device with more memory.")
        return
    _show(result)
