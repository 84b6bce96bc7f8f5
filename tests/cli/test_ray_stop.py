"""Issue 43, Ray: a local cluster started for `--executor ray` ends with the ingest. After a
Ctrl-C or SIGTERM, ray.shutdown() ended the raylet but its agents (ray::DashboardAgent,
ray::RuntimeEnvAgent) and idle workers lived on for about a minute; now every Ray process
below the ingest is gone when it exits, and the exit code and one line are the usual
ones (130 / 143, "… was not ingested; … is unchanged")."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import kineto_trace, write_trace

from stepscope.ingest import process_tree

pytest.importorskip("ray")
pytestmark = pytest.mark.slow  # a Ray start: 10-30 s on a loaded machine

STEPSCOPE = [sys.executable, "-P", "-m", "stepscope"]


def ray_processes(root: int) -> list[process_tree.Process]:
    return [p for p in process_tree.descendants(root) if process_tree.is_ray(p[0])]


def cmdlines(root: int) -> list[bytes]:
    out = []
    for pid, _ in ray_processes(root):
        with contextlib.suppress(OSError):
            out.append((Path("/proc") / str(pid) / "cmdline").read_bytes())
    return out


def up(names: list[bytes]) -> bool:
    """The raylet runs and has started an agent (agent.py, or ray::...Agent once named)."""
    return any(b"raylet/raylet" in n for n in names) and any(
        b"Agent" in n or b"/agent.py" in n or b"agent/main.py" in n for n in names)


def living(procs: list[process_tree.Process]) -> list[int]:
    out = []
    for pid, start in procs:
        try:
            stat = (Path("/proc") / str(pid) / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if int(fields[19]) == start and fields[0] != "Z":
            out.append(pid)
    return out


@pytest.mark.parametrize(("sig", "rc", "how"), [(signal.SIGINT, 130, "interrupted"),
                                                (signal.SIGTERM, 143,
                                                 "interrupted by SIGTERM")])
def test_no_ray_process_outlives_a_stopped_ingest(tmp_path: Path, sig: signal.Signals,
                                                  rc: int, how: str) -> None:
    for r in range(64):
        write_trace(tmp_path / "t" / f"rank{r}.json.gz", kineto_trace(rank=r, world_size=64))
    db = tmp_path / "db.duckdb"
    driver = subprocess.Popen([*STEPSCOPE, "ingest", str(tmp_path / "t"), "--db", str(db),
                               "--executor", "ray", "--quiet"], stderr=subprocess.PIPE,
                              text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and driver.poll() is None and not up(
                cmdlines(driver.pid)):
            time.sleep(0.2)  # until the raylet has started its agents
        family = ray_processes(driver.pid)
        names = cmdlines(driver.pid)
        assert driver.poll() is None, "the ingest ended before it could be stopped"
        driver.send_signal(sig)
        _, err = driver.communicate(timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    # the cluster was up: its raylet and the agents the raylet starts
    assert up(names), names
    lines = err.splitlines()
    assert driver.returncode == rc and lines == [
        f"{how}: run 't' was not ingested; {db} is unchanged"], (driver.returncode, lines)
    time.sleep(1.0)  # what the kernel still tears down
    assert living(family) == [], "Ray processes outlived the ingest"
