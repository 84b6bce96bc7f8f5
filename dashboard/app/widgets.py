"""Layout helpers shared by the pages: every chart comes with its table and a CSV, every
run page with the whole report to download, and one style so that pages read at 1000 px.

Tables sit under their chart at the page's full width, never in a narrow column beside
it: a table in a third of the page shows a third of its columns.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import plotly.graph_objects as go
import polars as pl
import streamlit as st

from stepscope.analyzers.results import Recommendation
from stepscope.dashboard.app import data
from stepscope.dashboard.app.context import PageContext
from stepscope.dashboard.render.format import EN_DASH, md_code, md_text
from stepscope.dashboard.render.report import gain_words

PLOTLY_CONFIG = {"displaylogo": False, "modeBarButtonsToRemove": ["lasso2d", "select2d"]}

# A narrower sidebar and page margins, and headline numbers that fit their column: at a
# 1000 px window the page keeps about 700 px for its content (Streamlit's defaults leave
# 540). Only the app's own CSS, nothing loaded from anywhere.
STYLE = """<style>
section[data-testid="stSidebar"] { width: 15rem !important; min-width: 15rem !important; }
[data-testid="stMainBlockContainer"] { padding-left: 1.5rem; padding-right: 1.5rem;
    padding-top: 2.5rem; max-width: 1400px; }
[data-testid="stMetricValue"] { font-size: 1.6rem; }
[data-testid="stMetricLabel"] p { font-size: 0.85rem; }
</style>"""


def page_style() -> None:
    """The app's CSS (once per script run; Streamlit keeps style-only HTML out of the
    page's flow)."""
    st.html(STYLE)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "table"


MISSING = EN_DASH  # an empty cell (no value: a p2p op's bus bandwidth), as in HTML


def table(frame: pl.DataFrame, name: str, key: str,
          column_config: Mapping[str, Any] | None = None) -> None:
    """A table at the page's width with a CSV download of exactly what it shows; an
    empty cell reads MISSING (Streamlit's own placeholder is 'None'; the CSV leaves it
    empty)."""
    st.dataframe(frame, hide_index=True, width="stretch", placeholder=MISSING,
                 column_config=dict(column_config or {}), key=f"df_{key}")
    st.download_button(f"Download {name} (CSV)", frame.write_csv(), f"{_slug(name)}.csv",
                       "text/csv", key=f"dl_{key}")


def chart_and_table(fig: go.Figure, frame: pl.DataFrame, name: str, key: str,
                    folded: bool = False, column_config: Mapping[str, Any] | None = None,
                    on_select: Callable[[], None] | None = None) -> None:
    """The chart at full width with its numbers under it (in an expander when `folded`).
    `on_select`: a callback for a click on a point of the chart (its selection is in
    st.session_state[f"fig_{key}"])."""
    if on_select is None:
        st.plotly_chart(fig, width="stretch", config=PLOTLY_CONFIG, key=f"fig_{key}")
    else:
        st.plotly_chart(fig, width="stretch", config=PLOTLY_CONFIG, key=f"fig_{key}",
                        on_select=on_select, selection_mode="points")
    if folded:
        with st.expander(f"{name}: table"):
            table(frame, name, key, column_config)
    else:
        table(frame, name, key, column_config)


def report_downloads(ctx: PageContext) -> None:
    """The whole report of the selected run, as `stepscope report --format html|md` write
    it (the same renderers), for every run page's sidebar."""
    if ctx.run is None:
        return
    html, markdown = data.report_files(ctx.config.db, ctx.run, ctx.dtype, ctx.peak_tflops)
    st.caption("The whole report of this run, as `stepscope report` writes it:")
    st.download_button("Report (HTML)", html, f"stepscope-report-{ctx.run}.html",
                       "text/html", key="dl_report_html", width="stretch")
    st.download_button("Report (Markdown)", markdown, f"stepscope-report-{ctx.run}.md",
                       "text/markdown", key="dl_report_md", width="stretch")


# Streamlit's Markdown acts on more than CommonMark/GFM: `$...$` is LaTeX, `:red[...]`
# a colour directive, `:rocket:` / `:material/x:` an emoji or icon shortcode (a colon
# before a space or the end starts none of them: "ranks: 4" stays as written)
_STREAMLIT = re.compile(r"\$|:(?=\S)")


def plain(text: object) -> str:
    """Text from a trace or a user (op, kernel, group, host, run and file names, and the
    analyzers' sentences that quote them) shown literally in a Streamlit Markdown call
    (st.markdown, st.caption, the alerts, labels, help): md_text, the one Markdown
    escaper of every renderer, then what Streamlit adds, `$` and a `:` that a character
    follows. So
    '_foreach_add_' does not turn italic, '<128, 4>' is no tag, '$x$' no formula."""
    return _STREAMLIT.sub(r"\\\g<0>", md_text(text))


def code(name: str) -> str:
    """`name` as an inline code span, shown exactly as written (md_code outside a table:
    Streamlit's directives, shortcodes and LaTeX do not act inside code spans)."""
    return md_code(name, table=False)


def recommendation_card(rec: Recommendation, link: str | None = None,
                        step_time_ms: float | None = None) -> None:
    """One recommendation as the report words it: title, severity, gain (ms/step and its
    share of `step_time_ms` first, MFU points after), the evidence (literal: it quotes op
    names) and the fix; `link` opens the Timeline where it shows."""
    with st.container(border=True):
        st.markdown(f"**{plain(rec.title)}** · {plain(rec.severity)} · expected gain "
                    f"**{plain(gain_words(rec, step_time_ms))}**")
        st.markdown(f"Evidence: {plain(rec.evidence)}"
                    + (f" · [see it on the Timeline]({link})" if link else ""))
        st.caption(plain(rec.detail))
