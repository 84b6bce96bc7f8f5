"""`stepscope nightly PATH... --job NAME [...]`: one command for cron and CI.

Exit codes: 0 every check passes; 4 a check failed (one stderr line per failed check with
its value and threshold); 3 partial ingest; 2 usage error; 1 nothing ingested.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from stepscope.analyzers.flops.model_spec import load_spec
from stepscope.analyzers.flops.peaks import DTYPES
from stepscope.analyzers.nightly.checks import check_line, metric_catalog, parse_threshold
from stepscope.cli import say
from stepscope.commands import COMMAND_HELP
from stepscope.commands.ingest_cmd import add_comm_kernels
from stepscope.ingest import DEFAULT_DB
from stepscope.ingest.comm_kernels import load_user_table
from stepscope.ingest.errors import quote_name
from stepscope.nightly import NightlyOptions, run_nightly
from stepscope.validate import JOBS, PEAK_TFLOPS, integer

HELP = COMMAND_HELP["nightly"]
EPILOG = ("metrics for --fail-if: " + ", ".join(metric_catalog()) + ". Exit codes: 0 pass, "
          "4 a check failed, 3 partial ingest, 2 usage error, 1 nothing ingested.")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("nightly", help=HELP, description=HELP + ".", epilog=EPILOG)
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="tonight's trace files, directories or archives (all ranks)")
    p.add_argument("--job", required=True, help="the job's name: groups its nights in history")
    p.add_argument("--db", default=DEFAULT_DB, help=f"database file (default: {DEFAULT_DB})")
    p.add_argument("--run", help="run name, one folder name like --job (default: "
                                 "JOB-<traces' start, UTC>-<fingerprint of "
                                 "their content>, stable when the same night is re-run, "
                                 "which then replaces it)")
    p.add_argument("--out-dir", type=Path,
                   help="where report.json/.md/.html go (default: ./stepscope-nightly/RUN/)")
    p.add_argument("--baseline", default="previous",
                   help="'previous' (the job's latest earlier night, default), 'none', or a "
                        "run in the database")
    p.add_argument("--fail-if", action="append", default=[], metavar="EXPR",
                   help="'<metric> <op> <number>', op one of < <= > >=; repeatable, e.g. "
                        "'diff.mfu_delta_points < -3' (metrics listed below)")
    p.add_argument("--allow-missing", action="store_true",
                   help="a metric that cannot be computed (no baseline, no MFU) passes")
    p.add_argument("--keep", type=integer(1, 1_000_000), metavar="N",
                   help="keep only the job's last N runs' traces in the database "
                        "(history rows stay)")
    p.add_argument("--model", type=Path, help="model spec (see `stepscope report --help`)")
    p.add_argument("--peak-tflops", type=PEAK_TFLOPS,
                   help="peak TFLOP/s per GPU, in (0, 1e6] (overrides the table)")
    p.add_argument("--dtype", choices=DTYPES, default=None,
                   help="which peak of the table to use (default: inferred from the traces)")
    p.add_argument("--jobs", type=JOBS, default=None,
                   help="files parsed in parallel, 1 to 1024 (default: $STEPSCOPE_JOBS, else "
                        "the number of CPUs)")
    p.add_argument("--quiet", action="store_true", help="print failures only")
    add_comm_kernels(p)


def run(args: argparse.Namespace) -> int:
    thresholds = [parse_threshold(e) for e in args.fail_if]  # usage errors before any work
    spec = load_spec(args.model) if args.model else None
    if args.comm_kernels:
        load_user_table(args.comm_kernels)  # a bad file is a usage error before any work
    outcome = run_nightly(NightlyOptions(
        paths=args.paths, job=args.job, db=args.db, run=args.run, out_dir=args.out_dir,
        baseline=args.baseline, thresholds=thresholds, allow_missing=args.allow_missing,
        spec=spec, peak_tflops=args.peak_tflops, dtype=args.dtype, keep=args.keep,
        jobs=args.jobs, comm_kernels=args.comm_kernels,
        read_files=[args.model] if args.model else []))
    night = outcome.night
    info = night.nightly
    for failed in info.failed_files:
        say(f"error: {failed.file}: {failed.error}")
    for warning in outcome.warnings:
        say(f"warning: {warning}")
    if outcome.replaced:
        why = ("--run names a run already there" if args.run else
               "the same traces were ingested before (a re-run of that night)")
        say(f"note: replaced run '{info.run}' in {args.db}: {why}; its history row is "
            "replaced too")
    for check in night.failed_checks:
        say(f"check failed: {check_line(check)}")
    if not args.quiet:
        base = night.baseline.run if night.baseline else "none"
        # the folder escaped as every message shows a name: an --out-dir named with
        # ESC or BEL reached the terminal raw on stdout (stderr's lines were escaped)
        print(f"nightly {info.verdict}: job '{info.job}' run '{info.run}' "
              f"(baseline: {base}); {len(night.checks) - len(night.failed_checks)}/"
              f"{len(night.checks)} check(s) pass; reports in "
              f"{quote_name(f'{outcome.out_dir}/')}")
        if info.pruned_runs:
            print(f"pruned {len(info.pruned_runs)} old run(s): {', '.join(info.pruned_runs)}")
    return info.exit_code
