"""Markdown and JSON rendering of a run diff (analyzers.results.Diff)."""

from __future__ import annotations

from stepscope.analyzers.results import CollectiveChange, CollectiveSide, Diff, Expected, to_json
from stepscope.dashboard.render.format import (
    DASH,
    md_code,
    md_text,
    mfu_points,
    num,
    pct,
    points,
    short_names,
)
from stepscope.dashboard.render.labels import CATEGORIES, COMM_SPLIT, STAGE_LABELS, STAGES
from stepscope.dashboard.render.plan import TERM_LABELS
from stepscope.dashboard.render.report import recommendation_lines


def diff_json(diff: Diff) -> str:
    return to_json(diff)


def _summary_table(d: Diff) -> list[str]:
    a, b = d.a, d.b
    out = ["| | " + f"{md_text(a.run)} | {md_text(b.run)} | change |", "|---|---:|---:|---:|",
           f"| MFU | {pct(a.mfu)} | {pct(b.mfu)} | {mfu_points(d.mfu_delta_points)} pts |",
           f"| step time ms | {a.step_time_ms:.2f} | {b.step_time_ms:.2f} | "
           f"{d.step_time_delta_ms:+.2f} |"]
    for cat in CATEGORIES:
        out.append(f"| {STAGE_LABELS[cat]} ms | {a.breakdown_ms.ms(cat):.2f} | "
                   f"{b.breakdown_ms.ms(cat):.2f} | {d.breakdown_delta_ms.ms(cat):+.2f} |")
    return out


def _points_lines(d: Diff) -> list[str]:
    pts = d.mfu_points_by_category
    out = ["", "## MFU points by cause", ""]
    if pts is None:
        return out + ["- not available: MFU needs a known peak and model FLOPs on both runs"]
    out += ["| stage | points |", "|---|---:|"]
    out += [f"| {STAGE_LABELS[s]} | {points(pts.points(s), 2, signed=True)} |" for s in STAGES]
    out.append(f"| **total** | **{points(sum(pts.as_dict().values()), 2, signed=True)}** |")
    return out


def _collective_lines(d: Diff) -> list[str]:
    out = ["", "## Communication (per rank and step)", "", COMM_SPLIT, "",
           "| collective | group | exposed ms | straggler wait ms | overlapped ms | bus GB/s "
           "| link |", "|---|---|---:|---:|---:|---:|---|"]
    for c in d.collectives:
        ca, cb = c.a, c.b
        link = (cb.link if cb else None) or (ca.link if ca else None)
        out.append(f"| {md_text(c.collective)} | {md_text(c.group)} | "
                   f"{side_change(c, 'exposed_ms')} | "
                   f"{side_change(c, 'straggler_wait_ms')} | "
                   f"{side_change(c, 'overlapped_ms')} | "
                   f"{side_change(c, 'bus_bw_gbs', '.0f')} | {md_text(link)} |")
    return out


def side_change(c: CollectiveChange, field: str, spec: str = ".2f", missing: str = DASH,
                arrow: str = "->") -> str:
    """'a -> b' of one field of a collective's two sides (`missing` where a side lacks
    the collective); the HTML diff uses it too."""
    def side(s: CollectiveSide | None) -> str:
        return num(None if s is None else getattr(s, field), spec, missing)
    return f"{side(c.a)} {arrow} {side(c.b)}"


def _straggler_lines(d: Diff) -> list[str]:
    s = d.stragglers
    out = ["", "## Stragglers", ""]
    out += [f"- new: rank {x.rank} ({md_text(x.host)})" for x in s.new]
    out += [f"- resolved: rank {x.rank} ({md_text(x.host)})" for x in s.resolved]
    out += [f"- still: rank {x.rank} ({md_text(x.host)})" for x in s.persisting]
    if not (s.new or s.resolved or s.persisting):
        out.append("- none on either run")
    return out


def expected_lines(e: Expected | None) -> list[str]:
    """B as expected from A at B's scale and layout, beside the measured B."""
    if e is None:
        return []
    out = ["", "## Expected from A at B's scale and layout", "", md_text(e.narrative), "",
           f"Expected {e.step_ms:.2f} ms/step, MFU {pct(e.mfu)} ({md_text(e.layout)}).", "",
           "| term | A ms | expected B ms | B ms | expected pts | departure pts | why |",
           "|---|---:|---:|---:|---:|---:|---|"]
    for c in e.terms:
        if max(c.a_ms, c.expected_ms, c.b_ms) <= 0:
            continue
        why = md_text(c.why) if abs(c.departure_points or 0.0) >= 0.5 else ""
        out.append(f"| {md_text(TERM_LABELS.get(c.term, c.term))} | {c.a_ms:.3f} | "
                   f"{c.expected_ms:.3f} | {c.b_ms:.3f} | {num(c.expected_points, '+.2f')} | "
                   f"{num(c.departure_points, '+.2f')} | {why} |")
    out.append(f"| **step / MFU change** | | **{e.step_ms:.3f}** | | "
               f"**{num(e.mfu_delta_points, '+.2f')}** | **{num(e.departure_points, '+.2f')}** | |")
    if e.assumptions:
        out += ["", *(f"- assumed: {md_text(a)}" for a in e.assumptions)]
    return out


def diff_markdown(d: Diff) -> str:
    out = [f"# stepscope diff: {md_text(d.a.run)} -> {md_text(d.b.run)}", "",
           md_text(d.narrative), ""]
    out += _summary_table(d)
    out += expected_lines(d.expected)
    out += _points_lines(d)
    out += ["", "## Setup changes", ""]
    out += [f"- {md_text(c.what)}: {md_text(c.a)} -> {md_text(c.b)}"
            for c in d.setup_changes] or ["- none"]
    out += _collective_lines(d)
    out += _straggler_lines(d)
    out += ["", "## Largest changes per op (ms per rank and step)", "",
            "| op | a | b | change |", "|---|---:|---:|---:|"]
    shown = short_names([o.op for o in d.top_ops], 80)
    out += [f"| {md_code(name)} | {o.a_ms:.3f} | {o.b_ms:.3f} | {o.delta_ms:+.3f} |"
            for name, o in zip(shown, d.top_ops, strict=True)]
    out += recommendation_lines(d.recommendations, d.b.step_time_ms)
    return "\n".join(out) + "\n"
