"""Wall time and peak memory of a command and every process it starts.

`ru_maxrss` only sees one process (the largest), which flatters tools that fan out to
worker processes (stepscope's `process` executor, HTA's loader). Here the RSS of the
whole process tree is summed every 50 ms; the peak of that sum is what the machine had
to hold (a spike shorter than 50 ms can be missed). The largest process's figure is also
the command's own `ru_maxrss` when that is higher (exact for the command's process: the
writer's commit peaks for less than 50 ms).
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass

import psutil

SAMPLE_S = 0.05


@dataclass(frozen=True)
class Measured:
    wall_s: float
    peak_tree_mb: float     # peak of the summed RSS of the command and its descendants
    peak_single_mb: float   # largest single process (what ru_maxrss would report)


def _tree_rss(proc: psutil.Process) -> tuple[int, int]:
    total = largest = 0
    try:
        procs = [proc, *proc.children(recursive=True)]
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
    start = time.perf_counter()
    popen = subprocess.Popen(cmd, env=env)
    proc = psutil.Process(popen.pid)
    peak_total = peak_single = 0
    while True:
        pid, status, usage = os.wait4(popen.pid, os.WNOHANG)
        if pid:
            break
        total, largest = _tree_rss(proc)
        peak_total, peak_single = max(peak_total, total), max(peak_single, largest)
        time.sleep(SAMPLE_S)
    wall = time.perf_counter() - start
    popen.returncode = os.waitstatus_to_exitcode(status)
    if popen.returncode != 0:
        raise RuntimeError(f"{cmd[:3]} failed with exit code {popen.returncode}")
    peak_single = max(peak_single, usage.ru_maxrss << 10)  # KiB on Linux
    return Measured(wall, peak_total / 2**20, peak_single / 2**20)
