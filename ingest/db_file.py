"""A failed ingest leaves the database file as it was, its size included.

DuckDB writes a large transaction's rows to the file as it goes ("optimistic writes", at
the end of the file) and a rollback only marks those blocks free: the file keeps their
size (a failed 2,048-rank ingest grew a 9.97 MB file to 28.8 MB, for good). Those
blocks are referenced by nothing as long as no checkpoint ran, and a checkpoint is the
only thing that rewrites the file's headers, so after a failed ingest whose connection is
closed, headers identical to those taken when it opened the file, and no write-ahead log
left beside it, mean every byte past the old size belongs to the failed run: the file is
cut back to that size. Anything else (a checkpoint ran, a log is left to replay) leaves
the file alone: a larger file is harmless, a wrong cut is not.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from stepscope.ingest.db import DUCKDB_HEADERS


@dataclass(frozen=True)
class FileState:
    """The size and the headers of a database file when an ingest opened it."""

    path: Path
    size: int
    headers: bytes

    @classmethod
    def of(cls, db: str | Path) -> FileState | None:
        """The state of `db` now; None for an in-memory database or an unreadable
        file."""
        path = Path(db)
        if str(db) == ":memory:" or not path.is_file():
            return None
        try:
            with path.open("rb") as f:
                return cls(path, os.fstat(f.fileno()).st_size, f.read(DUCKDB_HEADERS))
        except OSError:
            return None

    def restore_size(self) -> bool:
        """Cut the file back to its size when only a rolled-back run's blocks were added
        past it (module docstring); call with every connection to it closed. Returns
        whether the file was cut."""
        wal = self.path.with_name(self.path.name + ".wal")
        now = FileState.of(self.path)
        if now is None or now.size <= self.size or now.headers != self.headers \
                or wal.exists():
            return False
        try:
            os.truncate(self.path, self.size)
        except OSError:
            return False
        return True
