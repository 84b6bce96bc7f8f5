"""Open a local HTML file in headless Chromium (PyPI playwright driving Debian's
/usr/bin/chromium, never a downloaded browser) and record what a reader would meet:
console errors, every request the page makes, and a screenshot.

Screenshots go to `.artifacts/` at the repository root (git-ignored), or to
$STEPSCOPE_TEST_ARTIFACTS.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parent.parent


def artifacts_dir() -> Path:
    path = Path(os.environ.get("STEPSCOPE_TEST_ARTIFACTS", REPO / ".artifacts"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def require_chromium() -> None:
    """Skip, saying why, where the system has no Chromium (playwright, a dev dependency,
    drives it; it never downloads a browser)."""
    if not CHROMIUM.exists():
        pytest.skip("no /usr/bin/chromium: install it with `apt-get install -y chromium` "
                    "(as root; .ci/run does)")


@dataclass
class PageVisit:
    """What happened while the page loaded."""

    page: Any
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


@contextmanager
def open_offline(html: Path, width: int = 1100) -> Iterator[PageVisit]:
    """Load `html` from file:// with every non-file request recorded and aborted."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM),
                                    args=["--no-sandbox", "--disable-gpu"])
        try:
            context = browser.new_context(viewport={"width": width, "height": 900})
            page = context.new_page()
            visit = PageVisit(page)
            page.on("console", lambda m: visit.console_errors.append(m.text)
                    if m.type == "error" else None)
            page.on("pageerror", lambda e: visit.page_errors.append(str(e)))

            def route(r: Any) -> None:
                visit.requests.append(r.request.url)
                if r.request.url.startswith("file://"):
                    r.continue_()
                else:
                    r.abort()

            context.route("**/*", route)
            page.goto(html.resolve().as_uri(), wait_until="load")
            yield visit
        finally:
            browser.close()
