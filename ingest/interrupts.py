"""Ctrl-C (and SIGTERM, SIGHUP) during an ingest: stop at a safe point and tell the
truth about the database.

While an `InterruptGuard` is active in the main thread, SIGINT, SIGTERM and SIGHUP do
not raise wherever Python happens to be (inside a DuckDB call, a thread pool wait, a
COMMIT). They set a flag and run the registered stoppers (interrupt DuckDB queries,
cancel reads in flight); the ingest checks the flag between steps, rolls back, and
reports whether the run was committed by looking at the database itself.

Outside a guard, the CLI turns SIGTERM and SIGHUP into a KeyboardInterrupt, as Python
does for SIGINT (stepscope.cli), so every temporary folder (unpacked archives, staged
Parquet, scratch databases) is removed by its `with` block whichever signal stops the
command. A signal ignored when the process started (`nohup`) stays ignored.
`last_signal` tells the CLI which one the guard saw (exit code 128 + its number).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_received: list[int] = []
_active: list[InterruptGuard] = []  # the guards whose `with` block is running


def last_signal() -> int | None:
    """The last stop signal a stepscope handler received in this process, or None."""
    return _received[-1] if _received else None


def forget_signals() -> None:
    _received.clear()


def stop_pending() -> bool:
    """Whether a stop signal reached a running guard: a wait that no stopper can cut
    short (the sleep between polls of a locked database) checks it, or SIGTERM would
    wait out $STEPSCOPE_LOCK_WAIT."""
    return any(guard.hit for guard in _active)


def _catchable(sig: int) -> bool:
    """Not ignored by whoever started us (nohup ignores SIGHUP: keep it so)."""
    return signal.getsignal(sig) is not signal.SIG_IGN


class InterruptGuard:
    """Turns SIGINT, SIGTERM and SIGHUP into a flag for the duration of a `with` block
    (main thread only; elsewhere it is inert and KeyboardInterrupt keeps its default
    behaviour)."""

    def __init__(self) -> None:
        self.hit = False
        self._stoppers: list[Callable[[], Any]] = []
        self._previous: dict[int, Any] = {}

    def add_stopper(self, stop: Callable[[], Any]) -> None:
        """Call `stop()` when a stop signal arrives (e.g. a connection's interrupt)."""
        self._stoppers.append(stop)
        if self.hit:
            stop()

    def check(self) -> None:
        """Raise KeyboardInterrupt here, at a safe point, if a stop signal arrived."""
        if self.hit:
            raise KeyboardInterrupt

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        _received.append(signum)
        self.hit = True
        for stop in list(self._stoppers):
            try:
                stop()
            except Exception:  # noqa: BLE001 - a closed connection: nothing to stop
                pass

    def __enter__(self) -> InterruptGuard:
        _active.append(self)
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                if _catchable(sig):  # ignored at start (nohup, `cmd &`): stays ignored
                    self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        if self in _active:
            _active.remove(self)
