"""Markdown rendering of a run diff (analyzers.diff.build_diff)."""

from __future__ import annotations

from typing import Any

from analyzers.attribution import CATEGORIES
from analyzers.diff import LABELS, STAGES
from dashboard import strict_json
from dashboard.render_report import recommendation_lines


def diff_json(diff: dict[str, Any]) -> str:
    return strict_json.dumps(diff, indent=2, default=str)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _n(v: Any, fmt: str = ".2f") -> str:
    return "-" if v is None else format(v, fmt)


def diff_markdown(d: dict[str, Any]) -> str:
    a, b = d["a"], d["b"]
    out = [f"# stepscope diff: {a['run']} -> {b['run']}", "", d["narrative"], "",
           "| | " + f"{a['run']} | {b['run']} | change |", "|---|---:|---:|---:|",
           f"| MFU | {_pct(a['mfu'])} | {_pct(b['mfu'])} | "
           f"{_n(d['mfu_delta_points'], '+.1f')} pts |",
           f"| step time ms | {a['step_time_ms']:.2f} | {b['step_time_ms']:.2f} | "
           f"{d['step_time_delta_ms']:+.2f} |"]
    for cat in CATEGORIES:
        out.append(f"| {LABELS[cat]} ms | {a['breakdown_ms'][cat]:.2f} | "
                   f"{b['breakdown_ms'][cat]:.2f} | {d['breakdown_delta_ms'][cat]:+.2f} |")
    pts = d["mfu_points_by_category"]
    out += ["", "## MFU points by cause", ""]
    if pts is None:
        out.append("- not available: MFU needs a known peak and model FLOPs on both runs")
    else:
        out += ["| stage | points |", "|---|---:|"]
        out += [f"| {LABELS[s]} | {pts[s]:+.2f} |" for s in STAGES]
        out.append(f"| **total** | **{sum(pts.values()):+.2f}** |")
    out += ["", "## Setup changes", ""]
    out += [f"- {c['what']}: {c['a']} -> {c['b']}" for c in d["setup_changes"]] or [
        "- none"]
    out += ["", "## Communication (per rank and step)", "",
            "| collective | group | exposed ms | bus GB/s | link |", "|---|---|---:|---:|---|"]
    for c in d["collectives"]:
        ca, cb = c["a"] or {}, c["b"] or {}
        out.append(f"| {c['collective']} | {c['group']} | {_n(ca.get('exposed_ms'))} -> "
                   f"{_n(cb.get('exposed_ms'))} | {_n(ca.get('bus_bw_gbs'), '.0f')} -> "
                   f"{_n(cb.get('bus_bw_gbs'), '.0f')} | {cb.get('link') or ca.get('link')} |")
    s = d["stragglers"]
    out += ["", "## Stragglers", ""]
    out += [f"- new: rank {x['rank']} ({x['host']})" for x in s["new"]]
    out += [f"- resolved: rank {x['rank']} ({x['host']})" for x in s["resolved"]]
    out += [f"- still: rank {x['rank']} ({x['host']})" for x in s["persisting"]]
    if not any(s.values()):
        out.append("- none on either run")
    out += ["", "## Largest changes per op (ms per rank and step)", "",
            "| op | a | b | change |", "|---|---:|---:|---:|"]
    out += [f"| `{o['op'][:80]}` | {o['a_ms']:.3f} | {o['b_ms']:.3f} | {o['delta_ms']:+.3f} |"
            for o in d["top_ops"]]
    out += recommendation_lines(d["recommendations"])
    return "\n".join(out) + "\n"
