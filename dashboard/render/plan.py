"""Markdown and JSON rendering of planner results (analyzers.results.PlanResult)."""

from __future__ import annotations

from stepscope.analyzers.results import Calibration, Plan, PlanResult, to_json
from stepscope.dashboard.render.format import md_text, pct

TERM_LABELS = {"compute": "compute (matmuls)", "other_kernels": "other kernels",
               "optimizer": "optimizer", "recompute": "recompute", "memory": "memory copies",
               "tp_comm": "exposed TP communication", "dp_comm": "exposed DP communication",
               "other_comm": "other communication", "bubble": "pipeline bubble",
               "straggler_wait": "straggler wait", "idle": "idle"}


def plan_json(model: PlanResult) -> str:
    return to_json(model)


def plan_markdown(model: PlanResult) -> str:
    if model.calibration is not None:
        return calibrated_markdown(model, model.calibration)
    job = model.job
    out = [f"# stepscope plan: {job.params / 1e9:.0f}B parameters on {job.gpus} "
           f"{md_text(model.device)} ({job.gpus_per_node} per node)", "",
           f"- model: {job.layers} layers, hidden {job.hidden}, {job.heads} heads, "
           f"sequence {job.seq}, global batch {job.global_batch_tokens / 2**20:.1f} Mi "
           f"tokens, micro-batch {job.micro_batch}",
           f"- assumptions: kernel efficiency {job.efficiency:.0%} of the {model.dtype} "
           f"peak, network {job.network_gbs:.0f} GB/s per GPU, NVLink from the peak table",
           *([f"- note: {md_text(model.dtype_reason)}"] if model.dtype_reason else []),
           f"- {model.feasible} feasible layouts of {model.evaluated} evaluated",
           *([f"- no layout fits: {md_text(model.none_reason)}"] if model.none_reason
             else []), "",
           "| # | TP | PP | DP | ZeRO | recompute | v | M | memory GB | bubble ms | TP comm ms "
           "| DP exposed ms | step ms | MFU |",
           "|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for i, p in enumerate(model.plans, start=1):
        out.append(f"| {i} | {p.tp} | {p.pp} | {p.dp} | {p.zero} | "
                   f"{md_text(p.recompute)} | {p.interleave} | {p.microbatches} | "
                   f"{p.memory_gb:.0f} | {p.bubble_ms:.0f} | {p.tp_comm_ms:.0f} | "
                   f"{p.dp_exposed_ms:.0f} | {p.step_ms:.0f} | {pct(p.mfu)} |")
    return "\n".join(out) + "\n"


def calibration_lines(cal: Calibration) -> list[str]:
    """What the run measured, as the planner uses it."""
    out = [f"- run {md_text(cal.run)}: TP{cal.tp} x PP{cal.pp} x DP{cal.dp} on {cal.gpus} "
           f"{md_text(cal.device or 'GPUs')} ({cal.nodes} node(s) of {cal.gpus_per_node}), "
           f"ZeRO {cal.zero} ({md_text(cal.zero_source)}), {cal.microbatches} microbatches "
           f"of {cal.micro_batch} ({md_text(cal.microbatch_source)}); measured "
           f"{cal.step_ms:.2f} ms/step, "
           f"MFU {pct(cal.mfu)}",
           f"- model ({md_text(cal.model.source)}): {cal.model.params / 1e9:.3g}B parameters, "
           f"{cal.model.layers} layers, hidden {cal.model.hidden}, sequence {cal.model.seq}, "
           f"{cal.model.global_batch_tokens:.0f} tokens per step",
           f"- kernel efficiency {cal.kernel_efficiency:.1%} of {cal.peak_tflops:.0f} TFLOP/s "
           f"({md_text(cal.peak_dtype)}); "
           f"recompute share {cal.recompute_share:.1%}", "",
           "| kernels | ms/step | TFLOP/s |", "|---|---:|---:|"]
    out += [f"| {md_text(k.kind)} | {k.ms:.3f} | {'-' if k.tflops is None else f'{k.tflops:.3g}'} |"
            for k in cal.kernels]
    out += ["", "| link | source | latency us/hop | bus GB/s | calls | sizes |",
            "|---|---|---:|---:|---:|---:|"]
    out += [f"| {md_text(t.tier)} | {md_text(t.source)} | {t.latency_us:.2f} | "
            f"{t.bus_bw_gbs:.1f} | {t.calls} | {t.sizes} |" for t in cal.links]
    if cal.dp_hidden_fraction is None:
        out += ["", "- DP gradients: no data-parallel traffic in the run"]
    else:
        out += ["", f"- DP gradients: {cal.dp_buckets} buckets per step, "
                    f"{cal.dp_hidden_fraction:.0%} of their transfer hidden under backward "
                    f"(measured), overlap {cal.dp_overlap:.2f} of the last microbatch's "
                    "backward"]
    if cal.bubble is not None:
        b = cal.bubble
        out.append(f"- pipeline bubble: measured {b.measured_fraction:.1%} of the step vs "
                   f"1F1B theory (S-1)/(S-1+M) {b.theory_fraction:.1%}; {b.measured_ms:.2f} ms "
                   f"measured vs {b.modelled_ms:.2f} ms modelled (ratio {b.ratio:.2f})")
    out.append(memory_line(cal))
    out.append(f"- carried as measured: straggler wait {cal.straggler_wait_ms:.2f} ms, idle "
               f"{cal.idle_ms:.2f} ms")
    out += [f"- assumed: {md_text(a)}" for a in cal.assumptions]
    return out


def memory_line(cal: Calibration) -> str:
    """How the layouts' memory is predicted: scaled to the run's measured peak, or the
    formulas alone."""
    m = cal.memory
    if m is None:
        return ("- memory: the formulas alone (16 B/param under Adam + activations); the run "
                "traced no memory (profile_memory=True would calibrate them)")
    device = (f" of {m.device_memory_gb:.1f} GB on the device" if m.device_memory_gb
              else "")
    return (f"- memory: measured peak {m.measured_gb:.2f} GB {m.measured_kind} (rank "
            f"{m.rank}){device}, the formulas give {m.modelled_gb:.2f} GB at this layout: "
            f"every layout's memory x {m.scale:.3g}")


def _terms_table(plan: Plan) -> list[str]:
    out = ["| term | ms/step | uses |", "|---|---:|---|"]
    out += [f"| {md_text(TERM_LABELS.get(t.name, t.name))} | {t.ms:.3f} | {md_text(t.uses)} |"
            for t in plan.terms]
    return out + [f"| **step** | **{plan.step_ms:.3f}** | MFU {pct(plan.mfu)} |"]


def calibrated_markdown(model: PlanResult, cal: Calibration) -> str:
    """`plan --from RUN`: the calibration, the run as the model sees it, the layouts."""
    job = model.job
    out = [f"# stepscope plan --from {md_text(cal.run)}: {job.params / 1e9:.3g}B parameters "
           f"on {job.gpus} {md_text(model.device)} ({job.gpus_per_node} per node)", "",
           "## Calibration", ""]
    out += calibration_lines(cal)
    if model.baseline is not None:
        base = model.baseline
        out += ["", "## The run as the model sees it", "",
                f"Model at the run's own layout: {base.step_ms:.2f} ms/step, MFU "
                f"{pct(base.mfu)} (measured {cal.step_ms:.2f} ms, {pct(cal.mfu)}).",
                "", "| term | measured ms | model ms |", "|---|---:|---:|"]
        measured = {t.name: t.ms for t in cal.terms}
        out += [f"| {md_text(TERM_LABELS.get(t.name, t.name))} | "
                f"{measured.get(t.name, 0.0):.3f} | "
                f"{t.ms:.3f} |" for t in base.terms]
    out += ["", "## Layouts", "",
            f"No layout{' fits' if model.plans else ''}: {md_text(model.none_reason)}."
            if model.none_reason else
            f"{model.feasible} of {model.evaluated} layouts fit in memory.", "",
            "| # | TP | PP | DP | ZeRO | recompute | M x b | memory GB | fits | step ms | MFU |",
            "|---:|---:|---:|---:|---:|---|---|---:|---|---:|---:|"]
    for i, p in enumerate(model.plans, start=1):
        out.append(f"| {i} | {p.tp} | {p.pp} | {p.dp} | {p.zero} | {md_text(p.recompute)} | "
                   f"{p.microbatches} x {p.micro_batch} | {p.memory_gb:.1f} | "
                   f"{'yes' if p.fits else 'no'} | {p.step_ms:.2f} | {pct(p.mfu)} |")
    if not model.plans:
        why = model.none_reason or "the GPUs, layers and global batch allow none"
        out.append(f"| - | no layout: {md_text(why)} | | | | | | | | | |")
    for i, p in enumerate(model.plans[:3], start=1):
        out += ["", f"### #{i}: TP{p.tp} x PP{p.pp} x DP{p.dp}, ZeRO {p.zero}", ""]
        out += _terms_table(p)
    return "\n".join(out) + "\n"
