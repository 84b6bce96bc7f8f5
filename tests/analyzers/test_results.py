"""The typed models: published JSON Schemas equal the generated ones, JSON round-trips,
and the schemas reject what they must."""

from __future__ import annotations

import json

import jsonschema
import pytest
from conftest import DOCS, REPO, VALIDATORS, validate_json

from stepscope.analyzers.results import (
    REPORT_SCHEMA_VERSION,
    SCHEMA_FILES,
    Breakdown,
    Diff,
    PlanResult,
    Report,
    from_json,
    schema_text,
    to_json,
)
from stepscope.cli import main

SIM = REPO / "sample_traces" / "simulated"


@pytest.mark.parametrize("name", sorted(SCHEMA_FILES))
def test_published_schema_is_the_generated_one(name: str, update_snapshots: bool) -> None:
    path = DOCS / name
    want = schema_text(SCHEMA_FILES[name])
    if update_snapshots:
        path.write_text(want)
    assert path.read_text() == want, f"{name} is stale: run pytest --update-snapshots"


def test_report_json_round_trips_and_validates(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(SIM / "straggler"), "--format", "json"]) == 0
    text = capsys.readouterr().out
    data = validate_json(json.loads(text), Report)
    report = from_json(text, Report)
    assert to_json(report) == text.rstrip("\n")
    assert report.run.name == "straggler" and data["schema_version"] == REPORT_SCHEMA_VERSION == 5
    assert data["run"]["failed_files"] == []  # an array since schema 2, not "[]"
    assert report.breakdown_ms.as_dict() == data["breakdown_ms"]


def test_schema_rejects_a_missing_section_and_a_wrong_type() -> None:
    breakdown = {c: 1.0 for c in Breakdown.__struct_fields__}
    validator = VALIDATORS[Report]
    with pytest.raises(jsonschema.ValidationError, match="'run' is a required property"):
        validator.validate({"schema_version": 1, "breakdown_ms": breakdown})
    bad_plan = {"job": {}, "device": 3, "evaluated": 1, "feasible": 1, "plans": []}
    with pytest.raises(jsonschema.ValidationError):
        VALIDATORS[PlanResult].validate(bad_plan)


def test_models_are_frozen() -> None:
    b = Breakdown(compute=1, recompute=0, exposed_comm=0, straggler_wait=0, bubble=0,
                  memory=0, idle=0)
    with pytest.raises(AttributeError):
        b.compute = 2  # type: ignore[misc]
    assert Diff.__struct_config__.frozen and Report.__struct_config__.frozen


def test_models_built_by_the_cli_are_validated(capsys: pytest.CaptureFixture[str]) -> None:
    from conftest import VALIDATED
    before = VALIDATED.get("PlanResult", 0)
    assert main(["plan", "--params", "7e9", "--gpus", "8", "--gpu", "H100",
                 "--seq", "4096"]) == 0
    assert VALIDATED.get("PlanResult", 0) == before + 1
    assert capsys.readouterr().out.startswith("# stepscope plan")
