"""The Timeline draws by time (issue 45, point 2): what falls within a pixel is
aggregated, so the colours' shares on screen are the breakdown's.

A step shaped like rank 0 of the 64-GPU DeepSeek-V3 job: 120 ms, 657 exposed collectives
of 6 µs (3.3%) and 243 idle gaps of 2 µs (0.4%) among compute. Drawn a bar per segment,
the browser widens each thin bar to a pixel and the exposed share on screen is ~30%; drawn
by time (analyzers.detail.draw_by_time) it is the breakdown's within a point. Checked on
the pixels of a headless-Chromium screenshot of the dashboard's own chart."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from offline_browser import artifacts_dir, open_offline

from stepscope.analyzers.detail import CATEGORY_CODES, StepTimeline, dither, draw_by_time
from stepscope.dashboard.app import charts
from stepscope.dashboard.app.data import TIMELINE_PIXELS

WINDOW_NS = 120_000_000
CODE = {v: k for k, v in CATEGORY_CODES.items()}


def deepseek_like() -> dict[str, Any]:
    """Rank 0's segments: thin exposed collectives and idle gaps evenly among compute."""
    thin = [(t, 6_000, CODE["exposed_comm"]) for t in np.linspace(50_000, 119_000_000, 657)]
    thin += [(t + 20_000, 2_000, CODE["idle"]) for t in np.linspace(80_000, 118_500_000, 243)]
    thin.sort()
    rows, at = [], 0
    for start, dur, cat in thin:
        start = int(start)
        rows.append((at, start, CODE["compute"]))
        rows.append((start, start + dur, cat))
        at = start + dur
    rows.append((at, WINDOW_NS, CODE["compute"]))
    s, e, c = (np.array(col, dtype=np.int64) for col in zip(*rows, strict=True))
    return {"rank": np.zeros(s.size, dtype=np.int64), "start_ns": s, "end_ns": e, "cat": c,
            "name": np.array([f"op{i % 7}" for i in range(s.size)], dtype=object)}


def truth(seg: dict[str, Any]) -> dict[str, float]:
    dur = seg["end_ns"] - seg["start_ns"]
    return {name: float(dur[seg["cat"] == code].sum()) / WINDOW_NS
            for code, name in CATEGORY_CODES.items()}


def timelines(seg: dict[str, Any]) -> dict[str, StepTimeline]:
    common = {"run": "r", "step": 1, "ranks": (0,), "window_ms": (WINDOW_NS / 1e6,),
              "offset_ms": (0.0,)}
    exact = StepTimeline(**common, rank=tuple(int(r) for r in seg["rank"]),
                         start_ms=tuple(seg["start_ns"] / 1e6), end_ms=tuple(seg["end_ns"] / 1e6),
                         category=tuple(CATEGORY_CODES[int(c)] for c in seg["cat"]),
                         bin_ms=None)
    width = WINDOW_NS / TIMELINE_PIXELS
    rank, start, end, cat, _ = draw_by_time(seg, (0,), width, TIMELINE_PIXELS)
    by_time = StepTimeline(**common, rank=rank, start_ms=start, end_ms=end, category=cat,
                           bin_ms=width / 1e6)
    return {"a bar per segment": exact, "by time": by_time}


def test_drawn_widths_are_the_shares() -> None:
    seg = deepseek_like()
    want = truth(seg)
    assert want["exposed_comm"] == pytest.approx(0.0329, abs=1e-3)
    tl = timelines(seg)["by time"]
    drawn: dict[str, float] = dict.fromkeys(want, 0.0)
    for s, e, c in zip(tl.start_ms, tl.end_ms, tl.category, strict=True):
        drawn[c] += (e - s) * 1e6 / WINDOW_NS
    for name, share in want.items():
        assert drawn[name] == pytest.approx(share, abs=1 / TIMELINE_PIXELS), name


def test_dither_keeps_every_category_within_one_bin() -> None:
    rng = np.random.default_rng(3)
    times = rng.dirichlet(np.full(7, 0.3), size=400) * 100.0
    drawn = dither(times, 100.0)
    for code in range(1, 8):
        assert abs((drawn == code).sum() - times[:, code - 1].sum() / 100.0) <= 1.0


def _pixel_shares(png: bytes) -> dict[str, float]:
    """Each category colour's share of the pixels of any category colour (nearest
    colour within a small distance: edges blend with the background)."""
    from PIL import Image

    img = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(float)
    names = [n for n in CATEGORY_CODES.values()]
    colours = np.array([[int(charts.COLORS[n][i:i + 2], 16) for i in (1, 3, 5)]
                        for n in names], dtype=float)
    dist = np.linalg.norm(img[:, :, None, :] - colours[None, None, :, :], axis=-1)
    nearest, close = dist.argmin(axis=-1), dist.min(axis=-1) < 40
    counts = np.bincount(nearest[close], minlength=len(names)).astype(float)
    return dict(zip(names, counts / counts.sum(), strict=True))


def test_pixel_shares_in_chromium() -> None:
    seg = deepseek_like()
    want = truth(seg)
    shares = {}
    for how, tl in timelines(seg).items():
        fig = charts.timeline(tl)
        fig.update_layout(showlegend=False, title=None, width=1100, height=300)
        html = artifacts_dir() / f"timeline-pixels-{how.replace(' ', '-')}.html"
        fig.write_html(html, include_plotlyjs=True, full_html=True)
        with open_offline(html, width=1100) as visit:
            visit.page.wait_for_selector(".barlayer")
            png = visit.page.screenshot()
            assert not visit.page_errors
        Path(str(html).replace(".html", ".png")).write_bytes(png)
        shares[how] = _pixel_shares(png)
    # before: each 6 µs collective drawn a pixel wide (the 29.6% for a true 3.2%)
    assert shares["a bar per segment"]["exposed_comm"] > 0.15
    for name in ("compute", "exposed_comm", "idle"):
        assert shares["by time"][name] == pytest.approx(want[name], abs=0.01), name
