"""Help: the docs (docs/*.md of the checkout) inside the dashboard, so the links beside a
number (MFU, exposed communication, straggler wait...) lead to its definition without
leaving the machine. A link may name one section (`?page=help&doc=mfu&section=...`)."""

from __future__ import annotations

import re
from pathlib import Path

import streamlit as st

from stepscope.dashboard.app.context import PageContext, deep_link

TITLE = "Help"
HEADER = "Help: what the numbers mean"
DOCS_DIR = Path(__file__).resolve().parents[3] / "docs"
DOCS = {
    "mfu": "MFU, HFU and the waterfall",
    "attribution": "Where the step time went (categories, collectives, stragglers)",
    "advisor": "Recommendations",
    "report": "The report",
    "diff": "Comparing runs",
    "planner": "The planner",
    "dashboard": "The dashboard",
}
_LINK = re.compile(r"\]\(([a-z_]+)\.md(#[^)]*)?\)")


def sections(text: str) -> list[tuple[str, str]]:
    """(heading, text up to the next heading of its level or above) of a Markdown file."""
    lines = text.splitlines()
    heads = [(i, len(m.group(1)), m.group(2).strip()) for i, line in enumerate(lines)
             if (m := re.match(r"(#{1,4}) (.+)", line))]
    out = []
    for n, (i, level, title) in enumerate(heads):
        end = next((j for j, lv, _ in heads[n + 1:] if lv <= level), len(lines))
        out.append((title, "\n".join(lines[i:end])))
    return out


def local_links(text: str) -> str:
    """Links between docs files lead to this page ('(mfu.md#x)' -> '(?page=help&doc=mfu)')."""
    return _LINK.sub(lambda m: f"]({deep_link('help', doc=m.group(1))})"
                     if m.group(1) in DOCS else m.group(0), text)


def render(ctx: PageContext) -> None:
    st.header(HEADER)
    if not DOCS_DIR.is_dir():
        st.info("The docs are not installed with this copy of stepscope: read docs/*.md "
                "in its source (mfu.md, attribution.md, advisor.md).")
        return
    keys = [k for k in DOCS if (DOCS_DIR / f"{k}.md").is_file()]
    wanted = ctx.params.get("doc")
    if "help_doc" not in st.session_state:
        st.session_state["help_doc"] = wanted if wanted in keys else keys[0]
    doc = st.selectbox("Document", keys, format_func=lambda k: f"{DOCS[k]} (docs/{k}.md)",
                       key="help_doc")
    text = (DOCS_DIR / f"{doc}.md").read_text(encoding="utf-8")
    section = ctx.params.get("section") if doc == wanted else None
    found = [body for title, body in sections(text) if title == section]
    if found and not st.session_state.get("help_whole"):
        st.markdown(local_links(found[0]))
        st.button("Show the whole document", key="help_whole_button",
                  on_click=lambda: st.session_state.update(help_whole=True))
        return
    st.markdown(local_links(text))
