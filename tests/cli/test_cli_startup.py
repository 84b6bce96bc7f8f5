"""`stepscope --help` lists every command without importing any command's module (each
pulls in DuckDB, polars and the analyzers), and a command imports only its own: what a
user waits for on a `--help` or a typo is the standard library's start-up."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from conftest import SAMPLES

from stepscope.cli import build_parser
from stepscope.commands import COMMAND_HELP, COMMANDS

HEAVY = ("duckdb", "polars", "pyarrow", "stepscope.analyzers.report")
PROBE = """
import contextlib, io, json, sys
from stepscope.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
    try:
        code = main(sys.argv[1:])
    except SystemExit as stop:
        code = stop.code
print(json.dumps({"code": code, "help": out.getvalue(), "loaded": sorted(sys.modules)}))
"""


def _run(*argv: str) -> tuple[int, str, set[str]]:
    """(exit code, stdout, modules loaded) of `stepscope ARGV` in a fresh interpreter."""
    out = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True,
                         text=True, check=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    return int(result["code"]), str(result["help"]), set(result["loaded"])


def _command_modules(loaded: set[str]) -> set[str]:
    return {m for m in loaded if m.startswith("stepscope.commands.")}


def test_help_lists_every_command_and_loads_none() -> None:
    code, shown, loaded = _run("--help")
    assert code == 0
    assert all(name in shown for name in COMMANDS)
    assert "ingest the traces of every rank of a run into the database" in shown
    assert [m for m in HEAVY if m in loaded] == []
    assert _command_modules(loaded) == set()


def test_an_unknown_command_is_a_usage_error_that_loads_nothing_heavy() -> None:
    code, _, loaded = _run("no-such-command")
    assert code == 2
    assert [m for m in HEAVY if m in loaded] == []


def test_a_command_loads_its_own_module_only() -> None:
    code, _, loaded = _run("summary", "--help")
    assert code == 0
    assert _command_modules(loaded) == {"stepscope.commands.summary_cmd"}


def test_the_listed_help_is_each_command_modules_own() -> None:
    (action,) = [a for a in build_parser()._actions
                 if isinstance(a, argparse._SubParsersAction)]
    listed = {choice.dest: choice.help for choice in action._choices_actions}
    assert listed == COMMAND_HELP


def test_an_ingest_imports_no_polars(tmp_path: Path) -> None:
    """The ingest's workers start once its module is loaded, and polars (0.2 s of
    imports) would delay them; the summary it prints at the end needs no frame either."""
    code, shown, loaded = _run("ingest", str(SAMPLES / "ddp"), "--db",
                               str(tmp_path / "t.duckdb"), "--run", "ddp")
    assert code == 0
    assert shown.splitlines()[-1].startswith("ddp ")  # the summary's row
    assert [m for m in ("polars", "pyarrow") if m in loaded] == []
