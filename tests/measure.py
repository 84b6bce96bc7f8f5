"""Run the stepscope CLI in a child process and measure its peak memory.

A child's `ru_maxrss` counts from before it execs, when it is still a copy of the
process that started it: a test session holding a few hundred MB would lend them to it.
So the CLI is started by a small wrapper process, and the wrapper reports
`getrusage(RUSAGE_CHILDREN).ru_maxrss`: the peak RSS of the largest process of the
CLI's own tree (it and every descendant it waited for), nothing else. With
STEPSCOPE_JOBS=1 the ingest parses inline: the tree is one process, and that peak is
the tree's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass

_WRAPPER = """
import json, resource, subprocess, sys
try:
    code = subprocess.run([sys.executable, "-m", "stepscope", *sys.argv[2:]],
                          stdout=subprocess.DEVNULL, timeout=float(sys.argv[1])).returncode
except subprocess.TimeoutExpired:
    code = -9
print(json.dumps({"code": code,
                  "rss_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


@dataclass(frozen=True)
class Measured:
    code: int
    peak_rss_mb: float
    stderr: str


def run_cli(args: list[str], timeout_s: float = 300) -> Measured:
    """`python -m stepscope ARGS` with one job; killed (code -9) past `timeout_s`."""
    env = dict(os.environ, STEPSCOPE_JOBS="1")
    done = subprocess.run([sys.executable, "-c", _WRAPPER, str(timeout_s), *args],
                          capture_output=True, text=True, env=env, timeout=timeout_s + 60)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return Measured(result["code"], result["rss_kb"] / 1024, done.stderr)
