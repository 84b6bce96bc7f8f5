"""One builder per result model, called alike by the CLI, the nightly job, the dashboard
and the tests, so the same runs give the same model everywhere (docs/architecture.md):

- Report: `analyzers.report.build_report` (or `report_from_context` on a built context);
- Diff: `diff_runs` below: both reports, the per-op times and B as expected from A;
- Calibration: `calibrate_run` below, on the run's model spec (--model or model.json);
- NightlyReport: `analyzers.nightly.night.build_nightly`, from the report and `diff_runs`;
- HangReport: `analyzers.hang.build_hang_report`.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import msgspec

from stepscope.analyzers.comm.collectives import op_times
from stepscope.analyzers.context import ReportOptions, RunContext, run_context
from stepscope.analyzers.diff.bandwidth import bandwidth_recommendations
from stepscope.analyzers.diff.build import build_diff
from stepscope.analyzers.flops.counted_ops import counted_ops
from stepscope.analyzers.flops.peaks import DevicePeak
from stepscope.analyzers.plan.calibrate import calibrate
from stepscope.analyzers.plan.expected import expected_for, spec_for
from stepscope.analyzers.report import report_from_context
from stepscope.analyzers.results import Calibration, Diff, Report
from stepscope.ingest.errors import UsageError


@dataclass(frozen=True)
class RunDiff:
    """The diff of two runs, and why it holds no expectation from A when it does not."""
    diff: Diff
    why_no_expected: str | None


def diff_runs(con_a: duckdb.DuckDBPyConnection, run_a: str,
              con_b: duckdb.DuckDBPyConnection, run_b: str,
              options: ReportOptions | None = None) -> RunDiff:
    """Why run B differs from run A (`stepscope diff`, the nightly's change against its
    baseline, the dashboard's Compare): the two reports with the same options, the time
    of each op, and B as the planner expects it from A."""
    ctx_a, ctx_b = run_context(con_a, run_a, options), run_context(con_b, run_b, options)
    return diff_reports(ctx_a, report_from_context(ctx_a), ctx_b, report_from_context(ctx_b))


def diff_reports(ctx_a: RunContext, report_a: Report, ctx_b: RunContext,
                 report_b: Report) -> RunDiff:
    """`diff_runs` for reports already built from these contexts (the nightly has the
    night's report in hand)."""
    expected, why_not = expected_for(ctx_a, report_a, ctx_b, report_b)
    diff = build_diff(report_a, report_b, op_times(ctx_a.con, ctx_a.run),
                      op_times(ctx_b.con, ctx_b.run), expected=expected)
    network = bandwidth_recommendations(ctx_b, report_b, diff.collectives)
    if network:  # a slower network is a cause too: with B's own advice, by gain
        recs = sorted((*network, *diff.recommendations), key=lambda r: -r.expected_gain_ms)
        diff = msgspec.structs.replace(diff, recommendations=tuple(recs))
    return RunDiff(diff, why_not)


@dataclass(frozen=True)
class RunCalibration:
    """The planner's calibration on a run, where its model spec came from, and the peak
    of the run's device it was measured against."""
    calibration: Calibration
    spec_source: str
    peak: DevicePeak | None


def calibrate_run(con: duckdb.DuckDBPyConnection, run: str,
                  options: ReportOptions | None = None) -> RunCalibration:
    """The run calibrated on its model spec: `options.spec` (--model), else model.json
    beside its traces; the report it calibrates on uses the same spec. UsageError with
    the one-line reason when it cannot be (no spec, a CPU-only run, ...)."""
    ctx = run_context(con, run, options)
    found = spec_for(ctx)
    if found is None:
        raise UsageError(f"plan --from {run}: no model spec: pass --model FILE (n_params, "
                         "n_layers, hidden, seq_len, global_batch_tokens) or put model.json "
                         "beside the run's traces")
    with counted_ops(ctx.con, ctx.run):  # the report and the calibration share them
        cal = calibrate(ctx, report_from_context(ctx), *found)
    return RunCalibration(cal, found[1], ctx.device.peak)
