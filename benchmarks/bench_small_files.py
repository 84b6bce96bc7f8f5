"""Per-file cost of an ingest of many small traces (issue 24, §3).

    python benchmarks/bench_small_files.py [N] [--jobs J] [--executor inline|process]

Writes N two-step synthetic traces of ~20 KB (tests/conftest.py's kineto_trace, ranks
0..N-1 of one job) to a temporary folder, runs `stepscope ingest` on them in a
subprocess and prints the wall time and the CPU time (user + system, the ingest and its
worker processes) per file. CPU time is the figure to compare on a shared machine.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def write_traces(folder: Path, n: int) -> None:
    from conftest import kineto_trace, write_trace

    for rank in range(n):
        write_trace(folder / f"rank{rank}.json", kineto_trace(rank=rank, world_size=n))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("n", type=int, nargs="?", default=1000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--executor", default="process")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "traces"
        write_traces(folder, args.n)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "stepscope", "ingest", str(folder), "--db",
                        str(Path(tmp) / "b.duckdb"), "--quiet", "--jobs", str(args.jobs),
                        "--executor", args.executor], check=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(f"{args.n} files, {args.executor}, --jobs {args.jobs}: wall {wall:.1f} s "
          f"({1000 * wall / args.n:.1f} ms/file), CPU {cpu:.1f} s "
          f"({1000 * cpu / args.n:.1f} ms/file)")


if __name__ == "__main__":
    main()
