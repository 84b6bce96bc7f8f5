"""Issue 43, Ray: the local cluster started for `--executor ray` listens on the loopback
only. Ray 2.60 took the machine's outward address as its node IP and bound its GCS,
raylet (node manager, object manager) and every worker's gRPC server to `::`, the
autoscaler monitor's metrics port to 0.0.0.0 and the runtime-env agent to the outward
address; the executor now starts the node on 127.0.0.1 (docs/scale.md, "Ray").

The sockets are read from /proc: each process's socket inodes matched against the
listening TCP sockets and bound UDP sockets of /proc/net/{tcp,tcp6,udp,udp6}, sampled
while the ingest runs."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import RAY_START_TRIES, kineto_trace, write_trace

from stepscope.ingest import process_tree
from stepscope.ingest.errors import UsageError

pytest.importorskip("ray")
pytestmark = [pytest.mark.slow, pytest.mark.ray]  # a Ray start: 10-40 s on a loaded machine

STEPSCOPE = [sys.executable, "-P", "-m", "stepscope"]
LISTEN = {"tcp": "0A", "udp": "07"}  # TCP_LISTEN; an unconnected (bound) UDP socket
SAMPLE_S = 0.2
# Ray's own start fails this way on a loaded machine (its raylet waits ~15 s for an agent,
# its driver 30 s for the raylet), with or without the executor's loopback: one more try,
# as conftest.start_local_ray does
RAY_SLOW_START = "timed out during startup"

Listener = tuple[str, str, int, str]  # (protocol, address, port, the owner's command)


def _address(hex_address: str, v6: bool) -> tuple[str, int]:
    """'0100007F:1F90' -> ('127.0.0.1', 8080); IPv6 in /proc is four host-order words."""
    host, port = hex_address.split(":")
    raw = bytes.fromhex(host)
    if v6:
        raw = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
        return socket.inet_ntop(socket.AF_INET6, raw), int(port, 16)
    return socket.inet_ntop(socket.AF_INET, raw[::-1]), int(port, 16)


def listening_sockets() -> dict[str, tuple[str, str, int]]:
    """Socket inode -> (protocol, address, port) for every listening socket here."""
    out = {}
    for table, proto, v6 in (("tcp", "tcp", False), ("tcp6", "tcp", True),
                             ("udp", "udp", False), ("udp6", "udp", True)):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == LISTEN[proto]:
                    out[fields[9]] = (proto, *_address(fields[1], v6))
    return out


def owned_listeners(pids: list[int]) -> set[Listener]:
    """The listening sockets that these processes hold open, with their commands."""
    table = listening_sockets()
    found = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        for fd in fds:
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:[") and target[8:-1] in table:
                    found.add((*table[target[8:-1]], command.decode(errors="replace")[:120]))
    return found


def is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # ::ffff:127.0.0.1, a dual-stack socket bound to the loopback
    return ip.is_loopback


def exposed(listeners: set[Listener]) -> list[Listener]:
    return sorted(item for item in listeners if not is_loopback(item[1]))


def assert_cluster_seen(listeners: set[Listener]) -> None:
    """The sampling saw the cluster's servers (so an empty `exposed` means something)."""
    commands = " ".join(item[3] for item in listeners)
    assert "gcs_server" in commands and "raylet" in commands, sorted(listeners)


def four_ranks(folder: Path) -> Path:
    for r in range(4):
        write_trace(folder / f"rank{r}.json.gz", kineto_trace(rank=r, world_size=4))
    return folder


def test_a_ray_ingest_listens_on_the_loopback_only(tmp_path: Path) -> None:
    """`stepscope ingest DIR --executor ray`: no socket of its process tree listens on a
    non-loopback address at any sample (before: GCS, raylet, the driver and the workers
    on `::`, the monitor's 44217 on 0.0.0.0, the runtime-env agent on the outward IP)."""
    folder = four_ranks(tmp_path / "t")
    seen: set[Listener] = set()  # of every try
    for attempt in range(RAY_START_TRIES):
        rc, err, listeners = sampled_ingest(folder, tmp_path / f"db{attempt}.duckdb")
        seen |= listeners
        if RAY_SLOW_START not in err:
            break
    assert rc == 0 and err == "", (rc, err)
    assert_cluster_seen(seen)
    assert exposed(seen) == []


def sampled_ingest(folder: Path, db: Path) -> tuple[int, str, set[Listener]]:
    """Run the CLI's Ray ingest, sampling its process tree's listeners until it ends."""
    driver = subprocess.Popen([*STEPSCOPE, "ingest", str(folder),
                               "--db", str(db), "--executor", "ray", "--quiet"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)
    seen: set[Listener] = set()
    try:
        deadline = time.monotonic() + 240
        while driver.poll() is None and time.monotonic() < deadline:
            tree = [driver.pid, *(pid for pid, _ in process_tree.descendants(driver.pid))]
            seen |= owned_listeners(tree)
            time.sleep(SAMPLE_S)
        _, err = driver.communicate(timeout=60)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    return driver.returncode, err, seen


def test_ray_imported_before_the_ingest_still_binds_the_loopback(tmp_path: Path) -> None:
    """From Python with `ray` imported first (Ray reads its node-IP switch at import):
    the local cluster `ingest_run(executor="ray")` starts is on the loopback too, and
    Ray's switch is given back afterwards."""
    import ray
    from ray._private import ray_constants

    import stepscope

    if ray.is_initialized():
        ray.shutdown()
    switch = ray_constants.ENABLE_RAY_CLUSTER
    env = os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")
    before = set(process_tree.descendants(os.getpid()))
    seen: set[Listener] = set()
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            new = [pid for pid, start in process_tree.descendants(os.getpid())
                   if (pid, start) not in before]
            seen.update(owned_listeners([os.getpid(), *new]))
            time.sleep(SAMPLE_S)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    folder = four_ranks(tmp_path / "t")
    try:
        for attempt in range(RAY_START_TRIES):
            try:
                result = stepscope.ingest_run([folder], db=tmp_path / f"r{attempt}.duckdb",
                                              run="t", executor="ray")
                break
            except UsageError as exc:
                if RAY_SLOW_START not in str(exc) or attempt + 1 == RAY_START_TRIES:
                    raise
    finally:
        done.set()
        sampler.join()
        if ray.is_initialized():
            ray.shutdown()
    assert sorted(result.ranks) == [0, 1, 2, 3] and result.status == "complete", result
    assert_cluster_seen(seen)
    assert exposed(seen) == []
    assert ray_constants.ENABLE_RAY_CLUSTER == switch
    assert os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER") == env
