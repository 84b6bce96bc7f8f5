"""The one JSON serializer of the result models and their published JSON Schemas
(docs/*.schema.json, generated from the classes:
`python -m stepscope.analyzers.results.serialize docs/`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

import msgspec

from stepscope.analyzers.results.base import JsonObject, Model
from stepscope.analyzers.results.diff import Diff
from stepscope.analyzers.results.hang import HangReport
from stepscope.analyzers.results.nightly import NightlyReport
from stepscope.analyzers.results.plan import PlanResult
from stepscope.analyzers.results.report import Report

M = TypeVar("M", bound=Model)


_ENCODER = msgspec.json.Encoder()


def to_json(model: Model) -> str:
    """The one JSON serializer: fields in declaration order, indented by 2."""
    return msgspec.json.format(_ENCODER.encode(model), indent=2).decode()


def to_builtins(model: Model) -> JsonObject:
    """The model as the plain values its JSON holds (dicts, lists, numbers, strings)."""
    out = msgspec.json.decode(_ENCODER.encode(model))
    assert isinstance(out, dict)
    return out


def from_json(text: str | bytes, kind: type[M]) -> M:
    """Parse and validate JSON written by `to_json` back into a model."""
    return msgspec.json.decode(text, type=kind)


SCHEMA_FILES: dict[str, type[Model]] = {
    "report.schema.json": Report,
    "diff.schema.json": Diff,
    "plan.schema.json": PlanResult,
    "nightly.schema.json": NightlyReport,
    "hang.schema.json": HangReport,
}


def json_schema(kind: type[Model]) -> JsonObject:
    """The JSON Schema (2020-12) of a model class, as published in docs/."""
    schema = msgspec.json.schema(kind)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def schema_text(kind: type[Model]) -> str:
    """The published text of a model's JSON Schema (docs/<name>.schema.json)."""
    return json.dumps(json_schema(kind), indent=2, sort_keys=True) + "\n"


def write_schemas(folder: Path) -> list[Path]:
    """Regenerate the published schemas: `python -m stepscope.analyzers.results docs/`."""
    written = []
    for name, kind in SCHEMA_FILES.items():
        path = folder / name
        path.write_text(schema_text(kind))
        written.append(path)
    return written
