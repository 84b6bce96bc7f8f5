"""Ingest benchmark: stepscope vs HTA's trace load vs plain orjson.loads, same files.

Builds an N-rank set from one real Kineto trace (each copy gets its own
distributedInfo.rank), then runs each contender in a fresh subprocess and reports wall
time, throughput (uncompressed MB/s) and the peak RSS of its whole process tree
(benchmarks/_measure.py: stepscope's worker processes and HTA's are counted).

    python benchmarks/bench_ingest.py [--source FILE] [--ranks 8] [--repeat 1] [--json OUT]

Default source: ../shared/traces/HolisticTraceAnalysis/tests/data/trace_diff/control/
control.json.gz (35 MB uncompressed, a real 2022 rank of an 8-rank job), else the largest
bundled sample trace. Contenders whose package is missing are reported as skipped.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import Measured, run_measured

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = (REPO.parent / "shared" / "traces" / "HolisticTraceAnalysis" / "tests" / "data"
                  / "trace_diff" / "control" / "control.json.gz")
DATA = Path(__file__).resolve().parent / "data"

CONTENDERS = {
    "stepscope ingest": (
        "import sys, stepscope\n"
        "stepscope.ingest_run([sys.argv[1]], db=sys.argv[2], run='bench')\n"
    ),
    "stepscope ingest (inline)": (
        "import sys, stepscope\n"
        "stepscope.ingest_run([sys.argv[1]], db=sys.argv[2], run='bench', executor='inline')\n"
    ),
    "HTA TraceAnalysis load": (
        "import sys, logging\n"
        "logging.disable(logging.CRITICAL)\n"
        "from hta.trace_analysis import TraceAnalysis\n"
        "TraceAnalysis(trace_dir=sys.argv[1])\n"
    ),
    "orjson.loads (sequential)": (
        "import sys, gzip, pathlib, orjson\n"
        "for f in sorted(pathlib.Path(sys.argv[1]).glob('*.json.gz')):\n"
        "    orjson.loads(gzip.open(f).read())\n"
    ),
}
REQUIRES = {"stepscope ingest": "stepscope", "stepscope ingest (inline)": "stepscope",
            "HTA TraceAnalysis load": "hta",
            "orjson.loads (sequential)": "orjson"}


def build_set(source: Path, ranks: int) -> tuple[Path, float]:
    """Write `ranks` gzipped copies of `source`, one per rank; returns (dir, raw MB)."""
    target = DATA / f"{source.name.split('.')[0]}_x{ranks}"
    marker = target / ".complete"
    raw = gzip.open(source).read() if source.name.endswith(".gz") else source.read_bytes()
    if not marker.exists():
        target.mkdir(parents=True, exist_ok=True)
        trace = json.loads(raw)
        info = trace.setdefault("distributedInfo", {})
        info["world_size"] = ranks
        for r in range(ranks):
            info["rank"] = r
            with gzip.open(target / f"rank{r}.json.gz", "wb", compresslevel=6) as fh:
                fh.write(json.dumps(trace).encode())
        marker.write_text("ok")
    raw_mb = sum(len(gzip.open(f).read()) for f in target.glob("*.json.gz")) / 1e6
    return target, raw_mb


def run_child(code: str, *args: str) -> Measured:
    """Run `code` in a fresh interpreter: wall time, and peak RSS of its process tree."""
    return run_measured([sys.executable, "-c", code, *args])


def available(module: str) -> bool:
    return subprocess.run([sys.executable, "-c", f"import {module}"],
                          capture_output=True).returncode == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=None)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    parser.add_argument("--only", default=None, help="comma-separated contender names")
    args = parser.parse_args(argv)
    source = args.source or (DEFAULT_SOURCE if DEFAULT_SOURCE.exists() else max(
        (REPO / "sample_traces").rglob("*.json.gz"), key=lambda p: p.stat().st_size))
    trace_dir, raw_mb = build_set(source, args.ranks)
    gz_mb = sum(f.stat().st_size for f in trace_dir.glob("*.json.gz")) / 1e6
    print(f"set: {args.ranks} ranks of {source.name}: {raw_mb:.0f} MB JSON "
          f"({gz_mb:.0f} MB gzipped), {os.cpu_count()} CPUs")
    results = []
    names = args.only.split(",") if args.only else list(CONTENDERS)
    for name in names:
        if not available(REQUIRES[name]):
            print(f"{name:28s} skipped (module {REQUIRES[name]} not installed)")
            continue
        best: Measured | None = None
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                m = run_child(CONTENDERS[name], str(trace_dir), str(Path(tmp) / "b.duckdb"))
            if best is None or m.wall_s < best.wall_s:
                best = m
        assert best is not None
        results.append({"contender": name, "wall_s": best.wall_s,
                        "mb_per_s": raw_mb / best.wall_s, "peak_rss_mb": best.peak_tree_mb,
                        "largest_process_mb": best.peak_single_mb})
    base = next((r for r in results if r["contender"] == "stepscope ingest"), None)
    print(f"{'contender':28s} {'wall s':>8s} {'MB/s':>8s} {'tree RSS MB':>12s} "
          f"{'time vs stepscope':>18s} {'RSS vs stepscope':>17s}")
    for r in results:
        t_ratio = r["wall_s"] / base["wall_s"] if base else float("nan")
        m_ratio = r["peak_rss_mb"] / base["peak_rss_mb"] if base else float("nan")
        print(f"{r['contender']:28s} {r['wall_s']:8.2f} {r['mb_per_s']:8.1f} "
              f"{r['peak_rss_mb']:12.0f} {t_ratio:17.1f}x {m_ratio:16.2f}x")
    if args.json:
        args.json.write_text(json.dumps({"source": str(source), "ranks": args.ranks,
                                         "raw_mb": raw_mb, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
