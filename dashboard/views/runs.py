"""Runs: every run with its status, size, device, step time, MFU and largest loss;
which files of a partial run failed and why; open or delete a run."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl
import streamlit as st

from stepscope.analyzers.model import FailedFile
from stepscope.dashboard import data
from stepscope.dashboard.context import PageContext, deep_link, go_to
from stepscope.dashboard.render.format import pct
from stepscope.dashboard.render.labels import CATEGORY_LABELS
from stepscope.ingest.merge import delete_run, retry_busy

TITLE = "Runs"
HEADER = "Runs"


def failed_files(files: Sequence[FailedFile]) -> list[tuple[str, str]]:
    """(file, one-line reason) of each failed file of the report's run."""
    return [(f.file, f.error) for f in files]


def runs_table(ctx: PageContext) -> pl.DataFrame:
    """One row per run as the page shows it (numbers from the summary and the report)."""
    summary = data.summary(ctx.config.db)
    mfu = {run: data.report(ctx.config.db, run, ctx.dtype).mfu.mfu for run in ctx.runs}
    return summary.select(
        pl.col("run"), pl.col("status"),
        pl.format("{} / {}", pl.col("n_ranks"), pl.col("world_size")).alias("ranks"),
        pl.col("hosts"), pl.col("devices").alias("device"), pl.col("steps"),
        pl.col("attributed_step_ms").round(2).alias("step time (ms)"),
        pl.col("run").replace_strict(mfu, default=None, return_dtype=pl.Float64)
        .map_elements(pct, return_dtype=pl.String).alias("MFU"),
        pl.format("{} ({})",
                  pl.col("top_loss").replace_strict(CATEGORY_LABELS, default=pl.col("top_loss")),
                  pl.col("top_loss_share").map_elements(pct, return_dtype=pl.String))
        .alias("largest loss"),
        pl.col("failed_files").alias("failed files"),
        pl.col("ingested_at").cast(pl.String).str.slice(0, 19).alias("ingested (UTC)"),
    ).sort("ingested (UTC)", descending=True)


def render(ctx: PageContext) -> None:
    st.header(HEADER)
    if not ctx.runs:
        st.info("No runs yet: upload traces or ingest a bundled sample.")
        st.button("Go to Upload", on_click=go_to("upload"))
        return
    with st.spinner("Building the reports (once per run)…"):
        table = runs_table(ctx)
    st.dataframe(table, hide_index=True, width="stretch")
    st.download_button("Download CSV", table.write_csv(), "runs.csv", "text/csv")
    st.caption("Pick a run in the sidebar to see its details here.")
    _run_detail(ctx, ctx.run or ctx.runs[0])


def _run_detail(ctx: PageContext, run: str) -> None:
    report = data.report(ctx.config.db, run, ctx.dtype)
    failures = failed_files(report.run.failed_files)
    row = data.summary(ctx.config.db).filter(pl.col("run") == run).row(0, named=True)
    st.markdown(f"**{run}**: {row['status']}, {row['n_ranks']} of {row['world_size']} "
                f"ranks on {row['hosts']} host(s), {row['devices']}, {row['steps']} steps")
    cols = st.columns(3)
    cols[0].button("Open overview", on_click=go_to("overview", run), key="open_overview")
    cols[1].markdown(f"[Link to this run]({deep_link('overview', run)})")
    if failures:
        st.warning(f"Run '{run}' is partial: {len(failures)} file(s) failed")
        st.dataframe(pl.DataFrame(failures, schema=["file", "reason"], orient="row"),
                     hide_index=True, width="stretch")
    with st.expander(f"Delete run '{run}'"):
        confirm = st.checkbox(f"Yes, delete every row of '{run}' from {ctx.config.db.name}",
                              key="confirm_delete")
        if st.button("Delete run", disabled=not confirm, type="primary"):
            retry_busy(lambda: delete_run(ctx.config.db, run))
            data.forget_tokens(ctx.config.db)
            st.session_state.pop("confirm_delete", None)
            st.toast(f"Deleted run '{run}'")
            st.rerun()

