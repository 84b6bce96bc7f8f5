"""A worker process of the `process` executor: `python -P -m stepscope.ingest.worker`.

Reads tasks from stdin and writes outcomes to stdout, each message a 4-byte big-endian
length and a pickle (ingest/tasks.py dataclasses), one task at a time until stdin
closes (the executor may queue the next task in the pipe while one runs). A plain
subprocess rather than multiprocessing, so nothing re-imports the caller's `__main__`
(a script calling stepscope.ingest needs no `if __name__` guard), and the worker runs in
its own session: a Ctrl-C at the terminal reaches only the ingest, which stops the
workers itself.
"""

from __future__ import annotations

import pickle
import struct
import sys
from typing import IO, Any

HEADER = struct.Struct(">I")


def send(stream: IO[bytes], obj: Any) -> None:
    """Write one message whole (an unbuffered pipe may take it in parts)."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        written = stream.write(view)
        view = view[written if written is not None else len(view):]
    stream.flush()


def receive(stream: IO[bytes]) -> Any:
    """The next message, or None at the end of the stream. The executor reads its
    workers' pipes unbuffered: a buffered reader could take the next message into its
    buffer, where the poll that waits for the pipe would never see it."""
    head = _read_exactly(stream, HEADER.size)
    if head is None:
        return None
    size, = HEADER.unpack(head)
    data = _read_exactly(stream, size)
    if data is None:
        return None
    return pickle.loads(data)  # trusted: our own parent process, over a private pipe


def _read_exactly(stream: IO[bytes], size: int) -> bytes | None:
    """`size` bytes, or None when the stream ends first (an unbuffered read may return
    fewer bytes than asked)."""
    parts: list[bytes] = []
    left = size
    while left:
        chunk = stream.read(left)
        if not chunk:
            return None
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def main() -> int:
    from stepscope.ingest.tasks import run_task

    inbox, outbox = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write to the message stream
    while (task := receive(inbox)) is not None:
        send(outbox, run_task(task))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
