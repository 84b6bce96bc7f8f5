"""Two real jobs uploaded through the dashboard's file input, as a person would, into a
running `stepscope dashboard` over the bundled runs: the 8-rank V100 DLRM job of
facebookresearch/param (one archive) and rank 0 of DeepSeek-V3's 64-GPU MoE training
(tests/data/*/PROVENANCE.md). Every run page of both and of a simulated run, at 1400 and
1000 px in headless Chromium (Debian's /usr/bin/chromium): no internal error, no section
that could not be drawn, Compare's every section below "Predicted from A vs measured"
(the DLRM job's Compare stopped there on a ZeroDivisionError), nothing requested off the
machine. Screenshots under $STEPSCOPE_TEST_ARTIFACTS/dashboard-real/<width>/ (default
.artifacts). Marked `browser`."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import test_dashboard_browser as browser
from dashboard_helpers import REPO
from playwright.sync_api import sync_playwright

from stepscope.dashboard.app.views import RUN_PAGES

pytestmark = pytest.mark.browser

DATA = REPO / "tests" / "data"
DLRM = DATA / "facebookresearch_param" / "et_replay" / "tests" / "inputs" / "dlrm_kineto.tar.gz"
DEEPSEEK = DATA / "deepseek-ai_profile-data" / "train.json.gz"
SHOTS = Path(os.environ.get("STEPSCOPE_TEST_ARTIFACTS", REPO / ".artifacts")) / "dashboard-real"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, sample_db: Path
           ) -> Iterator[tuple[str, Path]]:
    """`stepscope dashboard` on a copy of the bundled runs; stopped with SIGTERM, which
    must exit 143 with the server gone."""
    tmp = tmp_path_factory.mktemp("real_browser")
    db, port = tmp / "ui.duckdb", browser.free_port()
    shutil.copyfile(sample_db, db)
    proc = subprocess.Popen(
        [sys.executable, "-m", "stepscope", "dashboard", "--db", str(db), "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        cwd=tmp)
    base = f"http://127.0.0.1:{port}/"
    try:
        browser.wait_healthy(base, proc)
        yield base, tmp
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=60)


@pytest.fixture(scope="module")
def page(server: tuple[str, Path]) -> Iterator[tuple[Any, list[str]]]:
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(browser.CHROMIUM), headless=True,
                                      args=["--no-sandbox", "--disable-dev-shm-usage"])
        tab = chromium.new_page(viewport={"width": 1400, "height": 1000})
        requests: list[str] = []
        tab.on("request", lambda req: requests.append(req.url))
        try:
            yield tab, requests
        finally:
            chromium.close()


def _check(tab: Any, base: str, query: str, name: str, width: int) -> list[str]:
    problems = browser.open_and_check(tab, base, query, name, width)
    if tab.get_by_text("this section could not be drawn").count():
        problems.append(f"{name} at {width} px: a section could not be drawn")
    return problems


def test_two_real_jobs_uploaded_then_every_page(server, page, monkeypatch):
    monkeypatch.setattr(browser, "SHOTS", SHOTS)
    base, _ = server
    tab, requests = page
    tab.goto(f"{base}?page=upload")
    browser.settle(tab)
    browser.upload(tab, (DLRM,), "dlrm", 8)
    tab.goto(f"{base}?page=upload")
    browser.settle(tab)
    browser.upload(tab, (DEEPSEEK,), "deepseek", 1)
    problems: list[str] = []
    for width in browser.WIDTHS:
        tab.set_viewport_size({"width": width, "height": 1000})
        for key in sorted(RUN_PAGES):
            for run in ("straggler", "dlrm", "deepseek"):
                problems += _check(tab, base, f"page={key}&run={run}", f"{run}-{key}", width)
        problems += _check(tab, base, "page=compare&run=dlrm&vs=fp32_v100",
                           "dlrm-vs-fp32_v100", width)
        for section in ("Predicted from A vs measured", "Setup changes", "Stragglers"):
            assert tab.get_by_text(section, exact=True).count() >= 1, section
    assert not problems, "\n".join(problems)
    hosts = {urlparse(u).hostname for u in requests if u.startswith("http")}
    assert hosts == {"127.0.0.1"}, f"requests left the machine: {hosts}"
