"""Ctrl-C during an ingest: stop at a safe point and tell the truth about the database.

While an `InterruptGuard` is active in the main thread, SIGINT does not raise
KeyboardInterrupt wherever Python happens to be (inside a DuckDB call, a thread pool
wait, a COMMIT). It sets a flag and runs the registered stoppers (interrupt DuckDB
queries, cancel reads in flight); the ingest checks the flag between steps, rolls back,
and reports whether the run was committed by looking at the database itself.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any


class InterruptGuard:
    """Turns SIGINT into a flag for the duration of a `with` block (main thread only;
    elsewhere it is inert and KeyboardInterrupt keeps its default behaviour)."""

    def __init__(self) -> None:
        self.hit = False
        self._stoppers: list[Callable[[], Any]] = []
        self._previous: Any = None
        self._installed = False

    def add_stopper(self, stop: Callable[[], Any]) -> None:
        """Call `stop()` when SIGINT arrives (e.g. a connection's interrupt)."""
        self._stoppers.append(stop)
        if self.hit:
            stop()

    def check(self) -> None:
        """Raise KeyboardInterrupt here, at a safe point, if SIGINT arrived."""
        if self.hit:
            raise KeyboardInterrupt

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.hit = True
        for stop in list(self._stoppers):
            try:
                stop()
            except Exception:  # noqa: BLE001 - a closed connection: nothing to stop
                pass

    def __enter__(self) -> InterruptGuard:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False
