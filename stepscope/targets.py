"""What a command points at: a run in the database, or trace paths ingested on the fly.

`open_target` is the one place that tells a stored run from a trace path (`report`,
`diff` and the dashboard all go through it): a path is ingested into a temporary
database that lives as long as the `with` block; a run name opens `db` read-only.
`report` and `diff` build the typed models from such targets (the library behind the
commands of the same names).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from stepscope.analyzers.builders import calibrate_run, diff_runs
from stepscope.analyzers.context import ReportOptions, run_context
from stepscope.analyzers.plan.from_run import Constraints, plan_from
from stepscope.analyzers.report import report_from_context
from stepscope.analyzers.results import Diff, PlanResult, Report
from stepscope.ingest import DEFAULT_DB, StepscopeError, UsageError
from stepscope.ingest.sources import default_run_name, path_exists
from stepscope.scratch_db import scratch_database
from stepscope.store import Store


@dataclass(frozen=True)
class Target:
    """An open run: its read-only store and name, and what an on-the-fly ingest said."""

    store: Store
    run: str
    failures: tuple[tuple[str, str], ...] = ()   # (file, problem) left out of the ingest
    notes: tuple[str, ...] = ()                  # one-line remarks for the user


def _stored_run(db: str | Path, name: str) -> bool:
    """Whether `db` exists and holds a run called `name` (never raises)."""
    if not Path(db).is_file():
        return False
    try:
        with Store(db) as store:
            return name in store.runs()
    except StepscopeError:
        return False


def is_path(target: str | Path) -> bool:
    """True when `target` is to be ingested from disk (an existing path wins over a run
    of the same name)."""
    return path_exists(target)


def _both_note(target: str | Path, db: str | Path) -> tuple[str, ...]:
    if not _stored_run(db, str(target)):
        return ()
    return (f"'{target}' is both a run in {db} and a path; using the path (ingested into a "
            "temporary database). To report the stored run, call stepscope from another "
            "directory.",)


@contextmanager
def open_target(target: str | Path, db: str | Path = DEFAULT_DB, *,
                step_marker: str | None = None, avoid_name: str | None = None,
                comm_kernels: str | Path | None = None) -> Iterator[Target]:
    """Open a run by name in `db`, or ingest a trace path into a temporary database (the
    run is named after the path; `avoid_name` gets '-b' appended when they clash; the
    machine's failure while it lives, in the caller's block too, names the path:
    scratch_db).
    `step_marker` and `comm_kernels` apply to that ingest (ingest_run)."""
    if not is_path(target):
        if step_marker:
            raise UsageError(f"--step-marker applies when ingesting traces; re-ingest the "
                             f"run: stepscope ingest PATH --run {target} --step-marker "
                             f"{step_marker}")
        if comm_kernels:
            raise UsageError(f"--comm-kernels applies when ingesting traces; re-ingest the "
                             f"run: stepscope ingest PATH --run {target} --comm-kernels "
                             f"{comm_kernels}")
        with Store(db) as store:
            store.require_run(str(target))
            yield Target(store, str(target))
        return
    notes = _both_note(target, db)
    name = default_run_name([target])
    if name == avoid_name:
        name += "-b"
    from stepscope import ingest_run  # the package's own ingest (analysis included)

    with scratch_database(target) as scratch:
        result = ingest_run([target], db=scratch.path, run=name, step_marker=step_marker,
                            comm_kernels=comm_kernels)
        scratch.ingested = True
        with Store(scratch.path) as store:
            yield Target(store, name, tuple(result.failures), notes)


@dataclass(frozen=True)
class Built:
    """A model with what the ingests on the way said (failures make the exit code 3)."""

    failures: tuple[tuple[str, str], ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class BuiltReport(Built):
    report: Report


@dataclass(frozen=True)
class BuiltDiff(Built):
    diff: Diff


@dataclass(frozen=True)
class BuiltPlan(Built):
    plan: PlanResult


def report(target: str | Path, db: str | Path = DEFAULT_DB,
           options: ReportOptions | None = None,
           step_marker: str | None = None,
           comm_kernels: str | Path | None = None) -> BuiltReport:
    """The report of a run or of a trace path."""
    with open_target(target, db, step_marker=step_marker, comm_kernels=comm_kernels) as t:
        model = report_from_context(run_context(t.store.con, t.run, options))
        return BuiltReport(failures=t.failures, notes=t.notes, report=model)


def diff(target_a: str | Path, target_b: str | Path, db: str | Path = DEFAULT_DB,
         options: ReportOptions | None = None, step_marker: str | None = None,
         comm_kernels: str | Path | None = None) -> BuiltDiff:
    """Why run B differs from run A (each a run in `db` or a trace path)."""
    if str(target_a) == str(target_b):
        raise UsageError("RUN_A and RUN_B are the same; pass two runs or two trace paths")
    with open_target(target_a, db, step_marker=step_marker, comm_kernels=comm_kernels) as a:
        try:
            opened_b = open_target(target_b, db, step_marker=step_marker, avoid_name=a.run,
                                   comm_kernels=comm_kernels)
            with opened_b as b:
                built = diff_runs(a.store.con, a.run, b.store.con, b.run, options)
                why_not = built.why_no_expected
                notes = a.notes + b.notes + ((why_not,) if why_not else ())
                return BuiltDiff(failures=a.failures + b.failures, notes=notes,
                                 diff=built.diff)
        except StepscopeError as exc:
            # A's files that failed came first: the error of B must not hide them
            exc.earlier = a.failures + exc.earlier
            raise


def plan(target: str | Path, db: str | Path = DEFAULT_DB,
         options: ReportOptions | None = None, constraints: Constraints | None = None,
         top: int = 10, step_marker: str | None = None) -> BuiltPlan:
    """Layouts of a run's model predicted from the run's own calibration (`plan --from`);
    the model spec is --model, else model.json beside the run's traces."""
    with open_target(target, db, step_marker=step_marker) as t:
        built = calibrate_run(t.store.con, t.run, options)
        model = plan_from(built.calibration, built.peak, constraints or Constraints(), top)
        return BuiltPlan(failures=t.failures, notes=t.notes, plan=model)
