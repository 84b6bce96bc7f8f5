"""One module per CLI subcommand: each has add_parser(subparsers) and run(args) -> int.

The modules are imported on demand (`load`): each pulls in DuckDB, polars and the
analyzers, so `stepscope --help` builds its list of commands from the one-line helps
below alone, and a command imports only its own module."""

from __future__ import annotations

import importlib
from types import ModuleType

# command -> its module in this package
COMMANDS: dict[str, str] = {
    "ingest": "ingest_cmd",
    "summary": "summary_cmd",
    "report": "report_cmd",
    "diff": "diff_cmd",
    "plan": "plan_cmd",
    "whatif": "whatif_cmd",
    "export": "export_cmd",
    "hang": "hang_cmd",
    "nightly": "nightly_cmd",
    "history": "history_cmd",
    "dashboard": "dashboard_cmd",
}

# command -> the one line `stepscope --help` shows (each module's HELP is this line)
COMMAND_HELP: dict[str, str] = {
    "ingest": "ingest the traces of every rank of a run into the database",
    "summary": "list the runs in the database with what each holds",
    "report": "where the step time went: attribution per rank and step, stragglers, pipeline",
    "diff": "why did MFU change between two runs: causes, setup, communication, advice",
    "plan": "rank TP/PP/DP/ZeRO layouts for a model and cluster by predicted MFU",
    "whatif": ("the step time if a rank, an op kind or a collective were faster, "
               "recomputed on the dependency graph of every step"),
    "export": ("one trace file of every rank on the aligned clock, with the breakdown, "
               "the critical path and the waits drawn on it (Perfetto, chrome://tracing)"),
    "hang": ("why a job hung: stuck collectives, missing and suspect ranks from "
             "Flight Recorder dumps"),
    "nightly": ("ingest tonight's traces of a job, diff against the last night, check "
                "thresholds"),
    "history": ("a job's nightly runs over time: status, step time, MFU, largest loss, "
                "change"),
    "dashboard": "browse runs and upload traces in a local web app",
}


def load(command: str) -> ModuleType:
    """The module of `command` (a key of COMMANDS), imported now if it was not."""
    return importlib.import_module(f"stepscope.commands.{COMMANDS[command]}")
