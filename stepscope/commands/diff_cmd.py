"""`stepscope diff RUN_A RUN_B [--db FILE] [--model FILE] [--format json|md|html] [--out FILE]`."""

from __future__ import annotations

import argparse
from pathlib import Path

from stepscope.analyzers.context import ReportOptions
from stepscope.analyzers.flops.model_spec import load_spec
from stepscope.analyzers.flops.peaks import DTYPES
from stepscope.commands import COMMAND_HELP
from stepscope.commands._targets import print_remarks
from stepscope.commands.ingest_cmd import add_comm_kernels, add_step_marker
from stepscope.dashboard.render import formats
from stepscope.ingest import DEFAULT_DB
from stepscope.ingest.exit_codes import EXIT_OK, EXIT_PARTIAL
from stepscope.outputs import add_format_options, check_output, command_inputs, emit
from stepscope.targets import diff
from stepscope.validate import PEAK_TFLOPS

HELP = COMMAND_HELP["diff"]


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("diff", help=HELP, description=HELP + ".")
    p.add_argument("run_a", metavar="RUN_A", help="baseline: a run in --db, or a trace path")
    p.add_argument("run_b", metavar="RUN_B", help="the run to explain: a run or a trace path")
    p.add_argument("--db", default=DEFAULT_DB, help=f"database file (default: {DEFAULT_DB})")
    p.add_argument("--model", type=Path, help="model spec for both runs (see `report`)")
    p.add_argument("--peak-tflops", type=PEAK_TFLOPS,
                   help="peak TFLOP/s per GPU, in (0, 1e6] (overrides the table)")
    p.add_argument("--dtype", choices=DTYPES, default=None,
                   help="which peak of the table to use (default: inferred from the traces)")
    add_format_options(p, formats.DIFF, out_help="write the diff here instead of stdout "
                       "(its folder must exist)")
    add_step_marker(p)
    add_comm_kernels(p)


def run(args: argparse.Namespace) -> int:
    if args.out is not None:
        check_output(args.out, db=args.db, inputs=command_inputs(args))
    spec = load_spec(args.model) if args.model else None  # fails before any ingest
    options = ReportOptions(spec=spec, peak_tflops=args.peak_tflops, dtype=args.dtype)
    built = diff(args.run_a, args.run_b, args.db, options, step_marker=args.step_marker,
                   comm_kernels=args.comm_kernels)
    print_remarks(built)
    emit(args, formats.DIFF, built.diff)
    return EXIT_PARTIAL if built.failures else EXIT_OK
