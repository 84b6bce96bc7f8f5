"""The stepscope dashboard: the Streamlit entry point and router.

`stepscope dashboard` runs this file with Streamlit. The router picks the page, the run
and the peak MFU is measured against (from the URL's query parameters on arrival, so
links can be shared; from the sidebar afterwards), keeps the URL in step, and renders
one page module of dashboard/views with a PageContext. A link to a run that does not
exist says so instead of showing another run. Errors reach the page as one line, never
as a traceback; a database that an ingest is writing shows "database busy, retrying" and
the page retries on its own.
"""

from __future__ import annotations

import time
from pathlib import Path

import streamlit as st

from stepscope.analyzers.flops.peaks import DTYPES
from stepscope.dashboard.app import data
from stepscope.dashboard.app.config import DashboardConfig, busy_retries
from stepscope.dashboard.app.context import (
    LINK_PARAMS,
    NAV_PAGE,
    NAV_RUN,
    PageContext,
    link_number,
)
from stepscope.dashboard.app.views import PAGES, RUN_PAGES
from stepscope.dashboard.app.widgets import page_style, plain, report_downloads
from stepscope.ingest import DatabaseBusyError, StepscopeError
from stepscope.ingest.number_text import decimal

BUSY_WAIT_S = 1.0
INFERRED = "inferred"
MISSING = "missing_run"  # the run a link named that the database does not hold
PEAK, DTYPE = "peak_tflops", "dtype"
PEAK_MAX = 100_000.0  # TFLOP/s per GPU, the sidebar's and a link's ?peak= most


def _initial_page(runs: tuple[str, ...]) -> str:
    wanted = st.query_params.get("page")
    if wanted in PAGES:
        return str(wanted)
    if not runs:
        return "upload"
    return "overview" if st.query_params.get("run") in runs else "runs"


def _sync_run(runs: tuple[str, ...]) -> str | None:
    """Keep the selected run valid: the URL's on arrival, a new upload's, else newest. A
    run the URL names that does not exist is remembered (MISSING), not replaced."""
    pending = st.session_state.pop("nav_run_pending", None)
    if pending in runs:
        st.session_state[NAV_RUN] = pending
        st.session_state.pop(MISSING, None)
    if st.session_state.get(NAV_RUN) not in runs:
        wanted = st.query_params.get("run")
        if wanted and wanted not in runs and NAV_RUN not in st.session_state:
            st.session_state[MISSING] = wanted
        st.session_state[NAV_RUN] = wanted if wanted in runs else (runs[0] if runs else None)
    return st.session_state[NAV_RUN]


def _arrival_controls() -> None:
    """The peak and dtype a link carries (?dtype=fp16&peak=19.5), on arrival only."""
    if DTYPE not in st.session_state:
        wanted = st.query_params.get("dtype")
        st.session_state[DTYPE] = wanted if wanted in DTYPES else INFERRED
    if PEAK not in st.session_state:
        peak = link_number("peak", st.query_params.get("peak"),
                           lambda t: decimal(t, 0.0, PEAK_MAX, low_open=False),
                           "MFU is measured against the peak table's")
        st.session_state[PEAK] = peak or 0.0


def _forget_missing() -> None:
    st.session_state.pop(MISSING, None)


def _sidebar(config: DashboardConfig, runs: tuple[str, ...]
             ) -> tuple[str, str | None, str | None, float | None]:
    if NAV_PAGE not in st.session_state:
        st.session_state[NAV_PAGE] = _initial_page(runs)
    elif st.session_state[NAV_PAGE] not in PAGES:  # a link to a page this build lacks
        st.session_state[NAV_PAGE] = "runs" if runs else "upload"
    run = _sync_run(runs)
    _arrival_controls()
    with st.sidebar:
        st.title("stepscope")
        st.caption(f"database: {plain(config.db.name)} · {len(runs)} run(s)")
        page = st.radio("Page", list(PAGES), format_func=lambda k: PAGES[k].TITLE,
                        key=NAV_PAGE, label_visibility="collapsed")
        if page in RUN_PAGES and runs:
            run = st.selectbox("Run", runs, key=NAV_RUN, on_change=_forget_missing)
        choice = st.selectbox("Peak table dtype", (INFERRED, *DTYPES), key=DTYPE,
                              help="which dense peak of the table MFU is measured against "
                                   "(inferred: from the matmuls' input types); "
                                   "`stepscope report --dtype`")
        peak = st.number_input(
            "Peak TFLOP/s per GPU", min_value=0.0, max_value=PEAK_MAX, step=10.0,
            key=PEAK, help="the peak MFU is measured against, for a device the table does "
                           "not know (a CPU, a new GPU); 0: the peak table's "
                           "(`stepscope report --peak-tflops`)")
    return page, run, None if choice == INFERRED else choice, float(peak) or None


def _keep_url(page: str, run: str | None, dtype: str | None, peak: float | None) -> None:
    """The URL carries page, run, dtype and peak, so the view can be shared as a link;
    a link's own parameters (vs, rank, step, doc, section) stay while on its page."""
    wanted = {"page": page, **({"run": run} if run else {}),
              **({"dtype": dtype} if dtype else {}), **({"peak": f"{peak:g}"} if peak else {})}
    extra = {k: v for k, v in st.query_params.to_dict().items()
             if k in LINK_PARAMS and (st.session_state.get("link_page") == page
                                      or (k == "vs" and page == "compare"))}
    if st.query_params.to_dict() != {**wanted, **extra}:
        st.query_params.from_dict({**wanted, **extra})


def _link_params() -> dict[str, str]:
    """The link parameters of the URL the session arrived with, for the page it named."""
    if "link_params" not in st.session_state:
        st.session_state["link_page"] = st.query_params.get("page")
        st.session_state["link_params"] = {k: str(v) for k, v in
                                           st.query_params.to_dict().items()
                                           if k in LINK_PARAMS}
    return dict(st.session_state["link_params"])


def _busy() -> None:
    attempts = st.session_state.get("busy_attempts", 0) + 1
    st.session_state["busy_attempts"] = attempts
    if attempts > busy_retries():
        st.error("The database is still busy after a minute (a long ingest?): reload the "
                 "page when it has finished.")
        return
    st.warning("Database busy (an ingest is writing it), retrying…")
    time.sleep(BUSY_WAIT_S)
    st.rerun()


def _missing_run(config: DashboardConfig, runs: tuple[str, ...], missing: str) -> None:
    """A link named a run the database does not hold: say so, offer the runs there are."""
    st.error(f"Run '{plain(missing)}' does not exist in {plain(config.db.name)}: nothing "
             "to show. Pick a run in the sidebar, or open one below.")
    if runs:
        st.button(f"Open the newest run, '{plain(runs[0])}'", key="open_newest",
                  on_click=_open_newest, args=(runs[0],))
        st.caption("Runs in this database: " + ", ".join(plain(r) for r in runs[:20])
                   + (f", … ({len(runs)} runs)" if len(runs) > 20 else ""))


def _open_newest(run: str) -> None:
    st.session_state[NAV_RUN] = run
    _forget_missing()


def main() -> None:
    st.set_page_config(page_title="stepscope", layout="wide")
    page_style()
    config = DashboardConfig.from_env()
    try:
        runs = tuple(data.run_tokens(config.db))
    except DatabaseBusyError:
        _busy()
        return
    except StepscopeError as exc:
        st.error(plain(str(exc)))
        return
    except Exception as exc:  # noqa: BLE001 - a damaged database file: one line
        st.error(plain(_explained(exc, config.db)))
        return
    params = _link_params()
    page, run, dtype, peak = _sidebar(config, runs)
    missing = st.session_state.get(MISSING)
    if missing and page in RUN_PAGES:
        _missing_run(config, runs, missing)
        return
    _keep_url(page, run, dtype, peak)
    ctx = PageContext(config=config, runs=runs, run=run, dtype=dtype, peak_tflops=peak,
                      params=params if st.session_state.get("link_page") == page else {})
    try:
        if page in RUN_PAGES and run is not None:
            with st.sidebar:
                report_downloads(ctx)
        PAGES[page].render(ctx)
        st.session_state["busy_attempts"] = 0
    except DatabaseBusyError:
        _busy()
    except StepscopeError as exc:
        st.error(plain(str(exc)))
    except Exception as exc:  # noqa: BLE001 - one line on the page, the traceback in the log
        st.error(plain(_explained(exc, config.db)))
        raise_in_log(exc)


def _explained(exc: Exception, db: Path) -> str:
    """One line for a failure: what is wrong with the database or the disk when that is
    it (stepscope.ingest.db_errors), else an internal error to report."""
    from stepscope.ingest.db_errors import explain

    mapped = explain(exc, db)
    if mapped is not None:
        return str(mapped)
    return (f"Internal error: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0]} "
            "(the server log has the details; please report it)")


def raise_in_log(exc: Exception) -> None:
    """Log the traceback on the server (the page shows one line)."""
    import logging

    logging.getLogger("stepscope.dashboard").error("page failed", exc_info=exc)


if __name__ == "__main__":
    main()
