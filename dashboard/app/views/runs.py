"""Runs: every run with its status, size, device, step time, MFU and largest loss;
which files of a partial run failed and why; open or delete a run."""

from __future__ import annotations

import re
from collections.abc import Sequence

import polars as pl
import streamlit as st

from stepscope.analyzers.results import FailedFile
from stepscope.analyzers.summary import RunSummary, summary_rows
from stepscope.dashboard.app import data
from stepscope.dashboard.app.context import PageContext, deep_link, go_to
from stepscope.dashboard.app.widgets import MISSING, code, plain
from stepscope.dashboard.render.format import pct, short_name
from stepscope.dashboard.render.summary import NO_LOSS, UNKNOWN_HOSTS
from stepscope.ingest.merge import delete_run, retry_busy

TITLE = "Runs"
HEADER = "Runs"


def failed_files(files: Sequence[FailedFile]) -> list[tuple[str, str]]:
    """(file, one-line reason) of each failed file of the report's run."""
    return [(f.file, f.error) for f in files]


SHORT_LOSS = {"exposed_comm": "exposed comm", "straggler_wait": "straggler wait",
              "bubble": "bubble", "memory": "memory", "recompute": "recompute",
              "idle": "idle", "compute": "compute"}


def device_label(devices: str | None) -> str:
    """The device short enough for the table ('NVIDIA H100 80GB HBM3' -> 'H100 80GB'):
    the run's details below name it in full."""
    text = re.sub(r"\s+HBM\w*", "", (devices or "-").replace("NVIDIA ", ""))
    # 'Tesla V100-SXM2-32GB' -> 'V100 32GB': the 18-character cut widened the table past
    # the page at 1000 px (743 > 710 px)
    text = re.sub(r"-(?:SXM\d*|PCIE)-", " ", text.removeprefix("Tesla "))
    return short_name(text, 18)


def _status(status: str | None, failed: int | None) -> str:
    return f"{status}: {failed} failed" if failed else str(status or "-")


def runs_table(ctx: PageContext) -> pl.DataFrame:
    """One row per run as the page shows it (numbers from the summary and the report);
    few, short columns, so that none is cut at 1000 px (hosts and steps are in the
    selected run's details below)."""
    summary = summary_rows(data.summary(ctx.config.db))
    mfu = {run: data.report(ctx.config.db, run, ctx.dtype, ctx.peak_tflops).mfu.mfu
           for run in ctx.runs}
    rows = [{
        "run": r.run, "status": _status(r.status, r.failed_files),
        "ranks": f"{r.n_ranks}/{r.world_size}",
        "device": device_label(r.devices),
        "step ms": None if r.attributed_step_ms is None else round(r.attributed_step_ms, 2),
        "MFU": pct(mfu.get(r.run)),
        "largest loss": _loss_cell(r),
        "ingested": r.ingested_at}
        for r in summary]
    frame = pl.DataFrame(rows).sort("ingested", descending=True, nulls_last=True)
    return frame.with_columns(pl.col("ingested").dt.strftime("%m-%d %H:%M"))


def _loss_cell(r: RunSummary) -> str:
    """The largest loss with its share; 'none' for an attributed run that loses nothing,
    '-' before attribution (as `stepscope summary`)."""
    if r.top_loss:
        return f"{SHORT_LOSS.get(r.top_loss, r.top_loss)} {pct(r.top_loss_share, 0)}"
    return NO_LOSS if r.attributed_step_ms is not None else "-"


def render(ctx: PageContext) -> None:
    st.header(HEADER)
    if not ctx.runs:
        st.info("No runs yet: upload traces or ingest a bundled sample.")
        st.button("Go to Upload", on_click=go_to("upload"))
        return
    with st.spinner("Building the reports (once per run)…"):
        table = runs_table(ctx)
    st.dataframe(table, hide_index=True, width="stretch", key="df_runs", placeholder=MISSING,
                 column_config={"ingested": st.column_config.TextColumn(
                     help="when the run was ingested (UTC)")})
    st.download_button("Download CSV", table.write_csv(), "runs.csv", "text/csv")
    run = ctx.run or ctx.runs[0]
    st.subheader(f"Run '{plain(run)}'")
    st.caption("The run selected in the sidebar; pick another there.")
    _run_detail(ctx, run)


def _run_detail(ctx: PageContext, run: str) -> None:
    report = data.report(ctx.config.db, run, ctx.dtype, ctx.peak_tflops)
    failures = failed_files(report.run.failed_files)
    row = data.summary(ctx.config.db).filter(pl.col("run") == run).row(0, named=True)
    st.markdown(f"**{plain(run)}**: {row['status']}, {row['n_ranks']} of {row['world_size']} "
                f"ranks on {row['hosts'] or UNKNOWN_HOSTS} host(s), {plain(row['devices'])}, "
                f"{row['steps']} "
                "steps")
    cols = st.columns(3)
    cols[0].button("Open overview", on_click=go_to("overview", run), key="open_overview")
    cols[1].markdown(f"[Link to this run]({deep_link('overview', run)})")
    if failures:
        st.warning(f"Run '{plain(run)}' is partial: {len(failures)} file(s) failed")
        # a list, not a table: a reason is a sentence, and a table cell would cut it
        st.markdown("\n".join(f"- {code(file)}: {plain(reason)}" for file, reason in failures))
    with st.expander(f"Delete run '{plain(run)}'"):
        confirm = st.checkbox(f"Yes, delete every row of '{plain(run)}' from "
                              f"{plain(ctx.config.db.name)}",
                              key="confirm_delete")
        if st.button("Delete run", disabled=not confirm, type="primary"):
            retry_busy(lambda: delete_run(ctx.config.db, run))
            data.forget_tokens(ctx.config.db)
            st.session_state.pop("confirm_delete", None)
            st.toast(f"Deleted run '{plain(run)}'")
            st.rerun()

