"""`stepscope hang RUN_OR_PATH [--db FILE] [--format md|json] [--out FILE]`."""

from __future__ import annotations

import argparse
from pathlib import Path

from stepscope import ingest_run
from stepscope.analyzers.hang import NoFlightRecorderError, build_hang_report
from stepscope.analyzers.results import HangReport
from stepscope.cli import say
from stepscope.commands import COMMAND_HELP
from stepscope.dashboard.render import formats
from stepscope.ingest import DEFAULT_DB, UsageError
from stepscope.ingest.exit_codes import EXIT_OK
from stepscope.ingest.sources import default_run_name, path_exists
from stepscope.outputs import add_format_options, check_output, command_inputs, emit
from stepscope.scratch_db import scratch_database
from stepscope.store import Store

HELP = COMMAND_HELP["hang"]


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("hang", help=HELP, description=HELP + ".")
    p.add_argument("target", metavar="RUN_OR_PATH",
                   help="a run in the database, or a folder / files of Flight Recorder dumps "
                        "(with or without Kineto traces) to read on the fly")
    p.add_argument("--db", default=DEFAULT_DB, help=f"database file (default: {DEFAULT_DB})")
    add_format_options(p, formats.HANG, out_help="write the report here instead of stdout "
                       "(its folder must exist)")


def _analyse(store: Store, run: str) -> HangReport:
    try:
        return build_hang_report(store.con, run)
    except NoFlightRecorderError:
        raise UsageError(
            f"run '{run}' has no Flight Recorder dump; dump them with "
            "TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 "
            "TORCH_NCCL_DEBUG_INFO_TEMP_FILE=<folder>/_dump_ and pass that folder") from None


def run(args: argparse.Namespace) -> int:
    if args.out is not None:
        check_output(args.out, db=args.db, inputs=command_inputs(args))
    target = Path(args.target)
    if path_exists(target):
        with scratch_database(target, "hang.duckdb") as scratch:
            result = ingest_run([target], db=scratch.path)
            scratch.ingested = True
            for file, problem in result.failures:
                say(f"error: {file}: {problem}")
            with Store(scratch.path) as store:
                report = _analyse(store, default_run_name([target]))
        emit(args, formats.HANG, report)
        return result.exit_code
    with Store(args.db) as store:
        store.require_run(args.target)
        report = _analyse(store, args.target)
    emit(args, formats.HANG, report)
    return EXIT_OK
