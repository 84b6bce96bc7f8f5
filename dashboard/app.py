"""The stepscope dashboard: the Streamlit entry point and router.

`stepscope dashboard` runs this file with Streamlit. The router picks the page and run
(from the URL's query parameters on arrival, so links can be shared; from the sidebar
afterwards), keeps the URL in step, and renders one page module of dashboard/views with
a PageContext. Errors reach the page as one line, never as a traceback; a database that
an ingest is writing shows "database busy, retrying" and the page retries on its own.
"""

from __future__ import annotations

import os
import time

import streamlit as st

from stepscope.analyzers.peaks import DTYPES
from stepscope.dashboard import data
from stepscope.dashboard.config import DashboardConfig
from stepscope.dashboard.context import NAV_PAGE, NAV_RUN, PageContext
from stepscope.dashboard.views import PAGES, RUN_PAGES
from stepscope.ingest import DatabaseBusyError, StepscopeError

BUSY_WAIT_S = 1.0
BUSY_RETRIES_ENV = "STEPSCOPE_BUSY_RETRIES"  # about one a second; tests shorten it


def _initial_page(runs: tuple[str, ...]) -> str:
    wanted = st.query_params.get("page")
    if wanted in PAGES:
        return str(wanted)
    if not runs:
        return "upload"
    return "overview" if st.query_params.get("run") in runs else "runs"


def _sync_run(runs: tuple[str, ...]) -> str | None:
    """Keep the selected run valid: the URL's on arrival, a new upload's, else newest."""
    pending = st.session_state.pop("nav_run_pending", None)
    if pending in runs:
        st.session_state[NAV_RUN] = pending
    if st.session_state.get(NAV_RUN) not in runs:
        wanted = st.query_params.get("run")
        st.session_state[NAV_RUN] = wanted if wanted in runs else (runs[0] if runs else None)
    return st.session_state[NAV_RUN]


INFERRED = "inferred"


def _sidebar(config: DashboardConfig, runs: tuple[str, ...]) -> tuple[str, str | None, str | None]:
    if NAV_PAGE not in st.session_state:
        st.session_state[NAV_PAGE] = _initial_page(runs)
    elif st.session_state[NAV_PAGE] not in PAGES:  # a link to a page this build lacks
        st.session_state[NAV_PAGE] = "runs" if runs else "upload"
    run = _sync_run(runs)
    with st.sidebar:
        st.title("stepscope")
        st.caption(f"database: {config.db.name} · {len(runs)} run(s)")
        page = st.radio("Page", list(PAGES), format_func=lambda k: PAGES[k].TITLE,
                        key=NAV_PAGE, label_visibility="collapsed")
        if page in RUN_PAGES and runs:
            run = st.selectbox("Run", runs, key=NAV_RUN)
        choice = st.selectbox("Peak table dtype", (INFERRED, *DTYPES), key="dtype",
                              help="which dense peak of the table MFU is measured against "
                                   "(inferred: from the matmuls' input types)")
    return page, run, None if choice == INFERRED else choice


def _keep_url(page: str, run: str | None) -> None:
    """The URL carries page and run, so the view can be shared as a link."""
    wanted = {"page": page, **({"run": run} if run else {})}
    extra = {k: v for k, v in st.query_params.to_dict().items()
             if k not in ("page", "run") and page in RUN_PAGES}
    if st.query_params.to_dict() != {**wanted, **extra}:
        st.query_params.from_dict({**wanted, **extra})


def _busy() -> None:
    attempts = st.session_state.get("busy_attempts", 0) + 1
    st.session_state["busy_attempts"] = attempts
    if attempts > int(os.environ.get(BUSY_RETRIES_ENV, "60")):
        st.error("The database is still busy after a minute (a long ingest?): reload the "
                 "page when it has finished.")
        return
    st.warning("Database busy (an ingest is writing it), retrying…")
    time.sleep(BUSY_WAIT_S)
    st.rerun()


def main() -> None:
    st.set_page_config(page_title="stepscope", layout="wide")
    config = DashboardConfig.from_env()
    try:
        runs = tuple(data.run_tokens(config.db))
    except DatabaseBusyError:
        _busy()
        return
    except StepscopeError as exc:
        st.error(str(exc))
        return
    page, run, dtype = _sidebar(config, runs)
    _keep_url(page, run)
    try:
        PAGES[page].render(PageContext(config=config, runs=runs, run=run, dtype=dtype))
        st.session_state["busy_attempts"] = 0
    except DatabaseBusyError:
        _busy()
    except StepscopeError as exc:
        st.error(str(exc))
    except Exception as exc:  # noqa: BLE001 - one line on the page, the traceback in the log
        st.error(f"Internal error: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0]} "
                 "(the server log has the details; please report it)")
        raise_in_log(exc)


def raise_in_log(exc: Exception) -> None:
    """Log the traceback on the server (the page shows one line)."""
    import logging

    logging.getLogger("stepscope.dashboard").error("page failed", exc_info=exc)


if __name__ == "__main__":
    main()
