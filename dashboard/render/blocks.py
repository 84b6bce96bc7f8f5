"""Report sections as plain blocks (a heading, lines, tables) rendered to Markdown or to
the self-contained HTML report, so one description serves both (used by
roofline.py, memory.py, alltoall.py). Lines and cells are plain text (names from the
traces among them): the Markdown side escapes them with md_text, the HTML side with
html.escape; headings and headers are the renderers' own."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

from stepscope.dashboard.render.format import md_text, num, pct

__all__ = ["Section", "Table", "gb", "html", "markdown", "num", "pct", "rows"]


@dataclass(frozen=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    numeric: tuple[int, ...] = ()       # right-aligned columns
    title: str | None = None


@dataclass(frozen=True)
class Section:
    title: str
    anchor: str
    lines: tuple[str, ...] = ()         # bullet points before the tables
    tables: tuple[Table, ...] = field(default_factory=tuple)


def gb(value: float | None) -> str:
    return "-" if value is None else f"{value / 1e9:.2f}"


def markdown(section: Section | None) -> list[str]:
    """The section as Markdown lines (level-2 heading, bullets, pipe tables)."""
    if section is None:
        return []
    out = ["", f"## {section.title}", ""]
    out += [f"- {md_text(line)}" for line in section.lines]
    for table in section.tables:
        out += ["", f"### {table.title}", ""] if table.title else [""]
        out.append("| " + " | ".join(table.headers) + " |")
        out.append("|" + "|".join("---:" if i in table.numeric else "---"
                                  for i in range(len(table.headers))) + "|")
        out += ["| " + " | ".join(md_text(c, cell=True) for c in row) + " |"
                for row in table.rows]
    return out


def _html_table(table: Table) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in table.headers)
    body = "".join(
        "<tr>" + "".join(f'<td class="n">{escape(c)}</td>' if i in table.numeric
                         else f"<td>{escape(c)}</td>" for i, c in enumerate(row)) + "</tr>"
        for row in table.rows)
    title = f"<h3>{escape(table.title)}</h3>" if table.title else ""
    return f"{title}<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def html(section: Section | None) -> str:
    """The section as a <section> of the HTML report ('' when absent)."""
    if section is None:
        return ""
    items = "".join(f"<li>{escape(line)}</li>" for line in section.lines)
    lines = f"<ul>{items}</ul>" if items else ""
    return (f'<section id="{section.anchor}"><h2>{escape(section.title)}</h2>{lines}'
            + "".join(_html_table(t) for t in section.tables) + "</section>")


def rows(cells: Sequence[Sequence[str]]) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(r) for r in cells)
