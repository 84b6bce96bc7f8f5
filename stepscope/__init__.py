"""stepscope: where did the step time of a distributed training job go?

Public Python API (small on purpose):

    import stepscope
    result = stepscope.ingest(["traces/"], db="stepscope.duckdb", run="nightly")
    store = stepscope.open("stepscope.duckdb")
    store.summary()            # polars DataFrame, one row per run
    store.table("collectives", run="nightly")
    store.sql("SELECT ...", params={...})
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from analyzers.attribution import materialize
from ingest import DEFAULT_DB, IngestResult, StepscopeError, UsageError
from ingest import ingest as _ingest
from ingest.loader import ProgressFn
from stepscope.store import Store

__version__ = "0.1.0"


def ingest(
    paths: str | Path | Sequence[str | Path],
    db: str | Path = DEFAULT_DB,
    run: str | None = None,
    strict: bool = False,
    jobs: int | None = None,
    progress: ProgressFn | None = None,
    step_marker: str | None = None,
) -> IngestResult:
    """Ingest every rank's traces (files, directories, archives) as one run, then
    compute its step-time attribution in the same transaction. `step_marker` names the
    annotation whose calls are the steps (default: ProfilerStep#N, then the fallbacks of
    docs/attribution.md, "Steps")."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    return _ingest(list(paths), db=db, run=run, strict=strict, jobs=jobs, progress=progress,
                   after_load=materialize, step_marker=step_marker)


def open(db: str | Path = DEFAULT_DB) -> Store:  # noqa: A001 - the API's name
    """Open a stepscope database read-only."""
    return Store(db)


__all__ = ["IngestResult", "Store", "StepscopeError", "UsageError", "ingest", "open"]
