"""Thresholds of a nightly report: `--fail-if '<metric> <op> <number>'` (docs/nightly.md).

A metric is a numeric path of the report JSON (`mfu.mfu`, `step_time_ms`,
`breakdown_ms.exposed_comm`), a share of the step (`share.exposed_comm`: the category's
fraction of `step_time_ms`), a count (`count.stragglers`) or a path of the diff against
the baseline (`diff.mfu_delta_points`, `diff.step_time_delta_ms`, ...). The catalogue of
valid metrics is fixed by the report model, not by one report's content, so a metric
that one night cannot compute (no baseline, no MFU, no pipeline) is "missing" rather
than unknown.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Literal, cast

import msgspec
from msgspec import inspect as mi

from stepscope.analyzers.results import (
    CATEGORIES,
    CheckOutcome,
    Diff,
    Json,
    JsonObject,
    Report,
    to_builtins,
)
from stepscope.ingest import UsageError
from stepscope.ingest.number_text import NumberTextError, decimal

OPS = ("<", "<=", ">", ">=")
COUNTS = ("stragglers", "recommendations", "failed_files")

_EXPR = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*(<=|>=|<|>)\s*"
                   r"([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*$",
                   re.ASCII)  # \d: ASCII digits only (float() also reads other scripts')

CheckStatus = Literal["pass", "fail", "missing", "skipped"]
Op = Literal["<", "<=", ">", ">="]


SKIPPED_FIELDS = frozenset({"schema_version", "report_schema_version", "a", "b"})


def _unwrap(t: mi.Type) -> mi.Type:
    """`X | None` -> X."""
    if isinstance(t, mi.UnionType):
        rest = [u for u in t.types if not isinstance(u, mi.NoneType)]
        if len(rest) == 1:
            return rest[0]
    return t


def numeric_paths(kind: type[msgspec.Struct], prefix: str = "") -> Iterator[str]:
    """Every numeric field of a model class as a JSON path, through nested models (not
    lists or maps): the catalogue follows the model, it cannot drift from it."""
    info = mi.type_info(kind)
    assert isinstance(info, mi.StructType)
    for f in info.fields:
        if f.name in SKIPPED_FIELDS:
            continue
        t = _unwrap(f.type)
        if isinstance(t, (mi.IntType, mi.FloatType)):
            yield prefix + f.encode_name
        elif isinstance(t, mi.StructType):
            yield from numeric_paths(t.cls, f"{prefix}{f.encode_name}.")


@cache
def metric_catalog() -> tuple[str, ...]:
    """Every metric a threshold may name, in a stable order: the report's numeric
    fields, shares and counts, then the diff's (its sides a / b left out)."""
    return (*numeric_paths(Report), *[f"share.{c}" for c in CATEGORIES],
            *[f"count.{c}" for c in COUNTS], *numeric_paths(Diff, "diff."),
            "diff.step_time_delta_pct")


@dataclass(frozen=True)
class Threshold:
    """One `--fail-if` condition: the check fails when `metric op limit` holds."""

    metric: str
    op: Op
    limit: float

    @property
    def text(self) -> str:
        return f"{self.metric} {self.op} {self.limit:g}"


@dataclass(frozen=True)
class CheckResult:
    """A threshold evaluated on one night: its value and verdict."""

    threshold: Threshold
    value: float | None
    status: CheckStatus

    @property
    def failed(self) -> bool:
        return self.status in ("fail", "missing")

    def outcome(self) -> CheckOutcome:
        """The check as the nightly model holds it (report.json's `checks`)."""
        t = self.threshold
        return CheckOutcome(condition=t.text, metric=t.metric, op=t.op, threshold=t.limit,
                            value=self.value, status=self.status, passed=not self.failed)

    def line(self) -> str:
        return check_line(self.outcome())


def check_line(c: CheckOutcome) -> str:
    """One line for stderr, naming value and threshold."""
    if c.value is None:
        verdict = "not computable" + (" (allowed)" if c.status == "skipped" else "")
        return f"{c.metric}: {verdict} (threshold: fail if {c.op} {c.threshold:g})"
    return f"{c.metric} = {c.value:.6g} (threshold: fail if {c.op} {c.threshold:g})"


def parse_threshold(expr: str) -> Threshold:
    """'mfu.mfu < 0.35' -> Threshold; UsageError naming the valid metrics otherwise."""
    match = _EXPR.match(expr)
    if match is None:
        raise UsageError(f"--fail-if '{expr}': expected '<metric> <op> <number>' with op one "
                         f"of {' '.join(OPS)}, e.g. 'mfu.mfu < 0.35'")
    metric, op, number = match.groups()
    if metric not in metric_catalog():
        raise UsageError(f"--fail-if '{expr}': unknown metric '{metric}'; valid metrics: "
                         + ", ".join(metric_catalog()))
    try:  # the one grammar of numbers (ingest.number_text); a threshold may be negative
        value = decimal(number.removeprefix("+"), -math.inf, math.inf)
    except NumberTextError:  # 1e999 reads as inf: a check that can never fail
        raise UsageError(f"--fail-if '{expr}': the threshold {number} is not a finite "
                         "number (it overflows a double); give a value such as 1e6") from None
    return Threshold(metric, cast(Op, op), value)


def _lookup(data: JsonObject | None, path: list[str]) -> float | None:
    node: Json = data
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    if isinstance(node, bool) or not isinstance(node, (int, float)):
        return None
    value = float(node)
    return value if math.isfinite(value) else None


def metric_value(metric: str, report: JsonObject, diff: JsonObject | None) -> float | None:
    """The value of a catalogue metric on the report / diff JSON; None if not computable."""
    head, _, rest = metric.partition(".")
    if head == "share":
        step = _lookup(report, ["step_time_ms"])
        part = _lookup(report, ["breakdown_ms", rest])
        return part / step if step and part is not None else None
    if head == "count":
        return _count(report, rest)
    if head == "diff":
        if rest == "step_time_delta_pct":
            delta = _lookup(diff, ["step_time_delta_ms"])
            before = _lookup(diff, ["a", "step_time_ms"])
            return 100 * delta / before if delta is not None and before else None
        return _lookup(diff, rest.split("."))
    return _lookup(report, metric.split("."))


def _count(report: JsonObject, what: str) -> float | None:
    if what == "failed_files":
        run = report.get("run")
        raw = run.get("failed_files") if isinstance(run, dict) else None
        items = json.loads(raw) if isinstance(raw, str) else raw
    else:
        items = report.get(what)
    return float(len(items)) if isinstance(items, list) else None


def _holds(value: float, op: str, limit: float) -> bool:
    return {"<": value < limit, "<=": value <= limit,
            ">": value > limit, ">=": value >= limit}[op]


def evaluate(thresholds: list[Threshold], report: Report, diff: Diff | None,
             allow_missing: bool = False) -> list[CheckResult]:
    """Each threshold's value and verdict; a metric that cannot be computed fails
    unless `allow_missing`. Metrics are paths of the models' JSON (docs/report.md)."""
    return evaluate_json(thresholds, to_builtins(report),
                         None if diff is None else to_builtins(diff), allow_missing)


def evaluate_json(thresholds: list[Threshold], report: JsonObject, diff: JsonObject | None,
                  allow_missing: bool = False) -> list[CheckResult]:
    """`evaluate` on the JSON of a report and a diff (as report.json holds them)."""
    results = []
    for t in thresholds:
        value = metric_value(t.metric, report, diff)
        status: CheckStatus
        if value is None:
            status = "skipped" if allow_missing else "missing"
        else:
            status = "fail" if _holds(value, t.op, t.limit) else "pass"
        results.append(CheckResult(t, value, status))
    return results
