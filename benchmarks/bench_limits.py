"""Resource limits benchmark (issue 9): a decompression bomb and a truncated trace.

Builds (in a temporary folder) a small gzip that inflates to `--bomb-mib` MiB of JSON
(whitespace inside a valid trace), and a ~5 MB plain trace missing its final brace, then
runs `stepscope ingest` on each in a fresh interpreter and reports wall time, peak RSS
(the child's ru_maxrss) and the one-line outcome: under the default limit and under
`--max-trace-size` below the bomb's size.

    python benchmarks/bench_limits.py [--bomb-mib 2048]
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))


def _bomb(path: Path, mib: int) -> Path:
    with gzip.GzipFile(path, "wb", compresslevel=9, mtime=0) as fh:
        fh.write(b'{"traceEvents": [')
        block = b" " * (1 << 20)
        for _ in range(mib):
            fh.write(block)
        fh.write(b'{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, '
                 b'"ts": 1, "dur": 1}]}')
    return path


def _truncated(path: Path) -> Path:
    from conftest import kineto_trace

    data = json.dumps(kineto_trace(rank=0, steps=700)).encode()
    path.write_bytes(data[:-1])
    return path


def _run(args: list[str]) -> tuple[float, float, str]:
    start = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    proc = subprocess.run([sys.executable, "-m", "stepscope", "ingest", *args, "--quiet"],
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    line = (proc.stderr.strip().splitlines() or ["(no message)"])[0]
    return wall, max(rss, before) / 1024, f"exit {proc.returncode}: {line[:110]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bomb-mib", type=int, default=2048)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-limits-") as tmp:
        folder = Path(tmp)
        bomb = _bomb(folder / "rank0.json.gz", opts.bomb_mib)
        trunc = _truncated(folder / "trunc.json")
        print(f"bomb: {bomb.stat().st_size / 1e6:.1f} MB gzip -> {opts.bomb_mib} MiB; "
              f"truncated: {trunc.stat().st_size / 1e6:.1f} MB")
        cases = [
            ("truncated plain JSON", [str(trunc), "--db", str(folder / "t.duckdb")]),
            (f"bomb, --max-trace-size {opts.bomb_mib // 2}M",
             [str(bomb), "--db", str(folder / "a.duckdb"),
              "--max-trace-size", f"{opts.bomb_mib // 2}M"]),
            ("bomb, default limit (8G)", [str(bomb), "--db", str(folder / "b.duckdb")]),
        ]
        print("| case | wall s | peak RSS MB (largest child so far) | outcome |")
        print("|---|---:|---:|---|")
        for name, args in cases:
            wall, rss, outcome = _run(args)
            print(f"| {name} | {wall:.1f} | {rss:.0f} | {outcome} |")


if __name__ == "__main__":
    main()
