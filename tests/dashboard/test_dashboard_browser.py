"""The dashboard as a person sees it: `stepscope dashboard` on a free port over a copy of
the session's database of every bundled run, headless Chromium (Debian's
/usr/bin/chromium, driven by playwright; never a downloaded browser), a real two-rank job
from tests/data/traces uploaded through the file input, then every page of a simulated run
and of the uploaded one at 1400 and 1000 px. Each page is checked in the DOM once
Streamlit's script run has finished (stApp's data-test-script-state): no headline number
cut ("17.…": a metric's text wider than its box), no table wider than its box (a cut
column), no error; a heatmap cell opens the Timeline. Screenshots go to
$STEPSCOPE_TEST_ARTIFACTS/dashboard/<width>/ (default .artifacts, git-ignored) for people
to look at. Marked `browser`: select with -m browser."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from conftest import REAL_TRACES
from dashboard_helpers import REPO
from playwright.sync_api import sync_playwright

from stepscope.dashboard.app.views import PAGES, RUN_PAGES

CHROMIUM = Path("/usr/bin/chromium")
SHOTS = Path(os.environ.get("STEPSCOPE_TEST_ARTIFACTS", REPO / ".artifacts")) / "dashboard"
# two ranks of a real 128-rank job (HTA's trace_filter samples): uploaded as one run
REAL = REAL_TRACES / "HolisticTraceAnalysis" / "tests" / "data" / "trace_filter"
REAL_FILES = tuple(REAL / f"sampled_rank-{r}.json.gz" for r in (0, 1))
REAL_RUN = "real2"
SIM_RUN = "straggler"  # a bundled simulated run: rank 3 makes the others wait
WAIT_MS = 240_000
WIDTHS = (1400, 1000)
pytestmark = pytest.mark.browser

if not CHROMIUM.exists():
    pytest.skip("no Chromium at /usr/bin/chromium: run `apt-get install -y chromium` as root "
                "(.ci/run does)", allow_module_level=True)

# What a reader cannot see whole: a metric's value or label wider than its box (Streamlit
# cuts it to "17.…"), a table wider than its box (glide's scroller: columns cut off), an
# HTML table or a chart running out of the page's content column.
CUT_JS = """() => {
  const out = [];
  const over = (e) => e.scrollWidth > e.clientWidth + 1;
  for (const kind of ["stMetricValue", "stMetricLabel", "stMetricDelta"]) {
    for (const el of document.querySelectorAll(`[data-testid="${kind}"]`)) {
      const inner = el.querySelector('[data-testid="stMarkdownContainer"]') || el;
      if (over(inner) || over(el))
        out.push(`${kind} "${el.innerText}" ${inner.scrollWidth} > ${inner.clientWidth} px`);
    }
  }
  document.querySelectorAll('[data-testid="stDataFrame"]').forEach((df, i) => {
    const sc = df.querySelector('.dvn-scroller');
    if (sc && over(sc)) out.push(`table ${i}: ${sc.scrollWidth} > ${sc.clientWidth} px`);
  });
  const main = document.querySelector('[data-testid="stMainBlockContainer"]');
  const right = main.getBoundingClientRect().right + 1;
  document.querySelectorAll('[data-testid="stMain"] table, [data-testid="stPlotlyChart"]')
    .forEach((t, i) => {
      if (t.getBoundingClientRect().right > right) out.push(`${t.tagName} ${i} past the page`);
    });
  return out;
}"""


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
def server(tmp_path_factory: pytest.TempPathFactory,
           sample_db: Path) -> Iterator[tuple[str, Path]]:
    """A running `stepscope dashboard` on a copy of the database of every bundled run;
    stopped with Ctrl-C (SIGINT to its process group) at the end, which must exit 0."""
    tmp = tmp_path_factory.mktemp("browser")
    db, port = tmp / "ui.duckdb", free_port()
    shutil.copyfile(sample_db, db)
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
def browser_page(server: tuple[str, Path]) -> Iterator[tuple[Any, list[str]]]:
    """A Chromium page, with every request URL recorded (nothing may leave the machine)."""
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                     args=["--no-sandbox", "--disable-dev-shm-usage"])
        page = browser.new_page(viewport={"width": WIDTHS[0], "height": 1000})
        requests: list[str] = []
        page.on("request", lambda req: requests.append(req.url))
        try:
            yield page, requests
        finally:
            browser.close()


# Every element's code has loaded (a lazy one shows stSkeleton until then) and every
# Plotly chart has drawn, visible (Streamlit hides one until it knows its width).
DRAWN_JS = """() => !document.querySelector('[data-testid=stSkeleton]') &&
  [...document.querySelectorAll('[data-testid=stPlotlyChart]')].every((c) => {
    const plot = c.querySelector('.js-plotly-plot');
    return plot && plot.querySelector('.main-svg') &&
      getComputedStyle(plot).visibility !== 'hidden';
  })"""
SCRIPT_DONE_JS = ("() => document.querySelector('[data-testid=stApp]')?.dataset"
                  ".testScriptState === 'notRunning'")
FRAMES_JS = "() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))"


def settle(page: Any) -> None:
    """Wait until Streamlit has finished running the script, twice over a pause (a
    callback may start another run), and the charts have drawn."""
    page.wait_for_function(SCRIPT_DONE_JS, timeout=WAIT_MS)
    page.wait_for_timeout(1000)
    page.wait_for_function(SCRIPT_DONE_JS, timeout=WAIT_MS)
    page.wait_for_function(DRAWN_JS, timeout=WAIT_MS)


def shot(page: Any, name: str, width: int) -> Path:
    """The whole page (Streamlit scrolls inside its main block: the window grows to the
    content's height for the picture)."""
    folder = SHOTS / str(width)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    height = page.evaluate(
        "() => document.querySelector('[data-testid=stMain]')?.scrollHeight || 1000")
    page.set_viewport_size({"width": width, "height": min(max(int(height), 1000), 8000)})
    page.evaluate(FRAMES_JS)  # laid out at the new height, then drawn
    page.wait_for_function(DRAWN_JS, timeout=WAIT_MS)
    page.screenshot(path=str(path), full_page=True)
    page.set_viewport_size({"width": width, "height": 1000})
    return path


def wait_text(page: Any, text: str) -> None:
    page.get_by_text(text).first.wait_for(timeout=WAIT_MS)


def open_and_check(page: Any, base: str, query: str, name: str, width: int) -> list[str]:
    """Open one page by its link, wait for the script, shoot it and say what a reader
    could not see whole (an error, a cut metric, a cut table)."""
    page.goto(f"{base}?{query}")
    settle(page)
    problems = [f"{name}: internal error"] if page.get_by_text("Internal error").count() else []
    if page.locator("[data-testid=stException]").count():
        problems.append(f"{name}: {page.locator('[data-testid=stException]').first.inner_text()}")
    cut = page.evaluate(CUT_JS)
    path = shot(page, name, width)
    return problems + [f"{name} at {width} px ({path}): {c}" for c in cut]


def upload(page: Any, files: tuple[Path, ...], run: str, ranks: int) -> None:
    """Choose the files in the file input, name the run, ingest."""
    page.locator("input[type=file]").first.set_input_files([str(f) for f in files])
    # one chip per file, none still uploading (the chips shorten long names themselves)
    page.wait_for_function(
        "n => document.querySelectorAll('[data-testid=stFileChip]').length === n && "
        "!document.querySelector('[data-testid=stFileChipIconSpinner]')", arg=len(files),
        timeout=WAIT_MS)
    settle(page)
    name = page.get_by_role("textbox", name="Run name").first
    name.fill(run)
    name.press("Enter")
    settle(page)
    page.get_by_role("button", name="Ingest the uploaded files").click()
    wait_text(page, f"Run '{run}' ingested: {ranks} rank(s)")
    settle(page)
    # after a successful upload, no stale "a run of that name exists" warning
    assert page.get_by_text(f"A run named '{run}' exists").count() == 0


def test_upload_then_every_page_at_two_widths(server, browser_page):
    if not all(f.exists() for f in REAL_FILES):
        pytest.fail("tests/data/traces is missing from this checkout (the real trace to upload)")
    base, _ = server
    page, requests = browser_page
    page.goto(f"{base}?page=upload")
    settle(page)
    # the user's own traces come before the bundled samples
    own = page.get_by_text("From your computer").bounding_box()
    samples = page.get_by_text("Bundled samples").bounding_box()
    assert own["y"] < samples["y"]
    shot(page, "upload", WIDTHS[0])
    upload(page, REAL_FILES, REAL_RUN, 2)
    shot(page, "upload-done", WIDTHS[0])
    problems: list[str] = []
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 1000})
        for key in PAGES:
            for run in (SIM_RUN, REAL_RUN) if key in RUN_PAGES else (None,):
                query = f"page={key}" + (f"&run={run}" if run else "")
                problems += open_and_check(page, base, query, f"{run or 'all'}-{key}", width)
        problems += open_and_check(page, base, "page=overview&run=doesnotexist",
                                   "missing-run", width)
        assert page.get_by_text("Run 'doesnotexist' does not exist").count() == 1
    assert not problems, "\n".join(problems)
    hosts = {urlparse(u).hostname for u in requests if u.startswith("http")}
    assert hosts == {"127.0.0.1"}, f"requests left the machine: {hosts}"


def test_a_heatmap_cell_opens_the_timeline(server, browser_page):
    """Clicking a cell of the Ranks heatmap opens the Timeline at that step, with that
    rank drawn; the Timeline's hover names what ran."""
    base, _ = server
    page, _ = browser_page
    page.set_viewport_size({"width": WIDTHS[0], "height": 1000})
    page.goto(f"{base}?page=ranks&run={SIM_RUN}")
    settle(page)
    chart = page.locator("[data-testid=stPlotlyChart]").first
    chart.scroll_into_view_if_needed()
    box = chart.locator(".nsewdrag").first.bounding_box()
    # rank 3 (row 4 of 8), the first complete step (column 1 of 2)
    at = (box["x"] + box["width"] * 0.25, box["y"] + box["height"] * (3.5 / 8))
    page.mouse.move(*at)
    page.locator(".hoverlayer .hovertext").first.wait_for(timeout=WAIT_MS)
    hover = page.locator(".hoverlayer").first.text_content()
    assert "rank 3, step 1" in hover and "open the Timeline" in hover, hover
    page.mouse.click(*at)
    page.wait_for_url("**page=timeline**", timeout=WAIT_MS)
    settle(page)
    title = page.locator("[data-testid=stPlotlyChart] .gtitle").first.text_content()
    assert title.startswith("Step 1:"), title
    assert "3" in page.locator("[data-testid=stMultiSelect]").first.inner_text().split()
    gantt = page.locator("[data-testid=stPlotlyChart]").first.locator(".nsewdrag").first
    g = gantt.bounding_box()
    page.mouse.move(g["x"] + g["width"] * 0.3, g["y"] + g["height"] * 0.1)
    page.locator(".hoverlayer .hovertext").first.wait_for(timeout=WAIT_MS)
    hover = page.locator(".hoverlayer").first.text_content()
    assert "ms" in hover and "from" in hover, hover
    shot(page, "heatmap-click-timeline", WIDTHS[0])
