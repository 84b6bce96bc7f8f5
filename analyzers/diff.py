"""What changed between two runs, and what it cost in MFU (docs/diff.md).

The MFU change is split over the stages of the MFU waterfall (kernel efficiency, then
each non-compute category): each run's waterfall adds up exactly to its MFU, so the
per-stage differences add up exactly to the MFU change.
"""

from __future__ import annotations

from typing import Any

from analyzers.attribution import CATEGORIES
from analyzers.report import REPORT_SCHEMA_VERSION

DIFF_SCHEMA_VERSION = 1
STAGES = ("kernel_efficiency", *[c for c in CATEGORIES if c != "compute"])
LABELS = {"kernel_efficiency": "kernel efficiency", "compute": "compute",
          "recompute": "recompute", "exposed_comm": "exposed communication",
          "straggler_wait": "straggler wait", "bubble": "pipeline bubble",
          "memory": "memory copies", "idle": "idle"}


def summarize(report: dict[str, Any]) -> dict[str, Any]:
    """The part of a report that a diff shows for each side."""
    mfu = report.get("mfu") or {}
    return {
        "run": report["run"]["name"], "world_size": report["run"]["world_size"],
        "hosts": len(report["run"]["hosts"]), "device": report["run"]["device"],
        "layout": report["layout"], "step_time_ms": report["step_time_ms"],
        "breakdown_ms": report["breakdown_ms"], "mfu": mfu.get("mfu"), "hfu": mfu.get("hfu"),
        "model_flops_per_step": mfu.get("model_flops_per_step"),
        "microbatches": (report["pipeline"] or {}).get("microbatches"),
        "stragglers": [{"rank": s["rank"], "host": s["host"], "waited_on_ms": s["waited_on_ms"]}
                       for s in report["stragglers"]],
        "report_schema_version": REPORT_SCHEMA_VERSION,
    }


def _waterfall_points(report: dict[str, Any]) -> dict[str, float] | None:
    mfu = report.get("mfu") or {}
    if mfu.get("mfu") is None:
        return None
    return {w["name"]: w["points"] for w in mfu["waterfall"]}


def mfu_points_by_category(a: dict[str, Any], b: dict[str, Any]) -> dict[str, float] | None:
    wa, wb = _waterfall_points(a), _waterfall_points(b)
    if wa is None or wb is None:
        return None
    return {stage: wb[stage] - wa[stage] for stage in STAGES}


def setup_changes(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """Every setup fact that differs: world, hosts, GPU, layout degrees, microbatches,
    process-group sizes."""
    la, lb = a["layout"], b["layout"]
    facts = [
        ("world_size", a["run"]["world_size"], b["run"]["world_size"]),
        ("nodes", la["nodes"], lb["nodes"]),
        ("gpus_per_node", la["gpus_per_node"], lb["gpus_per_node"]),
        ("device", a["run"]["device"], b["run"]["device"]),
        *[(k, la[k], lb[k]) for k in ("tp", "pp", "dp", "cp", "ep")],
        ("microbatches", (a["pipeline"] or {}).get("microbatches"),
         (b["pipeline"] or {}).get("microbatches")),
    ]
    sizes_a = {c["group_label"]: c["group_size"] for c in a.get("collectives") or []}
    sizes_b = {c["group_label"]: c["group_size"] for c in b.get("collectives") or []}
    for label in sorted(set(sizes_a) | set(sizes_b)):
        facts.append((f"group size {label}", sizes_a.get(label), sizes_b.get(label)))
    return [{"what": what, "a": va, "b": vb} for what, va, vb in facts if va != vb]


def collective_changes(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    keys = ("calls_per_step", "bytes_per_step", "time_ms", "exposed_ms", "bus_bw_gbs",
            "link", "link_peak_gbs", "link_utilization", "group_size")
    ca = {(c["collective"], c["group_label"]): c for c in a.get("collectives") or []}
    cb = {(c["collective"], c["group_label"]): c for c in b.get("collectives") or []}
    out = []
    for key in sorted(set(ca) | set(cb)):
        ra, rb = ca.get(key), cb.get(key)
        out.append({
            "collective": key[0], "group": key[1],
            "a": {k: ra[k] for k in keys} if ra else None,
            "b": {k: rb[k] for k in keys} if rb else None,
            "exposed_delta_ms": ((rb["exposed_ms"] if rb else 0.0)
                                 - (ra["exposed_ms"] if ra else 0.0)),
        })
    return sorted(out, key=lambda c: -abs(c["exposed_delta_ms"]))


def op_changes(ops_a: dict[str, float], ops_b: dict[str, float],
               top: int = 10) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [
            {"op": op, "a_ms": ops_a.get(op, 0.0), "b_ms": ops_b.get(op, 0.0),
             "delta_ms": ops_b.get(op, 0.0) - ops_a.get(op, 0.0)}
            for op in set(ops_a) | set(ops_b)]
    return sorted(rows, key=lambda r: (-abs(r["delta_ms"]), r["op"]))[:top]


def straggler_changes(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    ra = {s["rank"]: s for s in a["stragglers"]}
    rb = {s["rank"]: s for s in b["stragglers"]}
    return {"new": [rb[r] for r in sorted(set(rb) - set(ra))],
            "resolved": [ra[r] for r in sorted(set(ra) - set(rb))],
            "persisting": [rb[r] for r in sorted(set(ra) & set(rb))]}


def build_diff(a: dict[str, Any], b: dict[str, Any], ops_a: dict[str, float],
               ops_b: dict[str, float]) -> dict[str, Any]:
    """The diff model: JSON-ready (times ms, MFU points = percentage points)."""
    mfu_a, mfu_b = (a.get("mfu") or {}).get("mfu"), (b.get("mfu") or {}).get("mfu")
    delta = {c: b["breakdown_ms"][c] - a["breakdown_ms"][c] for c in CATEGORIES}
    diff: dict[str, Any] = {
        "schema_version": DIFF_SCHEMA_VERSION,
        "a": summarize(a), "b": summarize(b),
        "mfu_delta_points": 100 * (mfu_b - mfu_a) if mfu_a is not None and mfu_b is not None
        else None,
        "step_time_delta_ms": b["step_time_ms"] - a["step_time_ms"],
        "breakdown_delta_ms": delta,
        "mfu_points_by_category": mfu_points_by_category(a, b),
        "setup_changes": setup_changes(a, b),
        "collectives": collective_changes(a, b),
        "stragglers": straggler_changes(a, b),
        "top_ops": op_changes(ops_a, ops_b),
        "recommendations": b.get("recommendations") or [],
    }
    diff["narrative"] = narrative(diff)
    return diff


def _fmt_change(what: str, va: Any, vb: Any) -> str:
    return f"{what} {va} -> {vb}"


def narrative(d: dict[str, Any]) -> str:
    """A few sentences naming the top causes with numbers."""
    a, b = d["a"], d["b"]
    parts = []
    if d["mfu_delta_points"] is not None:
        verb = "fell" if d["mfu_delta_points"] < 0 else "rose"
        parts.append(f"MFU {verb} {100 * a['mfu']:.1f}% -> {100 * b['mfu']:.1f}% "
                     f"({d['mfu_delta_points']:+.1f} pts); step time "
                     f"{a['step_time_ms']:.1f} -> {b['step_time_ms']:.1f} ms.")
    else:
        parts.append(f"Step time {a['step_time_ms']:.1f} -> {b['step_time_ms']:.1f} ms "
                     f"({d['step_time_delta_ms']:+.1f} ms); no MFU (unknown peak or FLOPs).")
    causes = _top_causes(d)
    if causes:
        parts.append("Top causes: " + "; ".join(causes) + ".")
    setup = [_fmt_change(c["what"], c["a"], c["b"]) for c in d["setup_changes"]
             if c["what"] in ("world_size", "nodes", "device", "tp", "pp", "dp", "microbatches")]
    if setup:
        parts.append("Setup: " + ", ".join(setup) + ".")
    return " ".join(parts)


def _top_causes(d: dict[str, Any]) -> list[str]:
    by_points = d["mfu_points_by_category"]
    delta = d["breakdown_delta_ms"]
    if by_points is not None:
        ranked = sorted(by_points.items(), key=lambda kv: kv[1])
        items = [(k, v) for k, v in ranked if v < -0.5][:3]
    else:
        ranked = sorted(delta.items(), key=lambda kv: -kv[1])
        items = [(k, None) for k, v in ranked if v > 0.05 * max(d["a"]["step_time_ms"], 1e-9)][:3]
    out = []
    for cat, pts in items:
        text = LABELS[cat]
        if cat in delta:
            text += f" {delta[cat]:+.2f} ms/step"
        if pts is not None:
            text += f" ({pts:+.1f} pts)"
        text += _why(cat, d)
        out.append(text)
    return out


def _why(cat: str, d: dict[str, Any]) -> str:
    if cat in ("exposed_comm", "straggler_wait") and d["collectives"]:
        c = d["collectives"][0]
        ca, cb = c["a"] or {}, c["b"] or {}
        bits = [f"{c['collective']} on {c['group']} exposed "
                f"{ca.get('exposed_ms', 0.0):.2f} -> {cb.get('exposed_ms', 0.0):.2f} ms"]
        if ca.get("group_size") != cb.get("group_size") and ca and cb:
            bits.append(f"the group grew {ca['group_size']} -> {cb['group_size']}")
        if ca.get("bus_bw_gbs") and cb.get("bus_bw_gbs"):
            bits.append(f"bus bandwidth {ca['bus_bw_gbs']:.0f} -> {cb['bus_bw_gbs']:.0f} GB/s")
        text = " as " + ", ".join(bits)
        if cat == "straggler_wait" and d["stragglers"]["new"]:
            s = d["stragglers"]["new"][0]
            text = f": rank {s['rank']} (host {s['host']}) straggles, the others wait " \
                   f"{s['waited_on_ms']:.1f} ms/step in total"
        return text
    if cat == "kernel_efficiency":
        return " (compute runs further below peak)"
    return ""
