"""`stepscope dashboard [--db FILE] [--host H] [--port N] [--traces-root DIR]
[--max-upload-mb N]`: the Streamlit app (dashboard/app/main.py), headless, private."""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from stepscope.cli import check_db_name
from stepscope.commands import COMMAND_HELP
from stepscope.dashboard.app.config import (
    DEFAULT_MAX_UPLOAD_MB,
    ENV_DB,
    ENV_MAX_UPLOAD_MB,
    ENV_TRACES_ROOT,
    MAX_UPLOAD_MB,
    DashboardConfig,
    busy_retries,
)
from stepscope.ingest import DEFAULT_DB, UsageError
from stepscope.ingest.db import check_stepscope_file, lock_wait_s
from stepscope.ingest.errors import quote_name
from stepscope.ingest.exit_codes import EXIT_NOTHING, EXIT_OK
from stepscope.ingest.number_text import NumberTextError, setting, whole
from stepscope.validate import host_name
from stepscope.whole_numbers import plain_int

HELP = COMMAND_HELP["dashboard"]
APP = Path(__file__).parents[1] / "dashboard" / "app" / "main.py"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
STOP_GRACE_S = 10
# what stops the server: Ctrl-C, `kill`, the terminal closing
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

# Nothing phones home, errors show one line, the server runs without a browser.
STREAMLIT_OPTIONS = (
    "--server.headless=true",
    "--browser.gatherUsageStats=false",
    "--client.showErrorDetails=none",
    "--client.toolbarMode=minimal",
    "--server.fileWatcherType=none",
    "--server.runOnSave=false",
    "--global.developmentMode=false",
)


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("dashboard", help=HELP, description=HELP + " (Streamlit).")
    p.add_argument("--db", default=None,
                   help=f"database file to browse and ingest into (default: ${ENV_DB}, "
                        f"else {DEFAULT_DB}; created by the first upload)")
    p.add_argument("--host", default="127.0.0.1", type=host_name,
                   help="address to listen on (default: 127.0.0.1, this machine only)")
    p.add_argument("--port", type=plain_int, default=8501, help="port (default: 8501)")
    p.add_argument("--traces-root", type=Path,
                   help="a server folder whose trace folders can be ingested from the "
                        "Upload page (nothing outside it is reachable)")
    p.add_argument("--max-upload-mb", type=plain_int, default=None,
                   help=f"upload size limit in MB (default: ${ENV_MAX_UPLOAD_MB}, else "
                        f"{DEFAULT_MAX_UPLOAD_MB})")




def _from_environment(args: argparse.Namespace) -> None:
    """--db and --max-upload-mb not given: $STEPSCOPE_DB and $STEPSCOPE_MAX_UPLOAD_MB (an
    empty one is unset), checked like the options, the range too (its error names the
    variable); the command overwrote both for its server, so a bad value was ignored in
    silence and the server started. A $STEPSCOPE_DB is checked as --db is (a trailing
    '/', `:memory:`, a name too long): `x.duckdb/` served `x.duckdb`."""
    if args.db is None:
        args.db = os.environ.get(ENV_DB) or DEFAULT_DB
        check_db_name(args.db, f"${ENV_DB}")
    if args.max_upload_mb is None:
        text = setting(ENV_MAX_UPLOAD_MB) or str(DEFAULT_MAX_UPLOAD_MB)
        try:
            args.max_upload_mb = whole(text, 1, MAX_UPLOAD_MB)
        except NumberTextError as exc:
            raise UsageError(f"${ENV_MAX_UPLOAD_MB}: {exc.about(text)}; give a number of MB "
                             f"from 1 to {MAX_UPLOAD_MB:,}") from None


def config_from_args(args: argparse.Namespace) -> DashboardConfig:
    """Validate the options into the app's configuration (UsageError names the fix)."""
    lock_wait_s()  # its pages wait for writers: a bad $STEPSCOPE_LOCK_WAIT is refused here
    busy_retries()  # and how often they retry: likewise
    _from_environment(args)
    db = Path(args.db).resolve()
    if not db.parent.is_dir():
        raise UsageError(f"{args.db}: the folder {db.parent} does not exist")
    if db.exists() and not db.is_file():
        raise UsageError(f"--db {quote_name(args.db)}: not a database file (a folder or "
                         "another kind of file); name a .duckdb file")
    check_stepscope_file(args.db)  # a trace, SQLite, another application's DuckDB: refused
    root = args.traces_root
    if root is not None and not root.is_dir():
        raise UsageError(f"--traces-root {root}: not a folder")
    if args.max_upload_mb < 1:
        raise UsageError("--max-upload-mb must be at least 1")
    if args.max_upload_mb > MAX_UPLOAD_MB:
        raise UsageError(f"--max-upload-mb {args.max_upload_mb}: at most {MAX_UPLOAD_MB:,} "
                         "(1 TiB)")
    if not 1 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: choose a port between 1 and 65535")
    return DashboardConfig(db=db, traces_root=root.resolve() if root else None,
                           max_upload_mb=args.max_upload_mb)


def server_environment() -> dict[str, str]:
    """This process's environment less $STEPSCOPE_TRACES_ROOT: the server serves only the
    --traces-root the CLI checked (a folder, no links out), never one it inherited."""
    return {k: v for k, v in os.environ.items() if k != ENV_TRACES_ROOT}


def check_port_free(host: str, port: int) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            raise UsageError(f"cannot listen on {host}:{port} ({exc.strerror}); "
                             "pass another --port or --host") from None


def streamlit_command(config: DashboardConfig, host: str, port: int) -> list[str]:
    # -P: the current folder is not on the server's import path, so a json.py or
    # inspect.py there cannot replace the standard library's (the server died with code 4)
    return [sys.executable, "-P", "-m", "streamlit", "run", str(APP), *STREAMLIT_OPTIONS,
            f"--server.address={host}", f"--server.port={port}",
            f"--server.maxUploadSize={config.max_upload_mb}"]


def url(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
    return f"http://[{shown}]:{port}/" if ":" in shown else f"http://{shown}:{port}/"


def _warn_public(host: str) -> None:
    if host not in LOOPBACK:
        print(f"warning: listening on {host}: anyone who can reach this machine can read and "
              "upload traces; the dashboard has no authentication of its own. Put it "
              "behind an authenticating reverse proxy or Streamlit's OIDC login "
              "(docs/dashboard.md).", file=sys.stderr)


class _StopRequested(Exception):
    """A stop signal reached `stepscope dashboard`."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _request_stop(signum: int, frame: object) -> None:
    raise _StopRequested(signum)


def _die_with_parent() -> None:
    """In the server's process, before exec (Linux): SIGTERM when this command dies,
    even by SIGKILL, so no server is ever left serving on its own."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the signal handlers below still stop the server


def start_server(cmd: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """The Streamlit server in a process group of its own (so a terminal's Ctrl-C reaches
    only this command, which then stops the server's whole group)."""
    preexec = _die_with_parent if sys.platform.startswith("linux") else None
    return subprocess.Popen(cmd, env=env, start_new_session=True, preexec_fn=preexec)


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    """Stop the server and everything it started: SIGINT to its process group (Streamlit
    shuts down cleanly), then SIGTERM, then SIGKILL if it lingers."""
    for sig, wait in ((signal.SIGINT, STOP_GRACE_S), (signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        if proc.poll() is not None:
            break
        _signal_group(proc, sig)
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    _signal_group(proc, signal.SIGKILL)  # a child the server left behind, if any


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    check_port_free(args.host, args.port)
    _warn_public(args.host)
    env = {**server_environment(), **config.to_env()}
    # Ctrl-C, `kill PID` (SIGTERM), `kill -INT PID` and a closed terminal (SIGHUP) all stop
    # the server, whatever the shell set (a background job starts with SIGINT ignored)
    previous = {sig: signal.signal(sig, _request_stop) for sig in STOP_SIGNALS}
    proc = None
    try:
        proc = start_server(streamlit_command(config, args.host, args.port), env)
        # the name escaped: a database named with ESC or BEL reached the terminal raw
        print(f"stepscope dashboard: {url(args.host, args.port)}  (database "
              f"{quote_name(config.db)}; "
              "Ctrl-C to stop)", flush=True)
        code = proc.wait()
    except (_StopRequested, KeyboardInterrupt):
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)  # a second Ctrl-C cannot cut the stop short
        if proc is not None:
            stop_server(proc)
        print("stepscope dashboard stopped", file=sys.stderr)
        return EXIT_OK
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if proc is not None and proc.poll() is None:
            stop_server(proc)  # an error on the way out leaves no server behind
    if code != 0:
        print(f"error: the dashboard server exited with code {code}", file=sys.stderr)
        return EXIT_NOTHING
    return EXIT_OK
