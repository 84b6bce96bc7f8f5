"""Telling a stored run from a trace path in the arguments of `report` and `diff`."""

from __future__ import annotations

import sys
from pathlib import Path

from ingest import StepscopeError
from stepscope.store import Store


def _stored_run(db: str | Path, name: str) -> bool:
    """Whether `db` exists and holds a run called `name` (never raises)."""
    if not Path(db).is_file():
        return False
    try:
        with Store(db) as store:
            return name in store.runs()
    except StepscopeError:
        return False


def is_path(target: str, db: str | Path) -> bool:
    """True when `target` is to be ingested from disk. A name that is both an existing
    path and a run in `db` is taken as the path, and one line on stderr says so."""
    if not Path(target).exists():
        return False
    if _stored_run(db, target):
        print(f"note: '{target}' is both a run in {db} and a path; using the path (ingested "
              f"into a temporary database). To report the stored run, call stepscope from "
              f"another directory.", file=sys.stderr)
    return True
