"""The nightly report model (analyzers.results.NightlyReport): one night of a job with its
baseline diff and checks, built from the night's pieces.

Built by `stepscope.nightly.run_nightly`; report.json, report.md and report.html are all
rendered from the one model (dashboard/render/nightly.py and html_nightly.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

import msgspec

from stepscope.analyzers.diff.build import CAUSE_WORDS, _top_causes
from stepscope.analyzers.nightly.checks import CheckResult
from stepscope.analyzers.nightly.history import HistoryRow, largest_loss
from stepscope.analyzers.results import (
    BaselineInfo,
    Diff,
    FailedFile,
    NightlyInfo,
    NightlyReport,
    Report,
)
from stepscope.ingest.exit_codes import EXIT_CHECK_FAILED, EXIT_OK, EXIT_PARTIAL

Status = Literal["complete", "partial"]


def iso_utc(t: datetime | None) -> str | None:
    """A naive UTC time as report.json writes it: '2025-01-31T02:00:00Z' (seconds)."""
    return None if t is None else t.isoformat(timespec="seconds") + "Z"


def _verdict(failed_checks: bool, status: Status) -> tuple[Literal["OK", "FAIL", "PARTIAL"],
                                                             int]:
    """The verdict and its exit code: FAIL (4) when a check failed (it names the
    regression), else PARTIAL (3) for a partial ingest, else OK (0)."""
    if failed_checks:
        return "FAIL", EXIT_CHECK_FAILED
    return ("PARTIAL", EXIT_PARTIAL) if status == "partial" else ("OK", EXIT_OK)


def top_causes(report: Report, diff: Diff | None) -> list[str]:
    """The diff's causes of the change, most costly first; without a baseline (or a
    change), the largest loss of the step."""
    if diff is not None:
        causes = _top_causes(diff)
        if causes:
            return causes
    cat, ms = largest_loss(report.breakdown_ms.as_dict())
    if cat is None or ms is None:
        return []
    step = report.step_time_ms or 1.0
    return [f"largest loss: {CAUSE_WORDS[cat]} {ms:.2f} ms/step "
            f"({100 * ms / step:.1f}% of the step)"]


def build_nightly(*, job: str, run: str, trace_start: datetime | None,
                  ingested_at: datetime, status: Status,
                  failed_files: Sequence[tuple[str, str]], report: Report,
                  baseline: BaselineInfo | None, baseline_note: str | None,
                  diff: Diff | None, checks: Sequence[CheckResult]) -> NightlyReport:
    """The night's model: the report's fields plus `nightly` (verdict, exit code, top
    causes), `baseline`, `diff` and `checks`."""
    verdict, exit_code = _verdict(any(c.failed for c in checks), status)
    fields = {name: getattr(report, name) for name in Report.__struct_fields__}
    return NightlyReport(
        **fields,
        nightly=NightlyInfo(
            job=job, run=run, trace_start=iso_utc(trace_start),
            ingested_at=iso_utc(ingested_at) or "", status=status, verdict=verdict,
            exit_code=exit_code,
            failed_files=tuple(FailedFile(file=f, error=e) for f, e in failed_files),
            pruned_runs=(), top_causes=tuple(top_causes(report, diff))),
        baseline=baseline, baseline_note=baseline_note, diff=diff,
        checks=tuple(c.outcome() for c in checks))


def with_pruned(night: NightlyReport, pruned: Sequence[str]) -> NightlyReport:
    """The night once `--keep` pruned these old runs."""
    info = msgspec.structs.replace(night.nightly, pruned_runs=tuple(pruned))
    return msgspec.structs.replace(night, nightly=info)


def history_row(night: NightlyReport, trace_start: datetime | None,
                ingested_at: datetime) -> HistoryRow:
    """The night's row of the `history` table. The times come as datetimes: the table
    keeps the traces' start to the microsecond (nights are ordered by it), report.json
    only its ISO text to the second."""
    d, info = night.diff, night.nightly
    loss, loss_ms = largest_loss(night.breakdown_ms.as_dict())
    failed = night.failed_checks
    return HistoryRow(
        job=info.job, run=info.run, trace_start=trace_start, ingested_at=ingested_at,
        status=info.status,
        checks=("fail" if failed else "pass") if night.checks else "none",
        checks_failed=len(failed), world_size=night.run.world_size,
        n_ranks=night.run.ranks, device=night.run.device,
        step_time_ms=night.step_time_ms, mfu=night.mfu.mfu, hfu=night.mfu.hfu,
        **{f"{c}_ms": v for c, v in night.breakdown_ms.as_dict().items()},
        largest_loss=loss, largest_loss_ms=loss_ms,
        baseline=night.baseline.run if night.baseline else None,
        mfu_delta_points=d.mfu_delta_points if d else None,
        step_time_delta_ms=d.step_time_delta_ms if d else None,
        top_cause=info.top_causes[0] if info.top_causes else None,
    )
