"""Readers for each trace format -> the stepscope DuckDB schema (docs/schema.md)."""

import sys
import types
from typing import NoReturn

from stepscope.ingest.db import DEFAULT_DB, connect_read_only
from stepscope.ingest.errors import (
    DatabaseBusyError,
    NothingIngestedError,
    StepscopeError,
    TraceFileError,
    UsageError,
)
from stepscope.ingest.loader import IngestResult, ingest
from stepscope.ingest.reader import RankTables, read_trace
from stepscope.ingest.runs import relabel_files, run_exists, run_names, run_tokens

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
    "relabel_files",
    "run_exists",
    "run_names",
    "run_tokens",
]


class _IngestPackage(types.ModuleType):
    """`stepscope.ingest` is this package since the one-namespace layout; the library's
    ingest function is `stepscope.ingest_run`. A call of the old spelling says so."""

    def __call__(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("stepscope.ingest is the ingest package; call "
                        "stepscope.ingest_run(paths, db=..., run=...) to ingest traces")


sys.modules[__name__].__class__ = _IngestPackage
