"""Static inline SVG charts for the self-contained HTML reports.

Pure functions from numbers to SVG text: no JavaScript, no fonts or files to load, so
the charts show from a file:// URL, in a mail client and on paper. Every chart carries
`role="img"`, an aria-label and a <title>; numbers are printed next to the bars.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

from stepscope.dashboard.render.format import fixed

COLORS = {
    "compute": "#2e7d32", "recompute": "#9ccc65", "exposed_comm": "#e53935",
    "straggler_wait": "#fb8c00", "bubble": "#8e24aa", "memory": "#1e88e5", "idle": "#9e9e9e",
    "kernel_efficiency": "#546e7a",
}
FONT = 'font-family="system-ui, -apple-system, Segoe UI, Roboto, sans-serif" font-size="12"'
ROW_H, GAP = 18, 6


def _svg(width: int, height: int, label: str, body: list[str]) -> str:
    return (f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{width}" '
            f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
            f'aria-label="{escape(label)}" {FONT}><title>{escape(label)}</title>'
            + "".join(body) + "</svg>")


def _rect(x: float, y: float, w: float, h: float, color: str, tip: str) -> str:
    return (f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0.0):.1f}" height="{h:.1f}" '
            f'fill="{color}"><title>{escape(tip)}</title></rect>')


def _text(x: float, y: float, text: str, anchor: str = "start", cls: str = "") -> str:
    klass = f' class="{cls}"' if cls else ""
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{klass}>'
            f"{escape(text)}</text>")


def legend(categories: Sequence[str], labels: Mapping[str, str], width: int) -> tuple[
        list[str], int]:
    """Colour keys wrapped over as many lines as needed; returns (elements, height)."""
    out, x, y = [], 0.0, 12.0
    for cat in categories:
        w = 22 + 7 * len(labels[cat])
        if x + w > width:
            x, y = 0.0, y + 16
        out.append(f'<rect x="{x:.1f}" y="{y - 9:.1f}" width="10" height="10" '
                   f'fill="{COLORS[cat]}"/>')
        out.append(_text(x + 14, y, labels[cat]))
        x += w
    return out, int(y + 10)


def stacked_bars(rows: Sequence[tuple[str, Mapping[str, float]]], categories: Sequence[str],
                 labels: Mapping[str, str], title: str, unit: str = "ms",
                 width: int = 760, label_w: int = 130) -> str:
    """One horizontal bar per row, split by category, scaled to the longest row."""
    leg, top = legend(categories, labels, width)
    top += 8
    longest = max((sum(v.get(c, 0.0) for c in categories) for _, v in rows), default=0.0)
    plot_w = width - label_w - 70
    scale = plot_w / longest if longest > 0 else 0.0
    body = list(leg)
    for i, (name, values) in enumerate(rows):
        y = top + i * (ROW_H + GAP)
        body.append(_text(label_w - 6, y + ROW_H - 5, name, "end"))
        x = float(label_w)
        total = 0.0
        for cat in categories:
            v = values.get(cat, 0.0)
            if v <= 0:
                continue
            body.append(_rect(x, y, v * scale, ROW_H, COLORS[cat],
                              f"{name}: {labels[cat]} {v:.2f} {unit}"))
            x += v * scale
            total += v
        body.append(_text(x + 4, y + ROW_H - 5, f"{total:.2f} {unit}"))
    height = top + len(rows) * (ROW_H + GAP)
    return _svg(width, height, title, body)


def waterfall(stages: Sequence[tuple[str, str, float]], final: float, title: str,
              width: int = 760, label_w: int = 230) -> str:
    """MFU waterfall: a 100% bar, then each stage's lost points (name, label, points<=0)
    as a floating bar, ending at the MFU bar."""
    plot_w = width - label_w - 80
    scale = plot_w / 100.0
    body, level = [], 100.0
    rows = [("peak", "peak FLOP/s", 100.0), *stages, ("mfu", "= MFU", final)]
    for i, (name, label, points) in enumerate(rows):
        y = 4 + i * (ROW_H + GAP)
        body.append(_text(label_w - 6, y + ROW_H - 5, label, "end"))
        if name in ("peak", "mfu"):
            color = "#37474f" if name == "peak" else "#2e7d32"
            body.append(_rect(label_w, y, points * scale, ROW_H, color,
                              f"{label}: {fixed(points)}%"))
            body.append(_text(label_w + points * scale + 4, y + ROW_H - 5, f"{fixed(points)}%"))
            continue
        lost = -points
        left = level - lost
        body.append(_rect(label_w + left * scale, y, lost * scale, ROW_H,
                          COLORS.get(name, "#757575"),
                          f"{label}: {fixed(points, 2, signed=True)} points"))
        body.append(_text(label_w + level * scale + 4, y + ROW_H - 5,
                          fixed(points, signed=True)))
        level = left
    return _svg(width, 8 + len(rows) * (ROW_H + GAP), title, body)


def diverging_bars(items: Sequence[tuple[str, str, float]], title: str, unit: str,
                   width: int = 760, label_w: int = 230) -> str:
    """Signed values (name, label, value) around a zero axis: losses left in red,
    gains right in green."""
    span = max((abs(v) for _, _, v in items), default=0.0) or 1.0
    margin = 84  # room for the value printed beside the longest bar
    half = (width - label_w - 2 * margin) / 2
    zero = label_w + margin + half
    body = [f'<line x1="{zero:.1f}" y1="0" x2="{zero:.1f}" '
            f'y2="{len(items) * (ROW_H + GAP) + 4}" stroke="#424242"/>']
    for i, (_, label, v) in enumerate(items):
        y = 4 + i * (ROW_H + GAP)
        w = abs(v) / span * half
        x = zero - w if v < 0 else zero
        body.append(_text(label_w - 6, y + ROW_H - 5, label, "end"))
        body.append(_rect(x, y, w, ROW_H, "#e53935" if v < 0 else "#43a047",
                          f"{label}: {fixed(v, 2, signed=True)} {unit}"))
        tx, anchor = (x - 4, "end") if v < 0 else (x + w + 4, "start")
        body.append(_text(tx, y + ROW_H - 5, f"{fixed(v, 2, signed=True)} {unit}", anchor))
    return _svg(width, 8 + len(items) * (ROW_H + GAP), title, body)
