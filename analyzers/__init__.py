"""Analyses over the stepscope DuckDB model: SQL files plus thin Python wrappers.

Each analyzer takes an open (read-only) DuckDB connection and returns polars frames;
none of them plots or prints.
"""

from stepscope.analyzers.summary import run_summary

__all__ = ["run_summary"]
