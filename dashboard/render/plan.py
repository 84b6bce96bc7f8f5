"""Markdown and JSON rendering of planner results (analyzers.model.PlanResult)."""

from __future__ import annotations

from stepscope.analyzers.model import PlanResult, to_json
from stepscope.dashboard.render.format import pct


def plan_json(model: PlanResult) -> str:
    return to_json(model)


def plan_markdown(model: PlanResult) -> str:
    job = model.job
    out = [f"# stepscope plan: {job.params / 1e9:.0f}B parameters on {job.gpus} "
           f"{model.device} ({job.gpus_per_node} per node)", "",
           f"- model: {job.layers} layers, hidden {job.hidden}, {job.heads} heads, "
           f"sequence {job.seq}, global batch {job.global_batch_tokens / 2**20:.1f} Mi "
           f"tokens, micro-batch {job.micro_batch}",
           f"- assumptions: kernel efficiency {job.efficiency:.0%} of the {model.dtype} "
           f"peak, network {job.network_gbs:.0f} GB/s per GPU, NVLink from the peak table",
           *([f"- note: {model.dtype_reason}"] if model.dtype_reason else []),
           f"- {model.feasible} feasible layouts of {model.evaluated} evaluated", "",
           "| # | TP | PP | DP | ZeRO | recompute | v | M | memory GB | bubble ms | TP comm ms "
           "| DP exposed ms | step ms | MFU |",
           "|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for i, p in enumerate(model.plans, start=1):
        out.append(f"| {i} | {p.tp} | {p.pp} | {p.dp} | {p.zero} | "
                   f"{p.recompute} | {p.interleave} | {p.microbatches} | "
                   f"{p.memory_gb:.0f} | {p.bubble_ms:.0f} | {p.tp_comm_ms:.0f} | "
                   f"{p.dp_exposed_ms:.0f} | {p.step_ms:.0f} | {pct(p.mfu)} |")
    return "\n".join(out) + "\n"
