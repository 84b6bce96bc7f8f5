"""The building blocks of the self-contained HTML reports (html_report.py, html_diff.py,
html_nightly.py): the page with its inline CSS, tables, cards, sections.

One file, everything inline: CSS, static SVG charts (svg_charts.py) and a three-line
print helper; no request of any kind, so a report opens from file://, as an email
attachment and on paper. Cells are escaped by the callers (`esc`); the blocks take
already-escaped HTML.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from stepscope.dashboard.render.svg_charts import COLORS

CSS = """
:root { color-scheme: light; }
body { -webkit-print-color-adjust: exact; print-color-adjust: exact;
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       color: #212121; margin: 24px auto; max-width: 1000px; padding: 0 16px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px;
     border-bottom: 1px solid #e0e0e0; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 16px 0 6px; }
.meta { color: #616161; margin: 0 0 12px; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 12px 0; }
.card { border: 1px solid #e0e0e0; border-radius: 6px; padding: 8px 12px; min-width: 140px; }
.card .k { color: #616161; font-size: 12px; } .card .v { font-size: 20px; font-weight: 600; }
.card .d { font-size: 12px; } .bad { color: #c62828; } .good { color: #2e7d32; }
.verdict { display: inline-block; padding: 2px 10px; border-radius: 4px; color: #fff;
           font-weight: 700; } .verdict.FAIL { background: #c62828; }
.verdict.OK { background: #2e7d32; } .verdict.PARTIAL { background: #ef6c00; }
table { border-collapse: collapse; margin: 8px 0; font-size: 13px; }
th, td { border: 1px solid #e0e0e0; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f5f5f5; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 6px; }
svg.chart { max-width: 100%; height: auto; display: block; margin: 8px 0; }
svg.chart text { fill: #212121; }
details { margin: 8px 0; } summary { cursor: pointer; color: #1565c0; }
.rec { border-left: 4px solid #1565c0; padding: 4px 10px; margin: 8px 0; background: #fafafa; }
.rec.high { border-color: #c62828; } .rec.medium { border-color: #ef6c00; }
code { background: #f5f5f5; padding: 0 3px; border-radius: 3px; }
footer { color: #9e9e9e; font-size: 12px; margin-top: 32px; }
@media print { body { margin: 0; max-width: none; } h2 { break-after: avoid; }
  svg.chart, table, .card { break-inside: avoid; } summary { display: none; }
  details::details-content { content-visibility: visible; display: block; } }
"""
# Printing shows folded details too (browsers without ::details-content).
PRINT_JS = ("addEventListener('beforeprint',function(){document.querySelectorAll('details')"
            ".forEach(function(d){d.open=true})});")


def esc(value: object) -> str:
    """`value` as escaped HTML text."""
    return escape(str(value))


def table(headers: Sequence[str], rows: Sequence[Sequence[str]],
          numeric: Sequence[int] = ()) -> str:
    """A table from already-escaped cells; `numeric` columns right-aligned."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>"
                         for i, c in enumerate(row)) + "</tr>"
        for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def folded(headers: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[int],
           what: str, shown: int) -> str:
    """A table of the first `shown` rows, the rest in a <details> below it."""
    first = table(headers, rows[:shown], numeric)
    if len(rows) <= shown:
        return first
    rest = table(headers, rows[shown:], numeric)
    return (f"{first}<details><summary>{len(rows) - shown} more {what}</summary>"
            f"{rest}</details>")


def card(key: str, value: str, delta: str = "", cls: str = "") -> str:
    """A headline number: `key` above `value`, an optional `delta` line of class `cls`."""
    d = f'<div class="d {cls}">{delta}</div>' if delta else ""
    return f'<div class="card"><div class="k">{esc(key)}</div><div class="v">{value}</div>{d}</div>'


def cards(items: Sequence[str]) -> str:
    return f'<div class="cards">{"".join(items)}</div>'


def section(title: str, *parts: str, anchor: str = "") -> str:
    ident = f' id="{anchor}"' if anchor else ""
    return f"<section{ident}><h2>{esc(title)}</h2>{''.join(parts)}</section>"


def swatch(cat: str) -> str:
    """The colour square of an attribution category (as in the charts)."""
    return f'<span class="swatch" style="background:{COLORS[cat]}"></span>'


def page(title: str, sections: Sequence[str]) -> str:
    """The whole document: head with the inline CSS, the sections, the print helper."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
            + "".join(sections)
            + "<footer>stepscope: self-contained report (no external resources).</footer>"
            + f"<script>{PRINT_JS}</script></body></html>\n")
