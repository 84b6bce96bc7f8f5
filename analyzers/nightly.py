"""The nightly report model: one night of a job with its baseline diff and checks.

Built by `stepscope.nightly.run_nightly`; rendered by dashboard/render_nightly.py
(report.json, report.md) and dashboard/render_html.py (report.html).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from stepscope.analyzers.checks import CheckResult
from stepscope.analyzers.diff import CAUSE_WORDS, _top_causes
from stepscope.analyzers.history import HistoryRow, largest_loss
from stepscope.analyzers.model import (
    BaselineInfo,
    CheckOutcome,
    Diff,
    FailedFile,
    NightlyInfo,
    NightlyJson,
    Report,
)
from stepscope.ingest.exit_codes import EXIT_CHECK_FAILED, EXIT_OK, EXIT_PARTIAL


@dataclass(frozen=True)
class Baseline:
    """The run a night is compared with, and how it was chosen."""

    run: str
    selected_by: Literal["previous", "--baseline"]  # "previous": the latest earlier night
    trace_start: datetime | None


@dataclass(frozen=True)
class NightlyReport:
    """Everything one `stepscope nightly` produces; renderers are pure functions of it."""

    job: str
    run: str
    trace_start: datetime | None
    ingested_at: datetime
    status: Literal["complete", "partial"]
    failed_files: list[tuple[str, str]]
    report: Report
    baseline: Baseline | None
    baseline_note: str | None
    diff: Diff | None
    checks: list[CheckResult]
    pruned: list[str] = field(default_factory=list)

    @property
    def failed_checks(self) -> list[CheckResult]:
        return [c for c in self.checks if c.failed]

    @property
    def exit_code(self) -> int:
        """4 when a check failed (it names the regression), else 3 for a partial ingest,
        else 0."""
        if self.failed_checks:
            return EXIT_CHECK_FAILED
        return EXIT_PARTIAL if self.status == "partial" else EXIT_OK

    @property
    def verdict(self) -> Literal["OK", "FAIL", "PARTIAL"]:
        if self.failed_checks:
            return "FAIL"
        return "PARTIAL" if self.status == "partial" else "OK"

    def top_causes(self) -> list[str]:
        """The diff's causes of the change, most costly first; without a baseline, the
        largest loss of the step."""
        if self.diff is not None:
            causes = _top_causes(self.diff)
            if causes:
                return causes
        cat, ms = largest_loss(self.report.breakdown_ms.as_dict())
        if cat is None or ms is None:
            return []
        step = self.report.step_time_ms or 1.0
        return [f"largest loss: {CAUSE_WORDS[cat]} {ms:.2f} ms/step "
                f"({100 * ms / step:.1f}% of the step)"]

    def history_row(self) -> HistoryRow:
        r, d = self.report, self.diff
        loss, loss_ms = largest_loss(r.breakdown_ms.as_dict())
        causes = self.top_causes()
        return HistoryRow(
            job=self.job, run=self.run, trace_start=self.trace_start,
            ingested_at=self.ingested_at, status=self.status,
            checks=("fail" if self.failed_checks else "pass") if self.checks else "none",
            checks_failed=len(self.failed_checks), world_size=r.run.world_size,
            n_ranks=r.run.ranks, device=r.run.device,
            step_time_ms=r.step_time_ms, mfu=r.mfu.mfu, hfu=r.mfu.hfu,
            **{f"{c}_ms": v for c, v in r.breakdown_ms.as_dict().items()},
            largest_loss=loss, largest_loss_ms=loss_ms,
            baseline=self.baseline.run if self.baseline else None,
            mfu_delta_points=d.mfu_delta_points if d else None,
            step_time_delta_ms=d.step_time_delta_ms if d else None,
            top_cause=causes[0] if causes else None,
        )

    def json_model(self) -> NightlyJson:
        """report.json: the report, plus `nightly`, `baseline`, `diff` and `checks`."""
        base = self.baseline
        report = {name: getattr(self.report, name) for name in Report.__struct_fields__}
        return NightlyJson(
            **report,
            nightly=NightlyInfo(
                job=self.job, run=self.run, trace_start=_iso(self.trace_start),
                ingested_at=_iso(self.ingested_at) or "", status=self.status,
                verdict=self.verdict, exit_code=self.exit_code,
                failed_files=tuple(FailedFile(file=f, error=e) for f, e in self.failed_files),
                pruned_runs=tuple(self.pruned), top_causes=tuple(self.top_causes())),
            baseline=None if base is None else BaselineInfo(
                run=base.run, selected_by=base.selected_by, trace_start=_iso(base.trace_start)),
            baseline_note=self.baseline_note,
            diff=self.diff,
            checks=tuple(_outcome(c) for c in self.checks),
        )


def _outcome(c: CheckResult) -> CheckOutcome:
    t = c.threshold
    return CheckOutcome(condition=t.text, metric=t.metric, op=t.op, threshold=t.limit,
                        value=c.value, status=c.status, passed=not c.failed)


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat(timespec="seconds") + "Z"
