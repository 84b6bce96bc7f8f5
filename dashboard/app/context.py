"""What every page gets from the router: the configuration, the runs, the selected run,
the peak MFU is measured against, and how to move to another page (deep links carry page
and run as query parameters)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar
from urllib.parse import urlencode

import streamlit as st

from stepscope.dashboard.app.config import DashboardConfig
from stepscope.ingest.number_text import NumberTextError

N = TypeVar("N", int, float)

NAV_PAGE, NAV_RUN = "nav_page", "nav_run"
# what a link may ask of the page it opens (rank and step: the Timeline; vs: Compare's
# baseline; doc and section: the Help page)
LINK_PARAMS = ("vs", "rank", "step", "doc", "section")


@dataclass(frozen=True)
class PageContext:
    """The state a page renders from; pages never read query parameters themselves (the
    ones a link may carry arrive in `params`)."""

    config: DashboardConfig
    runs: tuple[str, ...]  # newest first
    run: str | None
    dtype: str | None = None  # None: inferred from the traces
    peak_tflops: float | None = None  # None: the peak table's
    params: Mapping[str, str] = field(default_factory=dict)


def deep_link(page: str, run: str | None = None, **extra: object) -> str:
    """The relative URL of a page (and run): paste it into a chat to share the view."""
    params = {"page": page, **({"run": run} if run else {}),
              **{k: str(v) for k, v in extra.items() if v is not None}}
    return "?" + urlencode(params)


def timeline_link(run: str, rank: int | None = None, step: int | None = None) -> str:
    """The Timeline at one rank and step (a straggler, a recommendation's evidence)."""
    return deep_link("timeline", run, rank=rank, step=step)


def go_to(page: str, run: str | None = None, **state: object) -> Callable[[], None]:
    """A button callback that switches page (and run, and any widget state the page
    reads) before the next script run."""

    def switch() -> None:
        st.session_state[NAV_PAGE] = page
        if run is not None:
            st.session_state[NAV_RUN] = run
        for key, value in state.items():
            st.session_state[key] = value

    return switch


def link_number(name: str, text: str | None, read: Callable[[str], N],
                fallback: str) -> N | None:
    """The number a link carries (?name=text), read by the one grammar of every CLI
    option (ingest/number_text.py: no nan, inf, 1e999, 1_0 or ' 5'); None when absent.
    A bad one is said once on the page, with what is shown instead (`fallback`), and
    gives None: the caller's default."""
    if text is None or text == "":
        return None
    try:
        return read(text)
    except NumberTextError as exc:
        st.warning(f"The link's {name}= is ignored ({exc.about(text)}); {fallback}.")
        return None
