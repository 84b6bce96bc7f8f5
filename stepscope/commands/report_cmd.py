"""`stepscope report RUN_OR_PATH [--db FILE] [--format json|md|html] [--out FILE]`."""

from __future__ import annotations

import argparse
from pathlib import Path

from stepscope.analyzers.context import ReportOptions
from stepscope.analyzers.flops.model_spec import load_spec
from stepscope.analyzers.flops.peaks import DTYPES
from stepscope.cli import say
from stepscope.commands import COMMAND_HELP
from stepscope.commands._targets import print_remarks
from stepscope.commands.ingest_cmd import add_comm_kernels, add_step_marker
from stepscope.dashboard.render import formats
from stepscope.ingest import DEFAULT_DB
from stepscope.ingest.exit_codes import EXIT_OK, EXIT_PARTIAL
from stepscope.outputs import add_format_options, check_output, command_inputs, emit
from stepscope.targets import _both_note as both_note  # its own line says it
from stepscope.targets import is_path, report
from stepscope.validate import PEAK_TFLOPS

HELP = COMMAND_HELP["report"]


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("report", help=HELP, description=HELP + ".")
    p.add_argument("target", metavar="RUN_OR_PATH",
                   help="a run in the database, or a trace folder / archive / file to "
                        "ingest on the fly into a temporary database")
    p.add_argument("--db", default=None, help=f"database file (default: {DEFAULT_DB}); "
                   "unused with a trace path, which is ingested into a temporary database")
    add_format_options(p, formats.REPORT, out_help="write the report here instead of stdout "
                       "(its folder must exist)")
    p.add_argument("--model", type=Path, help="model spec (JSON or YAML): n_params, n_layers, "
                   "hidden, seq_len, global_batch_tokens [, n_active_params, attention, "
                   "convention, vocab]; default: model.json beside the run's traces, else "
                   "FLOPs come from the traces' shapes")
    p.add_argument("--peak-tflops", type=PEAK_TFLOPS,
                   help="peak TFLOP/s per GPU, in (0, 1e6] (overrides the table)")
    p.add_argument("--dtype", choices=DTYPES, default=None,
                   help="which peak of the table to use (default: inferred from the "
                        "matmuls' input types, else kernel names, else bf16)")
    add_step_marker(p)
    add_comm_kernels(p)


def run(args: argparse.Namespace) -> int:
    db = args.db if args.db is not None else DEFAULT_DB
    if args.db is not None and is_path(args.target) and not both_note(args.target, args.db):
        say(f"note: --db {args.db} is unused: {args.target} is a trace path, ingested into a "
            f"temporary database; to keep the run there: stepscope ingest {args.target} "
            f"--db {args.db}, then stepscope report RUN --db {args.db}")
    if args.out is not None:
        check_output(args.out, db=db, inputs=command_inputs(args))
    spec = load_spec(args.model) if args.model else None  # fails before any ingest
    options = ReportOptions(spec=spec, peak_tflops=args.peak_tflops, dtype=args.dtype)
    built = report(args.target, db, options, step_marker=args.step_marker,
                   comm_kernels=args.comm_kernels)
    print_remarks(built)
    emit(args, formats.REPORT, built.report)
    return EXIT_PARTIAL if built.failures else EXIT_OK
