"""What every page gets from the router: the configuration, the runs, the selected run,
and how to move to another page (deep links carry page and run as query parameters)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlencode

import streamlit as st

from stepscope.dashboard.config import DashboardConfig

NAV_PAGE, NAV_RUN = "nav_page", "nav_run"


@dataclass(frozen=True)
class PageContext:
    """The state a page renders from; pages never read query parameters themselves."""

    config: DashboardConfig
    runs: tuple[str, ...]  # newest first
    run: str | None
    dtype: str | None = None  # None: inferred from the traces


def deep_link(page: str, run: str | None = None, **extra: str) -> str:
    """The relative URL of a page (and run): paste it into a chat to share the view."""
    params = {"page": page, **({"run": run} if run else {}), **extra}
    return "?" + urlencode(params)


def go_to(page: str, run: str | None = None) -> Callable[[], None]:
    """A button callback that switches page (and run) before the next script run."""

    def switch() -> None:
        st.session_state[NAV_PAGE] = page
        if run is not None:
            st.session_state[NAV_RUN] = run

    return switch
