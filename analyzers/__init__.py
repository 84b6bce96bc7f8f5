"""Analyses over the stepscope DuckDB model: SQL files (analyzers/sql/, one query per
file) plus thin Python wrappers.

Each analyzer takes an open (read-only) DuckDB connection, or the run context built from
one (context.py), and returns typed values: a section of one of the models of model.py
(run report, diff, plan, nightly report, hang analysis), typed rows for the dashboard's
drill-downs (detail.py), or a polars frame for the ingest summary and the nightly
history. None of them plots or prints; the sentences they write (evidence, narratives,
verdicts) are part of the models, number formats of tables belong to the renderers
(dashboard/render/).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stepscope.analyzers.summary import run_summary

__all__ = ["run_summary"]


def __getattr__(name: str) -> Any:
    """`run_summary` loads (with polars) on first use: the ingest imports
    analyzers.breakdown.attribution, whose SQL needs neither."""
    if name == "run_summary":
        from stepscope.analyzers.summary import run_summary

        return run_summary
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
