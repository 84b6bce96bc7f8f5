"""`stepscope diff RUN_A RUN_B [--db FILE] [--model FILE] [--format json|md|html] [--out FILE]`."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from analyzers.collectives import op_times
from analyzers.diff import build_diff
from analyzers.mfu import ModelSpec, load_spec
from analyzers.peaks import DTYPES
from analyzers.report import build_report
from dashboard.render_diff import diff_json, diff_markdown
from dashboard.render_html import diff_html
from ingest import DEFAULT_DB, UsageError
from ingest.sources import default_run_name
from stepscope import ingest
from stepscope.commands._targets import is_path
from stepscope.commands.ingest_cmd import add_step_marker
from stepscope.store import Store
from stepscope.validate import PEAK_TFLOPS, output_file, write_output

HELP = "why did MFU change between two runs: causes, setup, communication, advice"
RENDERERS = {"json": diff_json, "md": diff_markdown, "html": diff_html}


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
    p.add_argument("--format", choices=sorted(RENDERERS), default="md")
    p.add_argument("--out", type=output_file,
                   help="write the diff here instead of stdout (its folder must exist)")
    add_step_marker(p)


def _side(target: str, args: argparse.Namespace, spec: ModelSpec | None, tmp: Path,
          failures: list[str], other: str) -> tuple[dict[str, Any], dict[str, float]]:
    path = Path(target)
    if is_path(target, args.db):
        name = default_run_name([path])
        if name == other:
            name += "-b"
        db = tmp / f"{name}.duckdb"
        result = ingest([path], db=db, run=name, step_marker=args.step_marker)
        failures += [f"{f}: {p}" for f, p in result.failures]
    else:
        db, name = Path(args.db), target
    with Store(db) as store:
        store.require_run(name)
        report = build_report(store.con, name, spec, args.peak_tflops, args.dtype)
        return report, op_times(store.con, name)


def run(args: argparse.Namespace) -> int:
    spec = load_spec(args.model) if args.model else None
    if args.run_a == args.run_b:
        raise UsageError("RUN_A and RUN_B are the same; pass two runs or two trace paths")
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="stepscope-diff-") as tmp:
        a, ops_a = _side(args.run_a, args, spec, Path(tmp), failures, "")
        b, ops_b = _side(args.run_b, args, spec, Path(tmp), failures, a["run"]["name"])
    for line in failures:
        print(f"error: {line}", file=sys.stderr)
    text = RENDERERS[args.format](build_diff(a, b, ops_a, ops_b))
    write_output(text, args.out)
    return 3 if failures else 0
