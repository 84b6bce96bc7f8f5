"""Attribution / report benchmark on a 64-rank simulated GPU job.

Generates (once, into benchmarks/data/bench64) 64 ranks of a TP8 x PP4 x DP2 job with
~1,100 GPU ops per step per rank and 10 steps, then times: the raw ingest, the
attribution (materialized in DuckDB), and building + rendering the full report.

    python benchmarks/bench_report.py [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

import duckdb  # noqa: E402

from stepscope.analyzers.breakdown.attribution import materialize  # noqa: E402
from stepscope.analyzers.report import build_report  # noqa: E402
from stepscope.dashboard.render.report import report_json, report_markdown  # noqa: E402
from stepscope.ingest import ingest  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    data = HERE / "data" / "bench64"
    if not (data / "rank63.json.gz").exists():
        subprocess.run([sys.executable, str(REPO / "sample_traces" / "simulate_gpu.py"),
                        "--sets", "bench64", "--no-truth", "--out", str(HERE / "data")],
                       check=True)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "b.duckdb"
        t0 = time.perf_counter()
        ingest([data], db=db, run="bench64")
        t1 = time.perf_counter()
        con = duckdb.connect(str(db))
        counts = con.execute(
            "SELECT (SELECT count(*) FROM gpu_ops), (SELECT count(*) FROM cpu_ops), "
            "(SELECT count(DISTINCT step) FROM steps)").fetchall()[0]
        t2 = time.perf_counter()
        materialize(con, "bench64")
        t3 = time.perf_counter()
        report = build_report(con, "bench64")
        report_markdown(report)
        report_json(report)
        t4 = time.perf_counter()
        con.close()
    results = {
        "ranks": 64, "gpu_ops": counts[0], "cpu_ops": counts[1], "steps": counts[2],
        "ingest_s": t1 - t0, "attribution_s": t3 - t2, "report_s": t4 - t3,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    print(f"64 ranks, {counts[0]:,} GPU ops, {counts[1]:,} CPU ops, {counts[2]} steps")
    print(f"ingest (raw tables)          {results['ingest_s']:6.2f} s")
    print(f"attribution (materialized)   {results['attribution_s']:6.2f} s")
    print(f"report (build + render)      {results['report_s']:6.2f} s")
    print(f"peak RSS                     {results['peak_rss_mb']:6.0f} MB")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
