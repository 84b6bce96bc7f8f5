"""CPU seconds (user + sys) of a whole ingest, this checkout against a baseline checkout.

On a shared machine wall time moves with the other users' load; the CPU time the
ingest's process tree spends (the writer and every worker it starts and waits for:
`getrusage(RUSAGE_CHILDREN)` around each run) moves far less. Each round ingests SET
once with each checkout, back to back (the order alternates between rounds), into a new
DuckDB file; prints the per-run figures, the medians and the load average
(benchmarks/README.md, "Faster than parsing").

    python benchmarks/bench_ingest_cpu.py SET --baseline DIR [--repeat 5] [--json out.json]

DIR is a source checkout (e.g. `git archive main | tar -x -C DIR`), put first on
PYTHONPATH for its runs (its workers run its code too).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CODE = ("import sys, stepscope\n"
        "stepscope.ingest_run([sys.argv[1]], db=sys.argv[2], run='bench')\n")


def run_cpu(trace_set: Path, path: str | None) -> tuple[float, float]:
    """(CPU s, wall s) of one ingest of `trace_set` in a fresh interpreter; `path` first on
    PYTHONPATH when given (`-P`: never the current folder's `stepscope`)."""
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (path, env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory(prefix="stepscope-cpu-") as tmp:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-P", "-c", CODE, str(trace_set),
                        str(Path(tmp) / "b.duckdb")], env=env, check=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("set", type=Path)
    parser.add_argument("--baseline", required=True)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    runs: dict[str, list[tuple[float, float]]] = {"this checkout": [], "baseline": []}
    loads = [os.getloadavg()[0]]
    for i in range(args.repeat):
        order = ["this checkout", "baseline"] if i % 2 == 0 else ["baseline", "this checkout"]
        for name in order:
            runs[name].append(run_cpu(args.set, args.baseline if name == "baseline" else None))
        loads.append(os.getloadavg()[0])
    result = {name: {"cpu_s": [round(c, 2) for c, _ in got],
                     "wall_s": [round(w, 2) for _, w in got],
                     "median_cpu_s": round(statistics.median(c for c, _ in got), 2),
                     "median_wall_s": round(statistics.median(w for _, w in got), 2)}
              for name, got in runs.items()}
    result["load_average_1min"] = [round(x, 2) for x in loads]
    print(json.dumps(result, indent=1))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
