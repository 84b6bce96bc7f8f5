"""Where a run's model spec comes from: one rule for every command and page.

The spec the user gave (`--model FILE`), else `model.json` beside the traces the run was
ingested from. `run_context` (analyzers/context.py) applies it, so the report, nightly,
diff, the dashboard's pages and the planner (`plan --from`, Plan) all see the same spec:
before, only the planner looked beside the traces, and Overview's advice said "no model
spec (--model)" beside a Plan calibrated on that run's model.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

from stepscope.analyzers._sql import sql
from stepscope.analyzers.flops.model_spec import ModelSpec, load_spec

MODEL_JSON = "model.json"
GIVEN = "--model"  # the source named when the user gave the spec


def find_spec(con: duckdb.DuckDBPyConnection, run: str) -> tuple[ModelSpec, str] | None:
    """The run's model spec from `model.json` beside the traces it was ingested from
    (runs.sources: a folder holding it, or the folder of a trace file) and that file's
    path; None if absent. A relative source is looked up from the current folder, then
    from the database file's folder (where `ingest` ran when the database is its default)."""
    rows = con.execute(sql("planner/run_sources.sql"), {"run": run}).fetchall()
    if not rows or not rows[0][0]:
        return None
    sources, db_path = json.loads(rows[0][0]), rows[0][1]
    bases = [Path()] + ([Path(db_path).parent] if db_path else [])
    for source in sources:
        for path in dict.fromkeys(base / source for base in bases):
            candidate = (path if path.is_dir() else path.parent) / MODEL_JSON
            if candidate.is_file():
                return load_spec(candidate), str(candidate)
    return None


def run_spec(con: duckdb.DuckDBPyConnection, run: str,
             given: ModelSpec | None) -> tuple[ModelSpec, str] | None:
    """The spec `given` (--model), else the run's model.json (`find_spec`), with where it
    came from ("--model" or the file's path); None when the run has neither."""
    if given is not None:
        return given, GIVEN
    return find_spec(con, run)
