"""`stepscope ingest PATH... [--db FILE] [--run NAME] [--strict] [--max-trace-size SIZE]`."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from stepscope import ingest_run
from stepscope.cli import say
from stepscope.commands import COMMAND_HELP
from stepscope.dashboard.render.summary import summary_text
from stepscope.ingest import DEFAULT_DB, IngestResult, NothingIngestedError, UsageError
from stepscope.ingest.errors import Interrupted, one_line, quote_name, terminal_safe
from stepscope.ingest.exit_codes import EXIT_NOTHING, EXIT_OK, EXIT_PARTIAL
from stepscope.ingest.limits import DEFAULT_MAX_TRACE_BYTES, MAX_TRACE_ENV, format_size
from stepscope.ingest.sources import (
    checked_run_name,
    default_run_name,
    is_archive_name,
    is_trace_name,
)
from stepscope.store import Store
from stepscope.validate import JOBS, executor_spec, rank_set, size

HELP = COMMAND_HELP["ingest"]


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("ingest", help=HELP, description=HELP + ".")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="trace files (.json, .json.gz), directories (searched recursively) "
                        "or archives (.zip, .tar.gz, .tgz, .tar) holding the traces of all ranks")
    p.add_argument("--db", default=DEFAULT_DB, help=f"database file (default: {DEFAULT_DB})")
    p.add_argument("--run", help="run name (default: the name of the first PATH); "
                                 "an existing run of that name is replaced")
    p.add_argument("--strict", action="store_true",
                   help="fail the whole ingest, writing nothing, if any file fails")
    p.add_argument("--jobs", type=JOBS, default=None,
                   help="files parsed in parallel, 1 to 1024 (default: $STEPSCOPE_JOBS, "
                        "the ingest's CPU budget, else the number of CPUs; with Ray: tasks "
                        "in flight, default twice the cluster's CPUs)")
    p.add_argument("--executor", default="auto", type=executor_spec,
                   metavar="{auto,inline,process,ray,ray://ADDRESS}",
                   help="where the per-rank parsing runs: auto (worker processes for more "
                        "than one file, default), inline (this process), process, or ray "
                        "(pip install 'stepscope[ray]'; docs/scale.md)")
    p.add_argument("--ranks", type=rank_set, default=None, metavar="LIST",
                   help="ingest only these ranks, e.g. 0-63,512 (a first look at a big job); "
                        "the run records the subset")
    p.add_argument("--stage-dir", default=None, metavar="DIR", type=stage_dir_arg,
                   help="folder for the per-rank Parquet hand-off (default: the temp "
                        "folder; with Ray on several machines, storage every node sees)")
    p.add_argument("--max-trace-size", type=size, default=None, metavar="SIZE",
                   help="most JSON text one trace may hold once decompressed, e.g. 8G, 500M "
                        f"(default: ${MAX_TRACE_ENV} or {format_size(DEFAULT_MAX_TRACE_BYTES)}:"
                        " 8G, or an eighth of this machine's memory when smaller, since "
                        "parsing takes ~6x the text); a larger file fails alone")
    p.add_argument("--run-per-dir", action="store_true",
                   help="ingest each subdirectory of each PATH as its own run, named after it")
    p.add_argument("--quiet", action="store_true", help="print errors only")
    add_step_marker(p)
    add_comm_kernels(p)


def add_comm_kernels(p: argparse.ArgumentParser) -> None:
    """`--comm-kernels FILE`, shared by the commands that ingest."""
    p.add_argument("--comm-kernels", metavar="FILE", type=Path, default=None,
                   help="JSON file of communication-kernel patterns (kernels of libraries "
                        "other than NCCL, e.g. an in-house all-to-all), read before the "
                        "bundled table; format in docs/attribution.md")


def step_marker_arg(text: str) -> str:
    """A --step-marker: an annotation's name, printable text on one line (a newline or
    an escape code names no annotation, and would break the report's lines)."""
    if not text.strip() or one_line(text) != text:
        raise UsageError(f"--step-marker {quote_name(text)}: an annotation name is "
                         "printable text on one line")
    return text


def stage_dir_arg(text: str) -> str:
    """A --stage-dir: an existing folder where a private folder can be made now (/proc,
    a read-only mount or a file fail here, before any work)."""
    if not os.path.isdir(text):
        what = "not a folder" if os.path.exists(text) else "no such folder"
        raise UsageError(f"--stage-dir {quote_name(text)}: {what}")
    try:
        probe = tempfile.mkdtemp(prefix=".stepscope-probe-", dir=text)
    except OSError as exc:
        raise UsageError(f"--stage-dir {quote_name(text)}: cannot make a folder there "
                         f"({exc.strerror}); give a folder this user can write") from None
    os.rmdir(probe)
    return text


def add_step_marker(p: argparse.ArgumentParser) -> None:
    """`--step-marker NAME`, shared by the commands that ingest."""
    p.add_argument("--step-marker", metavar="NAME", type=step_marker_arg,
                   help="annotation whose calls are the training steps, e.g. train_step "
                        "(record_function); default: ProfilerStep#N, else Optimizer.step, "
                        "a repeating top-level annotation, or the whole window")


class _Progress:
    """A one-line progress display on a terminal; silent otherwise."""

    def __init__(self) -> None:
        self.enabled = sys.stderr.isatty()

    def __call__(self, done: int, total: int, file: str) -> None:
        if not self.enabled:
            return
        width = 28
        filled = int(width * done / max(total, 1))
        name = file if len(file) <= 50 else "..." + file[-47:]
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {name}\033[K")
        if done == total:
            sys.stderr.write("\r\033[K")
        sys.stderr.flush()


def replaced_note(result: IngestResult) -> str:
    """The line that announces a replaced run (printed even with --quiet)."""
    when = (f" (ingested {result.replaced_ingested_at:%Y-%m-%d %H:%M:%S} UTC)"
            if result.replaced_ingested_at else "")
    return (f"note: replaced run '{result.run}' in {result.db}: the earlier ingest of that "
            f"name{when} is gone (give another --run to keep both)")


def _report(result: IngestResult, quiet: bool) -> None:
    for file, problem in result.failures:
        say(f"error: {file}: {problem}")
    for warning in result.warnings:
        say(f"warning: {warning}")
    if result.replaced:
        say(replaced_note(result))
    if quiet:
        return
    ranks = len(result.ranks)
    line = (f"ingested run '{result.run}': {ranks} rank(s) from {result.n_files} file(s) "
            f"into {result.db}")
    if result.rank_subset is not None:
        nccl = (f", {result.skipped_nccl} of them NCCL dumps or logs"
                if result.skipped_nccl else "")
        line += (f" (--ranks {result.rank_subset}: {len(result.skipped_ranks)} other "
                 f"file(s) skipped{nccl})")
    if result.failures:
        line += f" -- PARTIAL, {len(result.failures)} file(s) failed"
    print(terminal_safe(line))


def _run_dirs(paths: list[str]) -> list[tuple[Path, str]]:
    """(directory, run name) for each subdirectory holding traces; a name that two
    PATHs share gets its parent's name as a prefix ('cpu-straggler')."""
    dirs: list[Path] = []
    for raw in paths:
        root = Path(raw)
        if not root.is_dir():
            raise UsageError(f"{root}: --run-per-dir needs directories")
        for child in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
            if any(is_trace_name(f.name) or is_archive_name(f.name) for f in child.rglob("*")):
                dirs.append(child)
    if not dirs:
        raise UsageError(f"no subdirectory with trace files in {', '.join(paths)}")
    names = [d.name for d in dirs]
    return [(d, d.name if names.count(d.name) == 1 else f"{d.parent.name}-{d.name}")
            for d in dirs]


def _say_renamed(dirs: list[tuple[Path, str]]) -> None:
    """One note per folder name that several PATHs share, naming each run it became
    ('straggler' in cpu/ and simulated/: runs 'cpu-straggler' and 'simulated-straggler'),
    so a name the user did not type is never a surprise (printed even with --quiet)."""
    renamed: dict[str, list[str]] = {}
    for d, name in dirs:
        if name != d.name:
            renamed.setdefault(d.name, []).append(f"'{name}' ({d})")
    for folder, runs in renamed.items():
        say(f"note: {len(runs)} folders are named '{folder}': ingested as runs "
            f"{' and '.join(runs)}")


def _interrupted(exc: KeyboardInterrupt, committed: list[str], db: str,
                 pending: list[str]) -> Interrupted:
    """One line that says what the database holds, whenever Ctrl-C came: the run being
    ingested (`pending`) is named even before the writer took it up."""
    done = ", ".join(f"'{r}'" for r in committed)
    if isinstance(exc, Interrupted):
        if not committed:
            return exc
        return Interrupted(f"{exc.message} (run(s) {done} were committed before)",
                           exc.committed)
    if committed:
        return Interrupted(f"interrupted: run(s) {done} were committed to {db} (complete); "
                           "only the summary was not printed", True)
    if pending:
        return Interrupted(f"interrupted: run '{pending[-1]}' was not ingested; {db} is "
                           "unchanged", False)
    return Interrupted(f"interrupted: nothing was ingested; {db} is unchanged", False)


def run(args: argparse.Namespace) -> int:
    committed: list[str] = []
    pending: list[str] = []
    try:
        return _ingest_all(args, committed, pending)
    except KeyboardInterrupt as exc:
        raise _interrupted(exc, committed, args.db, pending) from None


def _pending_name(paths: list[str], name: str | None) -> list[str]:
    """The name the run about to be ingested will have, as the writer will give it (none
    when the paths give no name: the writer then says why)."""
    try:
        return [checked_run_name(name) if name is not None else default_run_name(paths)]
    except UsageError:
        return []


def _ingest_all(args: argparse.Namespace, committed: list[str], pending: list[str]) -> int:
    progress = _Progress()
    if args.run_per_dir:
        if args.run:
            raise UsageError("--run and --run-per-dir exclude each other")
        dirs = _run_dirs(args.paths)
        _say_renamed(dirs)
        jobs = [([str(d)], name) for d, name in dirs]
    else:
        jobs = [(args.paths, args.run)]
    results: list[IngestResult] = []
    nothing = 0
    for paths, name in jobs:
        pending[:] = _pending_name(paths, name)
        try:
            result = ingest_run(paths, db=args.db, run=name, strict=args.strict, jobs=args.jobs,
                            progress=progress, step_marker=args.step_marker,
                            max_bytes=args.max_trace_size, executor=args.executor,
                            ranks=args.ranks, stage_dir=args.stage_dir,
                            comm_kernels=args.comm_kernels)
        except NothingIngestedError as exc:
            if len(jobs) == 1:
                raise
            for file, problem in exc.failures:
                say(f"error: {file}: {problem}")
            say(f"error: {exc}")
            nothing += 1
            continue
        committed.append(result.run)
        _report(result, args.quiet)
        results.append(result)
    if not args.quiet and results:
        with Store(args.db) as store:
            summary = store.summary_records(sorted({r.run for r in results}))
        print()
        print(terminal_safe(summary_text(summary)))
    if nothing == len(jobs):
        return EXIT_NOTHING
    return EXIT_PARTIAL if nothing or any(r.failures for r in results) else EXIT_OK
