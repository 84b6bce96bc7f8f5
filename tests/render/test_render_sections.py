"""The run report's sections are named once (dashboard/render/sections.py): the Markdown
and HTML renderers each draw exactly those sections and walk them in that one order, and
every command's `--format` comes from the one table of its model (render/formats.py)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

import stepscope
from stepscope.analyzers.report import build_report
from stepscope.dashboard.render import formats
from stepscope.dashboard.render.html_report import HTML
from stepscope.dashboard.render.report import MARKDOWN
from stepscope.dashboard.render.sections import REPORT_SECTIONS, walk
from stepscope.outputs import add_format_options


def test_each_renderer_draws_exactly_the_report_sections() -> None:
    assert list(MARKDOWN) == list(REPORT_SECTIONS)
    assert list(HTML) == list(REPORT_SECTIONS)


def test_a_renderer_missing_a_section_is_refused() -> None:
    partial = {name: (lambda _r, name=name: name) for name in REPORT_SECTIONS[:-1]}
    with pytest.raises(KeyError, match="per_step"):
        walk(partial, object())
    assert walk({n: (lambda _r, n=n: n) for n in REPORT_SECTIONS}, None) == list(REPORT_SECTIONS)


@pytest.mark.slow
def test_markdown_and_html_show_the_sections_in_one_order(sample_db: Path) -> None:
    """The headings of the two outputs of one report come in the same order."""
    with stepscope.open(sample_db) as store:
        report = build_report(store.con, "critical_path")
    md = formats.REPORT["md"](report)
    page = formats.REPORT["html"](report)
    md_titles = [t.split(" (")[0] for t in re.findall(r"^## (.+)$", md, flags=re.M)]
    html_titles = [t.split(" (")[0] for t in re.findall(r"<h2>([^<]+)</h2>", page)]
    common = [t for t in md_titles if t in html_titles]
    assert len(common) >= 4
    assert common == [t for t in html_titles if t in common]


@pytest.mark.parametrize("table", [formats.REPORT, formats.DIFF, formats.PLAN, formats.HANG,
                                   formats.WHATIF, formats.SUMMARY, formats.HISTORY])
def test_format_option_offers_the_models_formats(table: formats.Formats[object]) -> None:
    parser = argparse.ArgumentParser()
    add_format_options(parser, table, default=next(iter(table)), out_help="write it here")
    action = next(a for a in parser._actions if a.dest == "format")
    assert sorted(action.choices) == sorted(table)
    assert parser.parse_args(["--out", "x.txt"]).out.name == "x.txt"


@pytest.mark.slow
def test_an_assumed_link_peak_says_so_in_markdown_and_html(sample_db: Path) -> None:
    """diff_scaled's DP all_reduce crosses nodes: its 50 GB/s network peak was never
    measured (one 400 Gb/s NIC per GPU assumed) and both reports say 'assumed' beside it,
    as the dashboard's chart does; NVLink's peak, from the device's peak table, does not.
    Before, both read 'network (50)'."""
    with stepscope.open(sample_db) as store:
        report = build_report(store.con, "diff_scaled")
    links = {(c.link, c.link_peak_gbs) for c in report.collectives}
    assert ("network", 50.0) in links and any(link == "nvlink" for link, _ in links)
    md = formats.REPORT["md"](report)
    page = formats.REPORT["html"](report)
    for text in (md, page):
        assert "network (50, assumed)" in text
        assert re.search(r"nvlink \(\d+\)", text) and "nvlink (450, assumed)" not in text
