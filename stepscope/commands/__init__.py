"""One module per CLI subcommand: each has add_parser(subparsers) and run(args) -> int."""

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
    whatif_cmd,
)

COMMANDS = {
    "ingest": ingest_cmd,
    "summary": summary_cmd,
    "report": report_cmd,
    "diff": diff_cmd,
    "plan": plan_cmd,
    "whatif": whatif_cmd,
    "hang": hang_cmd,
    "nightly": nightly_cmd,
    "history": history_cmd,
    "dashboard": dashboard_cmd,
}
