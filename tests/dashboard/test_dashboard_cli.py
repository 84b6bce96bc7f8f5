"""`stepscope dashboard`: option checks (exit code 2, one line), the warning on a public
address, the printed URL, and a clean stop of the whole process tree on SIGINT, SIGTERM
and SIGHUP."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from dashboard_helpers import REPO

from stepscope.cli import main
from stepscope.commands.dashboard_cmd import STREAMLIT_OPTIONS, streamlit_command
from stepscope.dashboard.app.config import DashboardConfig


def test_bad_options_exit_2(tmp_path, capsys):
    assert main(["dashboard", "--traces-root", str(tmp_path / "nope")]) == 2
    assert "--traces-root" in capsys.readouterr().err
    assert main(["dashboard", "--db", str(tmp_path / "no" / "db.duckdb")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["dashboard", "--max-upload-mb", "0"]) == 2
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert main(["dashboard", "--port", str(port), "--db", str(tmp_path / "d")]) == 2
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err


def test_private_by_default(tmp_path):
    cmd = streamlit_command(DashboardConfig(tmp_path / "d", None, 5), "127.0.0.1", 9999)
    assert "--browser.gatherUsageStats=false" in cmd
    assert "--client.showErrorDetails=none" in cmd
    assert "--server.address=127.0.0.1" in cmd and "--server.maxUploadSize=5" in cmd
    assert set(STREAMLIT_OPTIONS) <= set(cmd)


def children(pid: int) -> set[int]:
    """The processes whose parent is `pid` (Linux /proc)."""
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.add(int(stat.parent.name))
    return out


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# Ctrl-C in a terminal (SIGINT to the foreground group), `kill` (SIGTERM to the command
# only), the terminal closing (SIGHUP), and SIGINT to the command alone
STOPS = [(signal.SIGINT, "group"), (signal.SIGTERM, "parent"), (signal.SIGHUP, "parent"),
         (signal.SIGINT, "parent")]


@pytest.mark.interrupt
@pytest.mark.parametrize(("sig", "target"), STOPS, ids=[f"{s.name}-{t}" for s, t in STOPS])
def test_a_stop_signal_stops_the_whole_server(tmp_path, sig, target):
    """The command exits 0, says so, its Streamlit child is gone and the port is free."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "stepscope", "dashboard", "--host", "0.0.0.0", "--port",
         str(port), "--db", str(tmp_path / "db.duckdb")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        cwd=REPO)
    try:
        wait_healthy(proc, port)
        kids = children(proc.pid)
        assert kids, "the dashboard runs Streamlit in a child process"
        if target == "group":
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert f"stepscope dashboard: http://127.0.0.1:{port}/" in out
    assert "no authentication of its own" in err
    assert "stopped" in err and "Traceback" not in err, err
    assert not [k for k in kids if alive(k)], "Streamlit outlived the command"
    with socket.socket() as s:  # nothing serves on the port any more
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))


def wait_healthy(proc: subprocess.Popen[str], port: int) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health",
                                        timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.5)
    raise AssertionError("the dashboard did not answer within 120 s")
