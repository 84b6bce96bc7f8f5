"""Ingest benchmark: stepscope vs HTA's trace load vs plain orjson.loads, same files.

Builds an N-rank set from one real Kineto trace (each copy gets its own
distributedInfo.rank), then runs each contender in a fresh subprocess and reports wall
time, throughput (uncompressed MB/s) and the peak RSS of its whole process tree
(benchmarks/_measure.py: stepscope's worker processes and HTA's are counted).

Each round runs every contender once, back to back, so that the ratios of a round are
taken under the same load; the table gives the median of the rounds per contender and
the median of the per-round ratios (a shared machine's load moves every figure, the
ratios much less). `--baseline DIR` adds the same ingest by another stepscope source
checkout (the previous release: its folder on PYTHONPATH), and `stepscope --help`
of both.

    python benchmarks/bench_ingest.py [--source FILE] [--ranks 8] [--repeat 3]
                                      [--baseline DIR] [--traceinsight-python PY]
                                      [--json OUT]

`--traceinsight-python PY` adds HTA's current release, published as `traceinsight`
(0.6.1, 2026-04; same `hta` module, needs pandas 3), from its own environment:
`python3.11 -m venv ti && ti/bin/pip install traceinsight==0.6.1 'pandas>=3'`, then
`--traceinsight-python ti/bin/python`. `gunzip alone` is the floor every contender pays.

Default source: tests/data/traces/HolisticTraceAnalysis/tests/data/trace_diff/control/
control.json.gz (35 MB uncompressed, a real 2022 rank of an 8-rank job), else the largest
bundled sample trace. Contenders whose package is missing are reported as skipped.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
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
    "gunzip alone (sequential)": (
        "import sys, gzip, pathlib\n"
        "for f in sorted(pathlib.Path(sys.argv[1]).glob('*.json.gz')):\n"
        "    gzip.open(f).read()\n"
    ),
}
# HTA's current release, published as `traceinsight` (same `hta` module), needs pandas 3:
# it runs from its own environment, given by --traceinsight-python (see README).
TRACEINSIGHT = "traceinsight TraceAnalysis load"
HELP = ("import contextlib, io, sys\nsys.argv = ['stepscope', '--help']\n"
        "from stepscope.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n    main()\n")
BASELINE = "stepscope ingest (baseline)"
REQUIRES = {"stepscope ingest": "stepscope", "stepscope ingest (inline)": "stepscope",
            "HTA TraceAnalysis load": "hta",
            "orjson.loads (sequential)": "orjson", "gunzip alone (sequential)": "gzip",
            TRACEINSIGHT: "hta", BASELINE: "stepscope",
            "stepscope --help": "stepscope", "stepscope --help (baseline)": "stepscope"}
CODE = {**CONTENDERS, BASELINE: CONTENDERS["stepscope ingest"],
        TRACEINSIGHT: CONTENDERS["HTA TraceAnalysis load"],
        "stepscope --help": HELP, "stepscope --help (baseline)": HELP}


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
            with gzip.GzipFile(target / f"rank{r}.json.gz", "wb", compresslevel=6,
                               mtime=0) as fh:
                fh.write(json.dumps(trace).encode())
        marker.write_text("ok")
    raw_mb = sum(len(gzip.open(f).read()) for f in target.glob("*.json.gz")) / 1e6
    return target, raw_mb


def run_child(code: str, *args: str, path: str | None = None,
              python: str = sys.executable) -> Measured:
    """Run `code` in a fresh interpreter (with `path` first on PYTHONPATH): wall time,
    and peak RSS of its process tree.

    `-P`: without it `python -c` puts the current folder first on sys.path, and run from
    the checkout (as documented) the baseline imported this checkout's `stepscope`, not
    its own: every "baseline" row measured that way before 2026-12-01 night timed this
    version twice."""
    env = None
    if path is not None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (path, os.environ.get("PYTHONPATH")) if p)}
    return run_measured([python, "-P", "-c", code, *args], env=env)


def available(module: str, python: str = sys.executable) -> bool:
    return subprocess.run([python, "-c", f"import {module}"],
                          capture_output=True).returncode == 0


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _round(names: list[str], trace_dir: Path, baseline: str | None,
           pythons: dict[str, str]) -> dict[str, Measured]:
    """Every contender once, back to back."""
    got = {}
    for name in names:
        path = baseline if name.endswith("(baseline)") else None
        with tempfile.TemporaryDirectory() as tmp:
            got[name] = run_child(CODE[name], str(trace_dir), str(Path(tmp) / "b.duckdb"),
                                  path=path, python=pythons.get(name, sys.executable))
    return got


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min) / {five:.1f} (5 min) on {os.cpu_count()} CPUs"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=None)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3, help="rounds (medians are taken)")
    parser.add_argument("--baseline", default=None,
                        help="another stepscope source checkout to compare with")
    parser.add_argument("--traceinsight-python", default=None,
                        help="the python of an environment with traceinsight installed")
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    parser.add_argument("--only", default=None, help="comma-separated contender names")
    args = parser.parse_args(argv)
    source = args.source or (DEFAULT_SOURCE if DEFAULT_SOURCE.exists() else max(
        (REPO / "sample_traces").rglob("*.json.gz"), key=lambda p: p.stat().st_size))
    trace_dir, raw_mb = build_set(source, args.ranks)
    gz_mb = sum(f.stat().st_size for f in trace_dir.glob("*.json.gz")) / 1e6
    print(f"set: {args.ranks} ranks of {source.name}: {raw_mb:.0f} MB JSON "
          f"({gz_mb:.0f} MB gzipped); {_load()}")
    names = args.only.split(",") if args.only else [
        *CONTENDERS, *([TRACEINSIGHT] if args.traceinsight_python else []),
        *([BASELINE] if args.baseline else []), "stepscope --help",
        *(["stepscope --help (baseline)"] if args.baseline else [])]
    pythons = {TRACEINSIGHT: args.traceinsight_python} if args.traceinsight_python else {}
    for name in list(names):
        if not available(REQUIRES[name], pythons.get(name, sys.executable)):
            print(f"{name:30s} skipped (module {REQUIRES[name]} not installed)")
            names.remove(name)
    rounds = [_round(names, trace_dir, args.baseline, pythons) for _ in range(args.repeat)]
    print(f"after {args.repeat} rounds: {_load()}")
    results = []
    for name in names:
        ms = [r[name] for r in rounds]
        row = {"contender": name, "wall_s": median([m.wall_s for m in ms]),
               "walls_s": [round(m.wall_s, 3) for m in ms],
               "peak_rss_mb": median([m.peak_tree_mb for m in ms]),
               "largest_process_mb": median([m.peak_single_mb for m in ms])}
        row["mb_per_s"] = raw_mb / row["wall_s"]
        if "stepscope ingest" in rounds[0]:
            row["time_vs_stepscope"] = median(
                [r[name].wall_s / r["stepscope ingest"].wall_s for r in rounds])
            row["rss_vs_stepscope"] = median(
                [r[name].peak_tree_mb / r["stepscope ingest"].peak_tree_mb for r in rounds])
        results.append(row)
    print(f"{'contender':30s} {'median s':>9s} {'runs s':>20s} {'MB/s':>7s} {'tree MB':>8s} "
          f"{'largest MB':>10s} {'time ratio':>10s} {'RSS ratio':>9s}")
    for r in results:
        runs = "/".join(f"{w:.2f}" for w in r["walls_s"])
        print(f"{r['contender']:30s} {r['wall_s']:9.2f} {runs:>20s} {r['mb_per_s']:7.1f} "
              f"{r['peak_rss_mb']:8.0f} {r['largest_process_mb']:10.0f} "
              f"{r.get('time_vs_stepscope', float('nan')):9.2f}x "
              f"{r.get('rss_vs_stepscope', float('nan')):8.2f}x")
    print("(ratios: median over the rounds of contender / `stepscope ingest` in that round)")
    if args.json:
        args.json.write_text(json.dumps({"source": str(source), "ranks": args.ranks,
                                         "raw_mb": raw_mb, "baseline": args.baseline,
                                         "rounds": args.repeat, "results": results},
                                        indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
