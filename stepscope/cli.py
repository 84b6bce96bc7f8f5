"""The `stepscope` command line: thin wrappers over the library, one module per subcommand.

Exit codes (stable, for scripts):
  0  success
  1  nothing done (no trace could be ingested; --strict failure; unexpected error)
  2  usage error (bad arguments, missing paths, unknown run, locked database)
  3  partial ingest (some files failed; the others are in the database)
  4  `nightly`: at least one --fail-if check failed (stderr names each, value and threshold)
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ingest import NothingIngestedError, StepscopeError, UsageError
from stepscope import __version__
from stepscope.commands import (
    dashboard_cmd,
    diff_cmd,
    hang_cmd,
    history_cmd,
    ingest_cmd,
    nightly_cmd,
    plan_cmd,
    report_cmd,
    summary_cmd,
)

EXIT_OK, EXIT_NOTHING, EXIT_USAGE, EXIT_PARTIAL, EXIT_CHECK_FAILED = 0, 1, 2, 3, 4

COMMANDS = {
    "ingest": ingest_cmd,
    "summary": summary_cmd,
    "report": report_cmd,
    "diff": diff_cmd,
    "plan": plan_cmd,
    "hang": hang_cmd,
    "nightly": nightly_cmd,
    "history": history_cmd,
    "dashboard": dashboard_cmd,
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message} (see --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="stepscope",
        description="Where did the step time go? Multi-rank PyTorch profiler trace analysis.",
    )
    parser.add_argument("--version", action="version", version=f"stepscope {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for module in COMMANDS.values():
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (never raises for user errors)."""
    parser = build_parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
        if args.command is None:
            parser.print_help()
            return EXIT_USAGE
        return int(COMMANDS[args.command].run(args))
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except NothingIngestedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_NOTHING
    except StepscopeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_NOTHING
    except KeyboardInterrupt:
        print("interrupted: the database is unchanged", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - last resort: one line, not a traceback
        if os.environ.get("STEPSCOPE_DEBUG"):
            raise
        print(f"internal error: {type(exc).__name__}: {exc} (set STEPSCOPE_DEBUG=1 for "
              "the traceback, and please report it)", file=sys.stderr)
        return EXIT_NOTHING


if __name__ == "__main__":
    raise SystemExit(main())
