"""`stepscope whatif RUN_OR_PATH (--rank R | --op PATTERN | --collective NAME[:GROUP])
[--speedup K|median] [--db FILE] [--format text|md|json]`."""

from __future__ import annotations

import argparse

from stepscope.analyzers.context import run_context
from stepscope.analyzers.critical_path.analysis import what_if
from stepscope.analyzers.critical_path.whatif import WhatIf
from stepscope.commands import COMMAND_HELP
from stepscope.commands._targets import print_remarks
from stepscope.dashboard.render import formats
from stepscope.ingest import DEFAULT_DB
from stepscope.ingest.errors import UsageError
from stepscope.ingest.exit_codes import EXIT_OK, EXIT_PARTIAL
from stepscope.ingest.number_text import NumberTextError, list_items, whole
from stepscope.ingest.ranksets import MAX_RANK
from stepscope.outputs import add_format_options, emit
from stepscope.targets import Built, open_target
from stepscope.validate import real

HELP = COMMAND_HELP["whatif"]
FACTOR = real(0.0, 1e6)


def _speedup(text: str) -> float | None:
    """A factor in (0, 1e6], or `median` (None)."""
    return None if text.strip().lower() == "median" else FACTOR(text)


def _ranks(text: str) -> tuple[int, ...]:
    try:  # ASCII digits (ingest.number_text); spaces only around a comma
        return tuple(whole(x, 0, MAX_RANK) for x in list_items(text))
    except NumberTextError:
        raise argparse.ArgumentTypeError(f"not a rank or comma-separated ranks: {text!r}"
                                         ) from None


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("whatif", help=HELP, description=HELP + " (docs/critical_path.md).")
    p.add_argument("target", metavar="RUN_OR_PATH",
                   help="a run in the database, or a trace folder / archive / file to "
                        "ingest on the fly into a temporary database")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--rank", type=_ranks, metavar="R[,R...]",
                      help="these ranks' GPU compute kernels")
    what.add_argument("--op", metavar="PATTERN",
                      help="kernels whose name, or launching CPU op's name, contains PATTERN")
    what.add_argument("--collective", metavar="NAME[:GROUP]",
                      help="a collective (all_reduce, send, ...), optionally only on process "
                           "groups whose name or description contains GROUP")
    p.add_argument("--speedup", type=_speedup, default=None, metavar="K|median",
                   help="K times faster (durations / K; K < 1 is a slowdown: 0.5 is 2x "
                        "slower), or (--rank) median: each kernel at the median rank's "
                        "duration for it (the default for --rank)")
    p.add_argument("--db", default=DEFAULT_DB, help=f"database file (default: {DEFAULT_DB})")
    add_format_options(p, formats.WHATIF, default="text")


def run(args: argparse.Namespace) -> int:
    if args.rank is None and args.speedup is None:
        raise UsageError("--speedup K is needed with --op and --collective")
    spec = WhatIf(ranks=args.rank or (), op=args.op, collective=args.collective,
                  speedup=args.speedup)
    with open_target(args.target, args.db) as t:
        result = what_if(run_context(t.store.con, t.run), spec)
        print_remarks(Built(failures=t.failures, notes=t.notes))
    emit(args, formats.WHATIF, result)
    return EXIT_PARTIAL if t.failures else EXIT_OK
