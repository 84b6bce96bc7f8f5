"""The all_to_all section of the Communication page (not a page of its own): traffic per
group, the imbalance of its calls and its cost, and the bytes each rank receives
(docs/alltoall.md)."""

from __future__ import annotations

import polars as pl
import streamlit as st

from stepscope.analyzers.results import AllToAll
from stepscope.dashboard.app import charts_analyses
from stepscope.dashboard.app.widgets import MISSING, chart_and_table, plain


def render_section(section: AllToAll | None) -> None:
    if section is None:
        return
    st.subheader("all_to_all: imbalance across ranks")
    if section.message:
        st.caption(plain(section.message))
    if section.groups:
        worst = section.groups[0]
        cols = st.columns(3)
        cols[0].metric("Imbalance (busiest / mean)",
                       f"{worst.imbalance:.2f}x" if worst.imbalance is not None else "unknown")
        cols[1].metric("Imbalance cost", f"{worst.imbalance_cost_ms:.3f} ms/step")
        cols[2].metric("Receives most", f"rank {worst.heaviest_rank}"
                       if worst.heaviest_rank is not None else "-")
    if not section.ranks and not section.groups:
        if not section.message:
            st.caption("no all_to_all call with sizes in the traces: nothing to draw")
        return  # the caption says why; an empty chart and two empty tables say nothing
    ranks = pl.DataFrame([{
        "rank": r.rank, "MB sent/step": round(r.sent_bytes / 1e6, 3),
        "MB received/step": round(r.received_bytes / 1e6, 3),
        "tokens received/step": r.tokens_received,
        "received vs mean": round(r.received_vs_mean, 3)} for r in section.ranks],
        schema_overrides={"tokens received/step": pl.Float64})
    chart_and_table(charts_analyses.a2a_per_rank(section), ranks, "all_to_all per rank",
                    "a2a_ranks")
    groups = pl.DataFrame([{
        "group": f"{g.group_label} ({g.library})", "calls": g.calls_per_step,
        "MB/rank": round(g.bytes_per_rank / 1e6, 3), "imbalance": g.imbalance,
        "transfer ms": round(g.transfer_ms, 4), "cost ms": round(g.imbalance_cost_ms, 4),
        "wait ms": round(g.wait_ms, 4), "heaviest": g.heaviest_rank} for g in section.groups],
        schema_overrides={"imbalance": pl.Float64, "heaviest": pl.Int64})
    st.dataframe(groups, hide_index=True, width="stretch", placeholder=MISSING)
