"""`stepscope history JOB [--db FILE] [--format text|md|json] [--last N]`."""

from __future__ import annotations

import argparse

from stepscope.analyzers.nightly.history import jobs, read_history
from stepscope.commands import COMMAND_HELP
from stepscope.dashboard.render import formats
from stepscope.ingest import DEFAULT_DB, UsageError
from stepscope.ingest.exit_codes import EXIT_OK
from stepscope.outputs import add_format_options, emit
from stepscope.store import Store
from stepscope.validate import integer

HELP = COMMAND_HELP["history"]


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("history", help=HELP, description=HELP + ".")
    p.add_argument("job", metavar="JOB", help="the --job of `stepscope nightly`")
    p.add_argument("--db", default=DEFAULT_DB, help=f"database file (default: {DEFAULT_DB})")
    add_format_options(p, formats.HISTORY, default="text")
    p.add_argument("--last", type=integer(1, 1_000_000), metavar="N",
                   help="only the last N nights")


def run(args: argparse.Namespace) -> int:
    if args.last is not None and args.last < 1:
        raise UsageError(f"--last {args.last}: give a positive number of nights")
    with Store(args.db) as store:
        known = jobs(store.con)
        if args.job not in known:
            listing = ", ".join(known) if known else "none yet: run `stepscope nightly`"
            raise UsageError(f"{args.db}: no nightly history for job '{args.job}' "
                             f"(jobs: {listing})")
        frame = read_history(store.con, args.job, args.last)
    emit(args, formats.HISTORY, formats.JobHistory(args.job, frame))
    return EXIT_OK
