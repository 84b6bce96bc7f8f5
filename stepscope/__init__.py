"""stepscope: where did the step time of a distributed training job go?

Public Python API (small on purpose):

    import stepscope
    result = stepscope.ingest_run(["traces/"], db="stepscope.duckdb", run="nightly")
    store = stepscope.open("stepscope.duckdb")
    store.summary()            # polars DataFrame, one row per run
    store.table("collectives", run="nightly")
    store.sql("SELECT ...", params={...})

The heavy modules (DuckDB, polars, the analyzers) load on first use, so the CLI answers
Ctrl-C during start-up with one line instead of a traceback.
"""

from __future__ import annotations

import os as _os
import sys as _sys

# `python -m stepscope` puts the current folder first on the import path while this
# package is found (sys.argv[0] is then '-m'): a typing.py or pathlib.py there would
# replace the standard library's modules imported below (exit 3, no output). Taken off
# here, before any other import; a script importing stepscope keeps its path as it is.
if _sys.argv[:1] == ["-m"] and not _sys.flags.safe_path and _sys.path \
        and _sys.path[0] in ("", _os.getcwd()):
    del _sys.path[0]

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stepscope.ingest import IngestResult, StepscopeError, UsageError
    from stepscope.ingest.ranksets import RankSet
    from stepscope.ingest.writer import ProgressFn
    from stepscope.store import Store

__version__ = "0.1.0"
_DEFAULT_DB = "stepscope.duckdb"  # ingest.DEFAULT_DB, without importing DuckDB here
_LAZY = {"IngestResult": "stepscope.ingest", "StepscopeError": "stepscope.ingest",
         "UsageError": "stepscope.ingest",
         "Store": "stepscope.store", "report": "stepscope.targets", "diff": "stepscope.targets",
         "open_target": "stepscope.targets"}


def ingest_run(
    paths: str | Path | Sequence[str | Path],
    db: str | Path = _DEFAULT_DB,
    run: str | None = None,
    strict: bool = False,
    jobs: int | None = None,
    progress: ProgressFn | None = None,
    step_marker: str | None = None,
    max_bytes: int | None = None,
    executor: str = "auto",
    ranks: str | RankSet | None = None,
    stage_dir: str | Path | None = None,
    comm_kernels: str | Path | None = None,
) -> IngestResult:
    """Ingest every rank's traces (files, directories, archives) as one run, then
    compute its step-time attribution in the same transaction. `step_marker` names the
    annotation whose calls are the steps (default: ProfilerStep#N, then the fallbacks of
    docs/attribution.md, "Steps"). `max_bytes` caps each trace's JSON text (default
    $STEPSCOPE_MAX_TRACE_SIZE, else 8G or an eighth of the memory, see README "Limits").
    `executor`, `ranks` ('0-63,512') and `stage_dir` choose where the per-rank tasks run
    and which ranks (docs/scale.md).
    `comm_kernels` is a JSON file of communication-kernel patterns read before the bundled
    table (docs/attribution.md, "Communication kernels that are not NCCL")."""
    from stepscope.analyzers.breakdown.attribution import materialize
    from stepscope.ingest import ingest as _ingest
    from stepscope.ingest.comm_kernels import comm_patterns
    from stepscope.ingest.ranksets import parse_ranks

    if isinstance(paths, (str, Path)):
        paths = [paths]
    subset = parse_ranks(ranks) if isinstance(ranks, str) else ranks
    return _ingest(list(paths), db=db, run=run, strict=strict, jobs=jobs, progress=progress,
                   after_load=materialize, step_marker=step_marker, max_bytes=max_bytes,
                   executor=executor, ranks=subset, stage_dir=stage_dir,
                   comm_kernels=comm_patterns(comm_kernels))


def open(db: str | Path = _DEFAULT_DB) -> Store:  # noqa: A001 - the API's name
    """Open a stepscope database read-only."""
    from stepscope.store import Store

    return Store(db)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'stepscope' has no attribute {name!r}")


__all__ = ["IngestResult", "Store", "StepscopeError", "UsageError", "ingest_run", "open"]
