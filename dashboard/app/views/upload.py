"""Upload: every rank's traces (files or archives) from the browser, a folder under
--traces-root on the server, or a bundled sample; progress over files, each failed file
with its one-line reason, then a way to the new run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from stepscope.dashboard.app import data
from stepscope.dashboard.app.context import PageContext, deep_link, go_to
from stepscope.dashboard.app.uploads import (
    UPLOAD_TYPES,
    Upload,
    check_upload_size,
    default_run_name,
    ingest_staged,
    ingest_uploads,
    resolve_under,
    sample_run_name,
    sample_sets,
    trace_folders,
)
from stepscope.dashboard.app.widgets import code, plain
from stepscope.ingest import IngestResult, NothingIngestedError, StepscopeError

TITLE = "Upload"
HEADER = "Upload traces"
OUTCOME = "upload_outcome"
DEFAULT_SAMPLE = "simulated/straggler"


@dataclass(frozen=True)
class Outcome:
    """What the last ingest of this session did, shown until the next one."""

    run: str | None
    ranks: int
    n_files: int
    failures: tuple[tuple[str, str], ...]
    error: str | None = None
    replaced: bool = False  # a run of that name was there and is replaced
    warnings: tuple[str, ...] = ()  # e.g. a stray trace that fits none of the others


def render(ctx: PageContext) -> None:
    st.header(HEADER)
    if not ctx.runs:
        st.info("The database is empty. Upload the traces of every rank of a run, or load a "
                "bundled sample below to see what stepscope shows.")
    _show_outcome(st.session_state.get(OUTCOME))
    # the user's own traces first, the bundled samples last
    _from_browser(ctx)
    if ctx.config.traces_root is not None:
        _from_server(ctx, ctx.config.traces_root)
    _samples(ctx)


def _from_browser(ctx: PageContext) -> None:
    st.subheader("From your computer")
    # a successful ingest starts a new round: the uploader (and the run name) start empty
    done = st.session_state.get("upload_round", 0)
    files = st.file_uploader(
        "Trace files or archives of every rank (.json, .json.gz, .zip, .tar.gz)",
        type=list(UPLOAD_TYPES), accept_multiple_files=True,
        key="upload_files" if not done else f"upload_files_{done}")
    names = [f.name for f in files or []]
    run = st.text_input("Run name", value=default_run_name(names) if names else "",
                        key=f"upload_run_{'|'.join(names)}",
                        help="an existing run of this name is replaced")
    _replace_warning(ctx, run)
    if st.button("Ingest the uploaded files", disabled=not files or not run.strip(),
                 key="ingest_uploads", type="primary"):
        def work(progress: Callable[[int, int, str], None],
                 on_busy: Callable[[int], None]) -> IngestResult:
            check_upload_size((f.size for f in files or []), ctx.config.max_upload_mb)
            uploads = [Upload(f.name, f) for f in files or []]
            return ingest_uploads(uploads, ctx.config.db, run.strip(), progress, on_busy)
        _ingest(ctx, work)


def _from_server(ctx: PageContext, root: Path) -> None:
    st.subheader("From a folder on the server")
    st.caption(f"Folders under {plain(root)} that hold trace files or archives.")
    folders = trace_folders(root)
    if not folders:
        st.info(f"No trace folders under {plain(root)}.")
        return
    folder = st.selectbox("Folder", folders, key="server_folder")
    run = st.text_input("Run name", value=Path(root / folder).name, key=f"server_run_{folder}")
    _replace_warning(ctx, run)
    if st.button("Ingest the folder", disabled=not run.strip(), key="ingest_folder"):
        def work(progress: Callable[[int, int, str], None],
                 on_busy: Callable[[int], None]) -> IngestResult:
            path = resolve_under(root, folder)
            return ingest_staged([path], ctx.config.db, run.strip(), progress, on_busy)
        _ingest(ctx, work)


def _samples(ctx: PageContext) -> None:
    sets = sample_sets()
    if not sets:
        return
    with st.container(border=True):
        st.markdown("**Bundled samples** — simulated GPU jobs with known answers and real "
                    "4-rank CPU runs")
        labels = list(sets)
        cols = st.columns([3, 1])
        label = cols[0].selectbox(
            "Sample run", labels, key="sample_set", label_visibility="collapsed",
            index=labels.index(DEFAULT_SAMPLE) if DEFAULT_SAMPLE in labels else 0)
        if cols[1].button("Load sample", width="stretch", key="load_sample"):
            def work(progress: Callable[[int, int, str], None],
                     on_busy: Callable[[int], None]) -> IngestResult:
                return ingest_staged([sets[label]], ctx.config.db, sample_run_name(label),
                                     progress, on_busy)
            _ingest(ctx, work)


def _replace_warning(ctx: PageContext, run: str) -> None:
    """Warn before an ingest replaces a run, not after one made it (the run just
    ingested is the outcome shown above, not a run to be replaced)."""
    outcome = st.session_state.get(OUTCOME)
    if run.strip() in ctx.runs and not (outcome is not None and outcome.run == run.strip()):
        st.caption(f":orange[A run named '{plain(run.strip())}' exists: ingesting replaces it.]")


def _ingest(ctx: PageContext, work: Callable[..., IngestResult]) -> None:
    """Run one ingest with a progress bar over files; remember its outcome; rerun so
    every page sees the new run."""
    bar = st.progress(0.0, text="Reading the traces…")
    note = st.empty()

    def progress(done: int, total: int, name: str) -> None:
        shown = name.rsplit("/", 1)[-1]
        bar.progress(done / max(total, 1), text=f"{done}/{total} files: {plain(shown)}")

    def on_busy(attempt: int) -> None:
        note.warning(f"Database busy (another ingest is writing it), retrying… ({attempt})")

    try:
        result = work(progress, on_busy)
        outcome = Outcome(result.run, len(result.ranks), result.n_files,
                          tuple(result.failures), replaced=result.run in ctx.runs,
                          warnings=tuple(result.warnings))
    except NothingIngestedError as exc:
        failures = tuple(getattr(exc, "failures", ()) or ())
        outcome = Outcome(None, 0, len(failures), failures, error=str(exc))
    except StepscopeError as exc:
        outcome = Outcome(None, 0, 0, (), error=str(exc))
    st.session_state[OUTCOME] = outcome
    data.forget_tokens(ctx.config.db)
    if outcome.run is not None:
        st.session_state["nav_run_pending"] = outcome.run
        st.session_state["upload_round"] = st.session_state.get("upload_round", 0) + 1
    st.rerun()


def _show_outcome(outcome: Outcome | None) -> None:
    if outcome is None:
        return
    st.subheader("Last ingest")
    replaced = " (it replaced the earlier run of that name)" if outcome.replaced else ""
    if outcome.error is not None:
        st.error(plain(outcome.error))
    elif outcome.failures:
        st.warning(f"Run '{plain(outcome.run)}' ingested PARTIALLY: {outcome.ranks} rank(s); "
                   f"{len(outcome.failures)} of {outcome.n_files} file(s) failed{replaced}")
    else:
        st.success(f"Run '{plain(outcome.run)}' ingested: {outcome.ranks} rank(s) from "
                   f"{outcome.n_files} file(s){replaced}")
    for warning in outcome.warnings:
        st.warning(plain(warning))
    for file, reason in outcome.failures:
        st.markdown(f"- {code(file)}: {plain(reason)}")
    if outcome.run is not None:
        cols = st.columns(2)
        cols[0].button(f"Open run '{plain(outcome.run)}'", type="primary",
                       on_click=go_to("overview", outcome.run), key="open_new_run")
        cols[1].markdown(f"[Link to the run]({deep_link('overview', outcome.run)})")
