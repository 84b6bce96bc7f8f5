"""Wall time and peak memory of a command and every process it starts.

`ru_maxrss` only sees one process (the largest), which flatters tools that fan out to
worker processes (stepscope's `process` executor, HTA's loader). Here the RSS of the
whole process tree is summed every 50 ms; the peak of that sum is what the machine had
to hold (a spike shorter than 50 ms can be missed). The largest process's figure is also
the command's own `ru_maxrss` when that is higher (exact for the command's process: the
writer's commit peaks for less than 50 ms). The command is started by a small Python
process (`_SPAWNER`) that forks it and reports its `ru_maxrss`: a process forked from
the benchmark itself would count the benchmark's own resident set (Linux keeps the
high-water mark of the memory it had before `exec`), 300 MB of a parent's buffers in
the figure of `python -c pass`.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

SAMPLE_S = 0.05
# argv: the file to write the command's ru_maxrss (KiB) to, then the command; exits with
# the command's exit code.
_SPAWNER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


@dataclass(frozen=True)
class Measured:
    wall_s: float
    peak_tree_mb: float     # peak of the summed RSS of the command and its descendants
    peak_single_mb: float   # largest single process (what ru_maxrss would report)


def _tree_rss(spawner: psutil.Process) -> tuple[int, int]:
    """The summed and the largest RSS of the spawner's descendants (the command's tree)."""
    total = largest = 0
    try:
        procs = spawner.children(recursive=True)
    except psutil.Error:
        return 0, 0
    for p in procs:
        try:
            rss = p.memory_info().rss
        except psutil.Error:
            continue
        total += rss
        largest = max(largest, rss)
    return total, largest


def run_measured(cmd: list[str], env: dict[str, str] | None = None) -> Measured:
    """Run `cmd` to completion; raises RuntimeError when it fails."""
    with tempfile.TemporaryDirectory(prefix="stepscope-measure-") as tmp:
        maxrss = Path(tmp) / "maxrss"
        start = time.perf_counter()
        popen = subprocess.Popen([sys.executable, "-c", _SPAWNER, str(maxrss), *cmd], env=env)
        spawner = psutil.Process(popen.pid)
        peak_total = peak_single = 0
        while popen.poll() is None:
            total, largest = _tree_rss(spawner)
            peak_total, peak_single = max(peak_total, total), max(peak_single, largest)
            time.sleep(SAMPLE_S)
        wall = time.perf_counter() - start
        if popen.returncode != 0:
            raise RuntimeError(f"{cmd[:3]} failed with exit code {popen.returncode}")
        peak_single = max(peak_single, int(maxrss.read_text()) << 10)  # KiB on Linux
    return Measured(wall, peak_total / 2**20, peak_single / 2**20)
