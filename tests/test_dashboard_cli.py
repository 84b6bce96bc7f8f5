"""`stepscope dashboard`: option checks (exit code 2, one line), the warning on a public
address, the printed URL, and a clean stop on Ctrl-C."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from dashboard_helpers import REPO

from stepscope.cli import main
from stepscope.commands.dashboard_cmd import STREAMLIT_OPTIONS, streamlit_command
from stepscope.dashboard.config import DashboardConfig


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


@pytest.mark.interrupt
def test_public_host_warns_and_ctrl_c_stops_cleanly(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "stepscope", "dashboard", "--host", "0.0.0.0", "--port",
         str(port), "--db", str(tmp_path / "db.duckdb")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        cwd=REPO)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health",
                                            timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                assert proc.poll() is None, proc.communicate()
                time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert f"stepscope dashboard: http://127.0.0.1:{port}/" in out
    assert "no authentication of its own" in err
    assert "stopped" in err
