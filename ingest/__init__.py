"""Readers for each trace format -> the stepscope DuckDB schema (docs/schema.md).

The names below load on first use, so importing a light submodule
(`stepscope.ingest.exit_codes`, `.errors`) does not load DuckDB: the CLI imports its exit
codes from here before any heavy module, and a Ctrl-C during start-up is still one line.
"""

import importlib
import sys
import types
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from stepscope.ingest.db import DEFAULT_DB, connect_read_only
    from stepscope.ingest.errors import (
        DatabaseBusyError,
        NothingIngestedError,
        StepscopeError,
        TraceFileError,
        UsageError,
    )
    from stepscope.ingest.reader import RankTables, read_trace
    from stepscope.ingest.runs import relabel_files, run_exists, run_names, run_tokens
    from stepscope.ingest.writer import IngestResult, ingest

# name -> the submodule that defines it
_LAZY = {
    "DEFAULT_DB": "db", "connect_read_only": "db",
    "DatabaseBusyError": "errors", "NothingIngestedError": "errors",
    "StepscopeError": "errors", "TraceFileError": "errors", "UsageError": "errors",
    "IngestResult": "writer", "ingest": "writer",
    "RankTables": "reader", "read_trace": "reader",
    "relabel_files": "runs", "run_exists": "runs", "run_names": "runs", "run_tokens": "runs",
}

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

    def __getattr__(self, name: str) -> object:
        """A name of `__all__`, imported from its submodule on first use (then kept)."""
        if name not in _LAZY:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{self.__name__}.{_LAZY[name]}"), name)
        setattr(self, name, value)
        return value


sys.modules[__name__].__class__ = _IngestPackage
