"""A failed ingest leaves the database file as it was, its size included.

DuckDB writes a large transaction's rows to the file as it goes ("optimistic writes", at
the end of the file) and a rollback only marks those blocks free: the file keeps their
size (a failed 2,048-rank ingest grew a 9.97 MB file to 28.8 MB, for good). Those
blocks are referenced by nothing as long as no checkpoint ran, and a checkpoint is the
only thing that rewrites the file's headers, so after a failed ingest whose connection is
closed, headers identical to those taken when it opened the file, and no write-ahead log
left beside it, mean every byte past the old size belongs to the failed run: the file is
cut back to that size. Anything else (a checkpoint ran, a log is left to replay) leaves
the file alone: a larger file is harmless, a wrong cut is not. A file the failed ingest
created is removed instead (NewFile): no new, schema-only database is left behind, nor
the empty file DuckDB made before a full disk kept it from writing its header.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

import duckdb

from stepscope.ingest.db import DUCKDB_HEADERS
from stepscope.ingest.sql_files import sql


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


@dataclass(frozen=True)
class NewFile:
    """A database file this ingest is about to create (nothing at its path before it
    connected), removed again when the ingest fails: a failed ingest leaves no new,
    schema-only file behind.

    Safe against other processes: `remove_unused` runs while this process's connection
    still holds DuckDB's write lock, which no other connection (writer or reader) can
    hold meanwhile, so nobody is using the file; and it removes the file only when it
    holds nothing but stepscope's empty schema (catalog/holds_anything.sql), so a
    database another process created and filled before this one took the lock, or any
    table of a user's, keeps it. A writer of another stepscope process that opened the
    old file but had not taken its lock yet re-opens by name when it gets the lock and
    finds the name gone (db._open_waiting), so it writes into a new file, never into the
    removed one. A file that existed before is never a NewFile."""

    path: Path

    @classmethod
    def before_connecting(cls, db: str | Path) -> NewFile | None:
        """A NewFile when nothing (not even a dangling link) is at `db` now."""
        if str(db).startswith(":memory:") or os.path.lexists(db):
            return None
        return cls(Path(db))

    def remove_if_unwritten(self) -> bool:
        """Remove the file when opening it failed before DuckDB wrote a byte (a full disk,
        a quota) and no other process holds a lock on it (DuckDB locks its file with
        POSIX locks, as `fcntl.lockf` does): the empty file is this try's, and no other
        connection is in it. Returns whether it was removed."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_NOFOLLOW)
        except OSError:
            return False
        try:
            if os.fstat(fd).st_size != 0:
                return False
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.unlink(self.path)
        except OSError:
            return False
        finally:
            os.close(fd)
        wal = self.path.with_name(self.path.name + ".wal")
        if wal.is_file() and not wal.is_symlink() and wal.stat().st_size == 0:
            wal.unlink(missing_ok=True)
        return True

    def remove_unused(self, con: duckdb.DuckDBPyConnection) -> bool:
        """Remove the file (and its write-ahead log) when it holds nothing; call after
        the rollback, before closing `con`. Returns whether it was removed."""
        try:
            (holds,), = con.execute(sql("catalog/holds_anything.sql")).fetchall()
        except duckdb.Error:
            return False  # cannot tell: keep it
        if holds or not self.path.is_file() or self.path.is_symlink():
            return False
        for path in (self.path, self.path.with_name(self.path.name + ".wal")):
            try:
                path.unlink()
            except FileNotFoundError:
                pass
            except OSError:
                return False
        return True
