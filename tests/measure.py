"""Run the stepscope CLI in a child process and measure its peak memory.

`os.wait4` returns the resource usage of that one child and every descendant it waited
for, so `ru_maxrss` is the peak RSS of the largest process of the command's own tree,
never polluted by earlier children of the test session. With STEPSCOPE_JOBS=1 the
ingest parses inline: the tree is one process, and that peak is the tree's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class Measured:
    code: int
    peak_rss_mb: float
    stderr: str


def run_cli(args: list[str], timeout_s: float = 300) -> Measured:
    """`python -m stepscope ARGS` with one job; killed (code -9) past `timeout_s`."""
    env = dict(os.environ, STEPSCOPE_JOBS="1")
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-m", "stepscope", *args],
                                stdout=subprocess.DEVNULL, stderr=err, env=env)
        timer = threading.Timer(timeout_s, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        text = err.read().decode("utf-8", "replace")
    return Measured(proc.returncode, usage.ru_maxrss / 1024, text)
