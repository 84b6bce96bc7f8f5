"""One night of a production job (`stepscope nightly`, docs/nightly.md): the run report with
its baseline, change and checks.
"""

from __future__ import annotations

from typing import Literal

from stepscope.analyzers.results.base import Model
from stepscope.analyzers.results.diff import Diff
from stepscope.analyzers.results.report import FailedFile, Report

NIGHTLY_SCHEMA_VERSION = 1


class NightlyInfo(Model, frozen=True, kw_only=True):
    """report.json's `nightly` section: which night, its verdict and exit code."""
    schema_version: int = NIGHTLY_SCHEMA_VERSION
    job: str
    run: str
    trace_start: str | None  # ISO 8601 UTC, earliest event of the traces
    ingested_at: str         # ISO 8601 UTC
    status: Literal["complete", "partial"]
    verdict: Literal["OK", "FAIL", "PARTIAL"]
    exit_code: int            # 0, 3 or 4 (docs/nightly.md)
    failed_files: tuple[FailedFile, ...]
    pruned_runs: tuple[str, ...]
    top_causes: tuple[str, ...]  # sentences with numbers, most costly first


class BaselineInfo(Model, frozen=True, kw_only=True):
    """The run a night is compared with and how it was chosen ("previous": the job's
    latest earlier night)."""
    run: str
    selected_by: Literal["previous", "--baseline"]
    trace_start: str | None


class CheckOutcome(Model, frozen=True, kw_only=True):
    """One `--fail-if`: `value` is None when the metric could not be computed."""
    condition: str
    metric: str
    op: Literal["<", "<=", ">", ">="]
    threshold: float
    value: float | None
    status: Literal["pass", "fail", "missing", "skipped"]
    passed: bool

    @property
    def failed(self) -> bool:
        return not self.passed


class NightlyReport(Report, frozen=True, kw_only=True):
    """One night of a job, `stepscope nightly` (docs/nightly.md): the run report plus the
    night's sections. report.json is this model (schema docs/nightly.schema.json);
    report.md and report.html are rendered from it."""
    nightly: NightlyInfo
    baseline: BaselineInfo | None
    baseline_note: str | None
    diff: Diff | None
    checks: tuple[CheckOutcome, ...]

    @property
    def failed_checks(self) -> tuple[CheckOutcome, ...]:
        return tuple(c for c in self.checks if c.failed)
