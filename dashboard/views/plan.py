"""Plan: the layout planner (`stepscope plan`) as a form: candidate TP/PP/DP/ZeRO
layouts with memory, communication, bubble and predicted MFU."""

from __future__ import annotations

import polars as pl
import streamlit as st

from stepscope.analyzers.peaks import by_id, lookup, table
from stepscope.analyzers.planner import (
    DEFAULT_EFFICIENCY,
    DEFAULT_NETWORK_GBS,
    Job,
    default_shape,
    plan_result,
)
from stepscope.dashboard import charts, data
from stepscope.dashboard.context import PageContext
from stepscope.dashboard.render.format import pct
from stepscope.dashboard.widgets import chart_and_table

TITLE = "Plan"
HEADER = "Plan a layout"


def _defaults(ctx: PageContext) -> tuple[int, str]:
    """GPUs and device of the selected run, so the form starts from the user's job."""
    devices = [d.id for d in table().devices]
    if ctx.run is None:
        return 64, "H100-SXM"
    report = data.report(ctx.config.db, ctx.run, ctx.dtype)
    peak = lookup(report.run.device)
    return int(report.run.world_size or 8), peak.id if peak and peak.id in devices else "H100-SXM"


def render(ctx: PageContext) -> None:
    st.header(HEADER)
    gpus0, device0 = _defaults(ctx)
    devices = [d.id for d in table().devices]
    with st.form("plan_form"):
        c = st.columns(4)
        params = c[0].number_input("Parameters (billions)", 0.1, 10_000.0, 8.0, key="pl_params")
        gpus = c[1].number_input("GPUs", 1, 1_000_000, gpus0, key="pl_gpus")
        device = c[2].selectbox("GPU", devices, index=devices.index(device0), key="pl_gpu")
        per_node = c[3].number_input("GPUs per node", 1, 64, 8, key="pl_per_node")
        c = st.columns(4)
        seq = c[0].number_input("Sequence length", 128, 1_048_576, 8192, key="pl_seq")
        batch = c[1].number_input("Global batch (Mi tokens)", 0.125, 1024.0, 4.0, key="pl_batch")
        net = c[2].number_input("Network GB/s per GPU", 1.0, 2000.0, DEFAULT_NETWORK_GBS,
                                key="pl_net")
        eff = c[3].number_input("Kernel efficiency", 0.05, 1.0, DEFAULT_EFFICIENCY, key="pl_eff")
        st.form_submit_button("Plan", type="primary")
    layers, hidden, heads = default_shape(params * 1e9)
    job = Job(params=params * 1e9, gpus=int(gpus), gpus_per_node=int(per_node), seq=int(seq),
              global_batch_tokens=batch * 2**20, layers=layers, hidden=hidden, heads=heads,
              network_gbs=net, efficiency=eff)
    peak = by_id(device)
    assert peak is not None  # chosen from the table
    result = plan_result(job, peak, 15)
    if result.dtype_reason:
        st.caption(result.dtype_reason)
    if not result.plans:
        st.warning(f"No feasible layout among {result.evaluated} evaluated: the model does not "
                   "fit; add GPUs or choose a device with more memory.")
        return
    best = result.plans[0]
    st.markdown(f"**Best: TP {best.tp} × PP {best.pp} × DP {best.dp}**, ZeRO {best.zero}, "
                f"{best.microbatches} microbatches, recompute {best.recompute}: predicted "
                f"MFU **{pct(best.mfu)}**, {best.step_ms:.0f} ms/step, "
                f"{best.memory_gb:.1f} GB per GPU ({result.feasible} of {result.evaluated} "
                "layouts fit).")
    frame = pl.DataFrame([{
        "TP": p.tp, "PP": p.pp, "DP": p.dp, "ZeRO": p.zero, "microbatches": p.microbatches,
        "recompute": p.recompute, "memory GB": round(p.memory_gb, 1),
        "bubble ms": round(p.bubble_ms, 1), "TP comm ms": round(p.tp_comm_ms, 1),
        "DP exposed ms": round(p.dp_exposed_ms, 1), "step ms": round(p.step_ms, 1),
        "MFU %": round(100 * p.mfu, 1), "TP link": p.tp_link, "fits": p.fits}
        for p in result.plans])
    chart_and_table(charts.plan_scatter(result), frame, "layouts", "plans", side=False)
