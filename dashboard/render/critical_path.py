"""Markdown and HTML of the report's critical-path section (analyzers.results.CriticalPath),
and the `stepscope whatif` output.

Pure functions of the model, self-contained (its own small table and SVG helpers) so the
module moves with the other renderers unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from stepscope.analyzers.results import CriticalPath, StepPath, WhatIfResult
from stepscope.dashboard.render.format import md_code, md_text

TITLE = "Critical path"
PATH_LABELS = {
    "compute": "compute", "recompute": "recompute", "memory": "memcpy/memset",
    "collective": "collective (after its last member arrived)",
    "p2p": "send/recv transfer", "launch": "kernel launch",
    "cpu": "host (CPU before a launch)", "idle": "idle (waiting)",
}
PATH_COLORS = {
    "compute": "#1e88e5", "recompute": "#8e24aa", "memory": "#6d4c41",
    "collective": "#e53935", "p2p": "#fb8c00", "launch": "#7cb342", "cpu": "#00897b",
    "idle": "#bdbdbd",
}
MAX_STEPS_DRAWN = 3
MAX_LANES = 8


def _ranks(ranks: Sequence[int], limit: int = 8) -> str:
    shown = ", ".join(map(str, ranks[:limit]))
    return shown + (f" (+{len(ranks) - limit})" if len(ranks) > limit else "")


def whatif_line(w: WhatIfResult) -> str:
    """One what-if as a sentence with its numbers."""
    return f"{w.sentence[0].upper()}{w.sentence[1:]}"


def _per_step(w: WhatIfResult) -> list[tuple[str, float]]:
    return sorted(w.per_step_ms.items(), key=lambda kv: int(kv[0]))


def whatif_text(w: WhatIfResult) -> str:
    """`stepscope whatif`: the sentence, then the predicted mean window of each step."""
    lines = [whatif_line(w) + ".",
             f"  measured {w.step_time_ms:.3f} ms/step, predicted {w.predicted_step_time_ms:.3f}"
             f" ms/step, " + (f"gain {w.gain_ms:.3f} ms" if w.gain_ms >= 0
                              else f"loss {-w.gain_ms:.3f} ms")]
    lines += [f"  step {k}: {ms:.3f} ms (mean window over ranks)" for k, ms in _per_step(w)]
    return "\n".join(lines)


def whatif_markdown(w: WhatIfResult) -> str:
    out = [f"# What-if: {md_text(w.what)}", "", f"- {md_text(whatif_line(w))}.", "",
           "| step | predicted ms (mean window over ranks) |", "|---:|---:|"]
    out += [f"| {k} | {ms:.3f} |" for k, ms in _per_step(w)]
    return "\n".join(out)


def path_and_step(cp: CriticalPath, step_time_ms: float | None) -> str:
    """The path per step next to the step time, saying which is which: the path is each
    step's reference window (its longest rank's), the step time the mean over ranks of
    each rank's window (the breakdown's); they differ when the ranks' windows do."""
    path = (f"{cp.path_ms:.2f} ms/step on average, each step's reference rank's window "
            "(the rank with the longest window of the step)")
    if step_time_ms is None:
        return path
    gap = cp.path_ms - step_time_ms
    if abs(gap) < 0.005:
        return (f"{path}, as long as the step time (the mean over ranks of each rank's "
                "window, as the breakdown)")
    return (f"{path}: {abs(gap):.2f} ms {'longer' if gap > 0 else 'shorter'} than the step "
            f"time of {step_time_ms:.2f} ms (the mean over ranks of each rank's window, as "
            "the breakdown)")


# ------------------------------------------------------------------ Markdown
def critical_path_markdown(cp: CriticalPath | None,
                           step_time_ms: float | None = None) -> list[str]:
    """The section's Markdown lines (nothing when the report has no section);
    `step_time_ms`: the report's step time, said beside the path per step."""
    if cp is None:
        return []
    out = ["", "## Critical path", ""]
    if cp.message:
        return out + [f"- not computed: {md_text(cp.message)}"]
    out.append(f"- the chain of launches, kernels and collectives that sets each step's "
               f"length, followed across ranks (docs/critical_path.md): "
               f"{path_and_step(cp, step_time_ms)}; {cp.nodes} ops and {cp.edges} "
               "dependencies")
    out += ["", "| step | reference rank | window ms | path ms | mean step ms | jumps "
            "| ranks on the path |", "|---:|---:|---:|---:|---:|---:|---|"]
    out += [f"| {s.step} | {s.reference_rank} | {s.window_ms:.3f} | {s.path_ms:.3f} | "
            f"{s.mean_step_ms:.3f} | {s.jumps} | {_ranks(s.ranks)} |" for s in cp.steps]
    total = sum(cp.by_category_ms.values())
    out += ["", "| on the path | ms/step | share |", "|---|---:|---:|"]
    out += [f"| {PATH_LABELS.get(k, k)} | {ms:.2f} | {100 * ms / total:.1f}% |"
            for k, ms in cp.by_category_ms.items() if ms > 0 and total > 0]
    out += ["", "| rank | ms/step | share |", "|---:|---:|---:|"]
    out += [f"| {r.key} | {r.ms:.2f} | {100 * r.share:.1f}% |" for r in cp.by_rank]
    out += ["", "| top ops on the path | category | ms/step | share | ranks |",
            "|---|---|---:|---:|---|"]
    out += [f"| {md_code(o.op)} | {o.category} | {o.ms:.2f} | {100 * o.share:.1f}% | "
            f"{_ranks(o.ranks)} |" for o in cp.top_ops]
    if cp.whatifs:
        out += ["", "What-if (recomputed on the dependency graph of every step):", ""]
        out += [f"- {md_text(whatif_line(w))}" for w in cp.whatifs]
    out += [f"- note: {md_text(n)}" for n in cp.notes]
    return out


# ------------------------------------------------------------------ HTML
def _e(value: object) -> str:
    return escape(str(value))


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[int]
           ) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def path_svg(step: StepPath, width: int = 900) -> str:
    """The path of one step: a lane per rank on the path (most time first), each run of
    the path on that rank drawn in its main category, time left to right."""
    lanes = list(step.ranks[:MAX_LANES])
    lane_h, left, top = 18, 70, 16
    height = top + lane_h * len(lanes) + 22
    span = max(step.window_ms, 1e-9)
    scale = (width - left - 10) / span
    parts = [f'<text x="{left}" y="11" font-size="11">step {step.step}: '
             f"{step.path_ms:.3f} ms on rank {step.reference_rank}'s window, "
             f"{step.jumps} jumps</text>"]
    for i, rank in enumerate(lanes):
        y = top + i * lane_h
        parts.append(f'<text x="{left - 6}" y="{y + 13}" font-size="11" '
                     f'text-anchor="end">rank {rank}</text>')
    for run in step.runs:
        if run.rank not in lanes:
            continue
        y = top + lanes.index(run.rank) * lane_h
        x, w = left + run.start_ms * scale, max(run.ms * scale, 0.5)
        tip = (f"rank {run.rank}: {run.ms:.3f} ms from {run.start_ms:.3f} ms, "
               f"{run.segments} segment(s), mostly {PATH_LABELS.get(run.category, run.category)}")
        parts.append(f'<rect x="{x:.1f}" y="{y + 2}" width="{w:.1f}" height="{lane_h - 4}" '
                     f'fill="{PATH_COLORS.get(run.category, "#999")}"><title>{_e(tip)}</title>'
                     "</rect>")
    legend_y = height - 6
    x = left
    for cat, color in PATH_COLORS.items():
        parts.append(f'<rect x="{x}" y="{legend_y - 9}" width="10" height="10" fill="{color}"/>'
                     f'<text x="{x + 13}" y="{legend_y}" font-size="10">{_e(cat)}</text>')
        x += 13 + 8 * len(cat) + 12
    return (f'<svg class="chart" role="img" aria-label="critical path of step {step.step}" '
            f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            f'xmlns="http://www.w3.org/2000/svg">{"".join(parts)}</svg>')


def critical_path_html(cp: CriticalPath | None, step_time_ms: float | None = None) -> str:
    """The section as HTML (empty when the report has none); `step_time_ms`: the
    report's step time, said beside the path per step."""
    if cp is None:
        return ""
    head = f'<section id="critical-path"><h2>{_e(TITLE)}</h2>'
    if cp.message:
        return head + f"<p>Not computed: {_e(cp.message)}</p></section>"
    intro = (f"<p>The chain of launches, kernels and collectives that sets each step's "
             f"length, followed across ranks through the collectives: "
             f"{_e(path_and_step(cp, step_time_ms))} ({cp.nodes} ops, {cp.edges} "
             "dependencies).</p>")
    steps = _table(["step", "reference rank", "window ms", "path ms", "mean step ms", "jumps",
                    "ranks on the path"],
                   [[str(s.step), str(s.reference_rank), f"{s.window_ms:.3f}",
                     f"{s.path_ms:.3f}", f"{s.mean_step_ms:.3f}", str(s.jumps),
                     _e(_ranks(s.ranks))] for s in cp.steps], (0, 1, 2, 3, 4, 5))
    total = sum(cp.by_category_ms.values()) or 1.0
    cats = _table(["on the path", "ms/step", "share"],
                  [[_e(PATH_LABELS.get(k, k)), f"{ms:.2f}", f"{100 * ms / total:.1f}%"]
                   for k, ms in cp.by_category_ms.items() if ms > 0], (1, 2))
    ops = _table(["top ops on the path", "category", "ms/step", "share", "ranks"],
                 [[f"<code>{_e(o.op)}</code>", _e(o.category), f"{o.ms:.2f}",
                   f"{100 * o.share:.1f}%", _e(_ranks(o.ranks))] for o in cp.top_ops], (2, 3))
    drawn = "".join(path_svg(s) for s in cp.steps[:MAX_STEPS_DRAWN])
    whatifs = "".join(f"<li>{_e(whatif_line(w))}</li>" for w in cp.whatifs)
    notes = "".join(f"<li>{_e(n)}</li>" for n in cp.notes)
    return (head + intro + drawn + steps + cats + ops
            + (f"<p>What-if, recomputed on the dependency graph of every step:</p>"
               f"<ul>{whatifs}</ul>" if whatifs else "")
            + (f"<ul>{notes}</ul>" if notes else "") + "</section>")
