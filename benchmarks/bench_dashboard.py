"""Dashboard page render time on a 64-rank simulated job, first (uncached) and cached.

Uses the 64-rank TP8 x PP4 x DP2 job of bench_report.py (generated once into
benchmarks/data/bench64), ingests it once into benchmarks/data/bench64-dashboard.duckdb,
then renders every page of the app with streamlit's AppTest (the script run, the model
and every chart built; no browser) and reports the first and the median of three cached
renders per page.

    python benchmarks/bench_dashboard.py [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from streamlit.testing.v1 import AppTest  # noqa: E402

from stepscope.dashboard.app.uploads import ingest_staged  # noqa: E402
from stepscope.dashboard.app.views import PAGES  # noqa: E402

RUN = "bench64"


def prepare() -> Path:
    data = HERE / "data" / "bench64"
    if not (data / "rank63.json.gz").exists():
        subprocess.run([sys.executable, str(REPO / "sample_traces" / "simulate_gpu.py"),
                        "--sets", "bench64", "--no-truth", "--out", str(HERE / "data")],
                       check=True)
    db = HERE / "data" / "bench64-dashboard.duckdb"
    if not db.exists():
        ingest_staged([data], db, RUN)
    return db


def render(page: str) -> float:
    at = AppTest.from_file(str(REPO / "dashboard" / "app" / "main.py"), default_timeout=600)
    at.query_params["page"] = page
    at.query_params["run"] = RUN
    t0 = time.perf_counter()
    at.run()
    elapsed = time.perf_counter() - t0
    if at.exception or any("Internal error" in str(e.value) for e in at.error):
        raise SystemExit(f"page {page} failed: {[e.value for e in at.exception]}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    os.environ["STEPSCOPE_DB"] = str(prepare())
    results = {}
    print(f"{'page':<14} {'first s':>8} {'cached s':>9}")
    for page in PAGES:
        first = render(page)
        cached = statistics.median(render(page) for _ in range(3))
        results[page] = {"first_s": round(first, 3), "cached_s": round(cached, 3)}
        print(f"{page:<14} {first:8.2f} {cached:9.2f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
