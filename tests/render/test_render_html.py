"""Self-contained HTML reports: `report --format html`, `diff --format html`.

Structure and numbers from the static file, size at 1,024 ranks, and the file opened
offline in headless Chromium (no console error, no request but the file itself).
"""

from __future__ import annotations

import copy
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from conftest import cli
from offline_browser import artifacts_dir, open_offline

from stepscope.analyzers.results import Report, from_json
from stepscope.dashboard.render.html_report import report_html

SIM = Path(__file__).resolve().parents[2] / "sample_traces" / "simulated"
EXTERNAL = re.compile(r"""(?:src\s*=|<link\b|@import|url\(|https?://(?!www\.w3\.org/2000/svg))""",
                      re.IGNORECASE)


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory, sample_db: Path) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("html")
    db = sample_db
    out: dict[str, Any] = {"tmp": tmp}
    for fmt in ("html", "json"):
        rc, _, err = cli("report", "deep_pipeline", "--db", db, "--format", fmt,
                         "--out", tmp / f"report.{fmt}")
        assert rc == 0, err
    rc, _, err = cli("diff", "healthy", "straggler", "--db", db, "--format", "html",
                     "--out", tmp / "diff.html")
    assert rc == 0, err
    out["report"] = json.loads((tmp / "report.json").read_text())
    return out


def svgs(html: str) -> list[ET.Element]:
    return [ET.fromstring(s) for s in re.findall(r"<svg\b.*?</svg>", html, re.DOTALL)]


def test_report_html_is_self_contained_and_complete(pages: dict[str, Any]) -> None:
    html = (pages["tmp"] / "report.html").read_text()
    assert not EXTERNAL.findall(html)
    charts = svgs(html)  # every chart is well-formed XML
    assert len(charts) >= 3
    for anchor in ("breakdown", "mfu", "pipeline", "per-rank", "per-step", "stragglers"):
        assert f'id="{anchor}"' in html
    report = pages["report"]
    assert f"{report['step_time_ms']:.2f} ms" in html
    pipe = report["pipeline"]
    assert f"{pipe['stages']} stages × {pipe['microbatches']} microbatches" in html
    assert html.count("<tr>") >= len(report["per_rank"]) + len(report["per_step"])


def test_diff_html_shows_the_cause(pages: dict[str, Any]) -> None:
    html = (pages["tmp"] / "diff.html").read_text()
    assert not EXTERNAL.findall(html)
    assert "stepscope diff: healthy → straggler" in html
    assert "MFU points by cause" in html and "straggler wait" in html
    assert len(svgs(html)) == 2  # breakdown a vs b, MFU points by cause


def test_1024_ranks_stay_small(pages: dict[str, Any]) -> None:
    """1,024 ranks on 128 hosts: aggregated tables, a bounded chart, well under 300 KB."""
    report = copy.deepcopy(pages["report"])
    template = report["per_rank"][0]
    report["per_rank"] = [
        {**template, "rank": r, "host": f"node{r // 8:03d}",
         "step_time_ms": template["step_time_ms"] + (r % 97) / 10,
         "breakdown_ms": {**template["breakdown_ms"],
                          "idle": template["breakdown_ms"]["idle"] + (r % 97) / 10}}
        for r in range(1024)]
    html = report_html(from_json(json.dumps(report), Report))
    assert len(html.encode()) < 300_000
    assert "The 16 slowest ranks" in html and "see <code>per_rank</code>" in html
    assert ">rank 96<" in html  # r % 97 == 96: the slowest ranks, in the chart
    per_rank_svg = svgs(html)[-1]
    assert len(per_rank_svg.findall("{http://www.w3.org/2000/svg}text")) < 120


@pytest.mark.browser
@pytest.mark.parametrize("name", ["report.html", "diff.html"])
def test_opens_offline_in_chromium(pages: dict[str, Any], name: str) -> None:
    path = pages["tmp"] / name
    with open_offline(path) as visit:
        charts = visit.page.locator("svg.chart")
        assert charts.count() >= 2
        assert charts.first.bounding_box()["width"] > 300
        visit.page.screenshot(path=str(artifacts_dir() / f"html-{name}.png"), full_page=True)
    assert visit.console_errors == [] and visit.page_errors == []
    assert visit.requests == [path.resolve().as_uri()]
