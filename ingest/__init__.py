"""Readers for each trace format -> the stepscope DuckDB schema (docs/schema.md)."""

from ingest.db import DEFAULT_DB, connect_read_only
from ingest.errors import (
    DatabaseBusyError,
    NothingIngestedError,
    StepscopeError,
    TraceFileError,
    UsageError,
)
from ingest.loader import IngestResult, ingest
from ingest.reader import RankTables, read_trace

__all__ = [
    "DEFAULT_DB",
    "DatabaseBusyError",
    "IngestResult",
    "NothingIngestedError",
    "RankTables",
    "StepscopeError",
    "TraceFileError",
    "UsageError",
    "connect_read_only",
    "ingest",
    "read_trace",
]
