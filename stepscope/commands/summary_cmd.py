"""`stepscope summary [RUN] [--db FILE] [--format text|md|json]`."""

from __future__ import annotations

import argparse

from stepscope.commands import COMMAND_HELP
from stepscope.dashboard.render.summary import summary_json, summary_markdown, summary_text
from stepscope.ingest import DEFAULT_DB
from stepscope.ingest.errors import terminal_safe
from stepscope.ingest.exit_codes import EXIT_OK
from stepscope.store import Store

HELP = COMMAND_HELP["summary"]
RENDERERS = {"text": summary_text, "md": summary_markdown, "json": summary_json}


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("summary", help=HELP, description=HELP + ".")
    p.add_argument("run", nargs="?", help="only this run")
    p.add_argument("--db", default=DEFAULT_DB, help=f"database file (default: {DEFAULT_DB})")
    p.add_argument("--format", choices=sorted(RENDERERS), default="text")


def run(args: argparse.Namespace) -> int:
    with Store(args.db) as store:
        summary = store.summary_records(None if args.run is None else [args.run])
    print(terminal_safe(RENDERERS[args.format](summary)))
    return EXIT_OK
