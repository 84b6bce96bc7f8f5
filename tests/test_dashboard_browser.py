"""The dashboard as a person sees it: `stepscope dashboard` on a free port, headless
Chromium (Debian's /usr/bin/chromium, driven by playwright; never a downloaded browser),
an 8-rank archive uploaded through the file input, every page opened by its deep link.
Screenshots go to .artifacts/dashboard/ (git-ignored) for people to look at."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tarfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest
from dashboard_helpers import REPO, SIMULATED
from playwright.sync_api import sync_playwright

CHROMIUM = Path("/usr/bin/chromium")
SHOTS = Path(os.environ.get("STEPSCOPE_TEST_ARTIFACTS", REPO / ".artifacts")) / "dashboard"
WAIT_MS = 180_000

if not CHROMIUM.exists():
    pytest.skip("no Chromium at /usr/bin/chromium: run `apt-get install -y chromium` as root "
                "(.ci/run does)", allow_module_level=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_healthy(base: str, proc: subprocess.Popen[str], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"stepscope dashboard exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(base + "_stcore/health", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise AssertionError("the dashboard did not come up")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A running `stepscope dashboard` on an empty database; stopped with Ctrl-C (SIGINT
    to its process group) at the end, which must exit 0."""
    tmp = tmp_path_factory.mktemp("browser")
    db, port = tmp / "ui.duckdb", free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "stepscope", "dashboard", "--db", str(db), "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        cwd=tmp)
    base = f"http://127.0.0.1:{port}/"
    try:
        wait_healthy(base, proc)
        yield base, tmp
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert f"stepscope dashboard: {base}" in out
    assert "stopped" in err


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The simulated 8-rank straggler job as one .tar.gz, as a user would upload it."""
    path = tmp_path_factory.mktemp("archive") / "slowjob.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        for f in sorted((SIMULATED / "straggler").glob("rank*.json.gz")):
            tf.add(f, arcname=f"slowjob/{f.name}")
    return path


@pytest.fixture(scope="module")
def browser_page(server: tuple[str, Path]) -> Iterator[tuple[object, list[str]]]:
    """A Chromium page, with every request URL recorded (nothing may leave the machine)."""
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                     args=["--no-sandbox", "--disable-dev-shm-usage"])
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        requests: list[str] = []
        page.on("request", lambda req: requests.append(req.url))
        try:
            yield page, requests
        finally:
            browser.close()


def shot(page: object, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.wait_for_timeout(1500)  # type: ignore[attr-defined]  # let charts finish drawing
    # Streamlit scrolls inside its main block: grow the window to the content's height
    height = page.evaluate(  # type: ignore[attr-defined]
        "() => document.querySelector('[data-testid=stMain]')?.scrollHeight || 1000")
    size = {"width": 1440, "height": min(max(int(height), 1000), 5000)}
    page.set_viewport_size(size)  # type: ignore[attr-defined]
    page.wait_for_timeout(800)  # type: ignore[attr-defined]
    page.screenshot(path=str(path), full_page=True)  # type: ignore[attr-defined]
    page.set_viewport_size({"width": 1440, "height": 1000})  # type: ignore[attr-defined]
    return path


def wait_text(page: object, text: str) -> None:
    page.get_by_text(text).first.wait_for(timeout=WAIT_MS)  # type: ignore[attr-defined]


def wait_heading(page: object, text: str) -> None:
    page.get_by_role("heading", name=text).first.wait_for(  # type: ignore[attr-defined]
        timeout=WAIT_MS)


def settle(page: object) -> None:
    """Wait until Streamlit has finished running the script (no 'Running' widget)."""
    page.wait_for_function(  # type: ignore[attr-defined]
        "() => !document.querySelector('[data-testid=stStatusWidget]')", timeout=WAIT_MS)


@pytest.mark.browser
def test_upload_an_archive_then_every_page(server, archive, browser_page):
    base, _ = server
    page, requests = browser_page
    page.goto(base)
    wait_text(page, "The database is empty")  # no database: the upload page
    shot(page, "01-upload-empty")
    page.locator("input[type=file]").first.set_input_files(str(archive))
    wait_text(page, "slowjob.tar.gz")
    page.get_by_role("button", name="Ingest the uploaded files").click()
    wait_text(page, "Run 'slowjob' ingested: 8 rank(s) from 8 file(s)")
    shot(page, "02-upload-done")
    page.get_by_role("button", name="Open run 'slowjob'").click()
    wait_heading(page, "Overview")
    wait_text(page, "rank 3")  # the simulated straggler, named on the overview
    settle(page)
    assert "page=overview" in page.url and "run=slowjob" in page.url
    # a bundled sample, one click away on the Upload page: the same job without straggler
    page.goto(f"{base}?page=upload")
    wait_heading(page, "Upload traces")
    page.get_by_role("combobox", name="Sample run").click()
    page.get_by_role("option", name="simulated/healthy").click()
    settle(page)
    page.get_by_role("button", name="Load sample").click()
    wait_text(page, "Run 'healthy' ingested: 8 rank(s) from 8 file(s)")
    from stepscope.dashboard.views import PAGES
    for n, key in enumerate(PAGES, start=3):
        page.goto(f"{base}?page={key}&run=slowjob" + ("&vs=healthy" if key == "compare" else ""))
        wait_heading(page, PAGES[key].HEADER)
        settle(page)
        assert page.get_by_text("Internal error").count() == 0
        assert page.locator("[data-testid=stException]").count() == 0
        shot(page, f"{n:02d}-{key}")
    hosts = {urlparse(u).hostname for u in requests if u.startswith("http")}
    assert hosts == {"127.0.0.1"}, f"requests left the machine: {hosts}"
