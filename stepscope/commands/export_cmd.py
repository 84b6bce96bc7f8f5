"""`stepscope export RUN_OR_PATH --format chrome-json [--steps 2-3] [--ranks 0-7]
--out FILE [--db FILE]`: one trace-event file of every chosen rank on the aligned clock
(docs/timeline.md, "Export")."""

from __future__ import annotations

import argparse

from stepscope.analyzers.critical_path.steps_only import step_paths
from stepscope.analyzers.export import ExportSize, export_chrome, present
from stepscope.analyzers.export_perfetto import available
from stepscope.cli import say
from stepscope.commands import COMMAND_HELP
from stepscope.commands._targets import print_remarks
from stepscope.ingest import DEFAULT_DB
from stepscope.ingest.errors import UsageError
from stepscope.ingest.exit_codes import EXIT_OK, EXIT_PARTIAL
from stepscope.ingest.ranksets import RankSet, parse_ranks
from stepscope.outputs import check_output, command_inputs, staged_file
from stepscope.targets import Built, open_target
from stepscope.validate import output_file

HELP = COMMAND_HELP["export"]
FORMATS = ("chrome-json", "perfetto")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("export", help=HELP, description=HELP + ".")
    p.add_argument("target", metavar="RUN_OR_PATH",
                   help="a run in the database, or a trace folder / archive / file to "
                        "ingest on the fly into a temporary database")
    p.add_argument("--db", default=DEFAULT_DB, help=f"database file (default: {DEFAULT_DB})")
    p.add_argument("--format", choices=FORMATS, default="chrome-json",
                   help="chrome-json: Chrome trace-event JSON (Perfetto UI, chrome://tracing); "
                        "perfetto: the same events as Perfetto's protobuf trace (needs "
                        "the perfetto package: pip install 'stepscope[perfetto]'; "
                        "default: chrome-json)")
    p.add_argument("--steps", help="steps to export, like 2-3,5 (default: all)")
    p.add_argument("--ranks", help="ranks to export, like 0-7,12 (default: all)")
    p.add_argument("--out", type=output_file, required=True,
                   help="the file to write (its folder must exist)")


def _listed(spec: str | None, what: str) -> RankSet | None:
    """'2-3,5' -> its ranges (None: all); the message names the option and a step as a
    step."""
    if spec is None:
        return None
    try:
        return parse_ranks(spec)
    except UsageError as exc:
        message = str(exc).replace("--ranks", f"--{what}")
        if what == "steps":
            message = message.replace("': rank ", "': step ")
        raise UsageError(message) from None


def _chosen(wanted: RankSet | None, values: list[int]) -> list[int] | None:
    """The run's `values` that `wanted` names (None: all). Matching the
    run's values, not expanding the ranges, keeps `--steps 0-2000000000` small (its
    expansion ran 33 s into a MemoryError)."""
    return None if wanted is None else [v for v in values if v in wanted]


def _check_some(spec: str | None, chosen: list[int] | None, present: list[int],
                run: str) -> None:
    """`--steps` that names none of the run's steps is a usage error (it wrote an export
    with no step in it, exit 0), as `--ranks` naming none of its ranks is."""
    if spec is not None and not chosen:
        have = f"{present[0]} to {present[-1]}" if present else "none"
        raise UsageError(f"--steps {spec!r}: none of these steps is in run {run!r} "
                         f"(its steps: {have})")


def announce(size: ExportSize) -> None:
    parts = ", ".join(f"{name} {n:,}" for name, n in size.events.items() if n)
    say(f"export: {size.total_events:,} events ({parts}), "
        f"{size.total_bytes / 1e6:,.1f} MB")


def run(args: argparse.Namespace) -> int:
    check_output(args.out, db=args.db, inputs=command_inputs(args))
    wanted_ranks, wanted_steps = _listed(args.ranks, "ranks"), _listed(args.steps, "steps")
    if args.format == "perfetto" and not available():
        raise UsageError("--format perfetto needs the perfetto package: "
                         "pip install 'stepscope[perfetto]'")
    with open_target(args.target, args.db) as t:
        print_remarks(Built(failures=t.failures, notes=t.notes))
        run_ranks, run_steps = present(t.store.con, t.run)
        ranks, steps = _chosen(wanted_ranks, run_ranks), _chosen(wanted_steps, run_steps)
        _check_some(args.steps, steps, run_steps, t.run)
        path = step_paths(t.store.con, t.run, steps)
        with staged_file(args.out) as destination:
            export_chrome(t.store.con, t.run, destination, ranks=ranks, steps=steps,
                          path=path, announce=announce, fmt=args.format)
        say(f"wrote {args.out}")
        return EXIT_PARTIAL if t.failures else EXIT_OK
