"""Layout helpers shared by the pages: every chart comes with its table and a CSV."""

from __future__ import annotations

import re

import plotly.graph_objects as go
import polars as pl
import streamlit as st

PLOTLY_CONFIG = {"displaylogo": False, "modeBarButtonsToRemove": ["lasso2d", "select2d"]}


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "table"


def table(frame: pl.DataFrame, name: str, key: str) -> None:
    """A table with a CSV download of exactly what it shows."""
    st.dataframe(frame, hide_index=True, width="stretch")
    st.download_button(f"Download {name} (CSV)", frame.write_csv(), f"{_slug(name)}.csv",
                       "text/csv", key=f"dl_{key}")


def chart_and_table(fig: go.Figure, frame: pl.DataFrame, name: str, key: str,
                    side: bool = True) -> None:
    """The chart with its numbers: side by side, or the table below in an expander."""
    if side:
        left, right = st.columns([3, 2])
        with left:
            st.plotly_chart(fig, width="stretch", config=PLOTLY_CONFIG, key=f"fig_{key}")
        with right:
            table(frame, name, key)
        return
    st.plotly_chart(fig, width="stretch", config=PLOTLY_CONFIG, key=f"fig_{key}")
    with st.expander(f"{name}: table"):
        table(frame, name, key)
