"""The processes a process started, and ending them (Linux /proc; elsewhere nothing).

A local Ray cluster's raylet starts agents of its own (ray::DashboardAgent,
ray::RuntimeEnvAgent) and idle workers; `ray.shutdown()` ends the raylet, but those
outlived it by up to a minute after a Ctrl-C or SIGTERM (they poll for their parent).
The executor (ingest/executors.py) notes Ray's processes below it (the ones started since
Ray's start whose command line names ray) before the shutdown and ends the ones still
alive after it, each by its process id and start time (a reused id is
not touched).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

PROC = Path("/proc")
GRACE_S = 2.0  # SIGTERM, then SIGKILL for what is still alive after this long
POLL_S = 0.05

Process = tuple[int, int]  # (pid, start time in clock ticks since boot)


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) of `pid`, None if it is gone (or not Linux)."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()  # after "pid (comm) "
    return int(fields[1]), int(fields[19])


def descendants(root: int) -> list[Process]:
    """Every living process below `root` (children, theirs, ...), with start times."""
    if not PROC.is_dir():
        return []
    parent_of: dict[int, tuple[int, int]] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit() and (st := _stat(int(entry.name))) is not None:
            parent_of[int(entry.name)] = st
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in parent_of.items():
        children.setdefault(ppid, []).append(pid)
    out: list[Process] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out.append((pid, parent_of[pid][1]))
        todo += children.get(pid, [])
    return out


def is_ray(pid: int) -> bool:
    """A process of Ray's (its command line names ray: gcs_server, raylet, the agents'
    scripts, ray::IDLE workers)."""
    try:
        return b"ray" in (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return False


def _alive(proc: Process) -> bool:
    st = _stat(proc[0])
    if st is None or st[1] != proc[1]:
        return False
    try:  # a zombie (ended, not yet reaped) is not alive
        return "Z" not in (PROC / str(proc[0]) / "stat").read_text().rsplit(")", 1)[1][:3]
    except OSError:
        return False


def end(processes: list[Process], grace_s: float = GRACE_S) -> list[Process]:
    """SIGTERM each of `processes` still alive, SIGKILL what is left after `grace_s`;
    the ones that had to be ended."""
    alive = [p for p in processes if _alive(p)]
    for pid, _ in alive:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    left = alive
    while left and time.monotonic() < deadline:
        time.sleep(POLL_S)
        left = [p for p in left if _alive(p)]
    for pid, _ in left:
        _signal(pid, signal.SIGKILL)
    return alive


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
