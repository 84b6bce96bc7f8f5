"""Recognize NCCL evidence by content, not by file name.

Flight Recorder dumps are named `<prefix><rank>` with no extension, NCCL logs are
`nccl.%h.%p.log` or mixed into stdout, Inspector files are JSONL: only the first bytes
tell what a file is. `sniff` reads at most 64 KiB and returns the kind, or None for
anything else (Kineto traces included: they keep their own path).
"""

from __future__ import annotations

import gzip
import re
import zlib
from pathlib import Path

from stepscope.ingest.nccl.flight_recorder import is_fr_json

SNIFF_BYTES = 1 << 16
FLIGHT_RECORDER = "flight_recorder"
NCCL_LOG = "nccl_log"
NCCL_INSPECTOR = "nccl_inspector"
NCCL_PROFILER = "nccl_profiler"
KINDS = (FLIGHT_RECORDER, NCCL_LOG, NCCL_INSPECTOR, NCCL_PROFILER)

_NCCL_LINE = re.compile(rb"NCCL (?:INFO|WARN)\b|^NCCL version \d", re.MULTILINE)
_INSPECTOR = re.compile(rb'^\s*\{\s*"header"\s*:.*"(?:coll_perf|p2p_perf)"', re.MULTILINE)
_PROFILER_EVENT = re.compile(rb'"cat"\s*:\s*"(?:COLL|P2P|GROUP|PROXY|GPU|NET|COLL_API|'
                             rb'P2P_API|GROUP_API|KERNEL_LAUNCH)"')


def read_head(path: Path, limit: int = SNIFF_BYTES) -> bytes:
    """The first bytes of a file, decompressed when it is gzip; b'' when unreadable."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(limit)
        if head[:2] == b"\x1f\x8b":
            with gzip.open(path, "rb") as gz:
                head = gz.read(limit)
    except (OSError, EOFError, zlib.error):
        return b""
    return head


_FR_KEYS = (b"pg_config", b"pg_status", b"entries")


def sniff_bytes(head: bytes, named: bool = False) -> str | None:
    """The kind of NCCL evidence these first bytes start, or None.

    A pickle is a Flight Recorder candidate when it mentions an FR key (other pickles in
    a job folder, e.g. checkpoints, are not ours), or always when the user named the file
    (`named`): then a pickle that is not plain FR data is refused loudly, never skipped.
    """
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return FLIGHT_RECORDER if named or any(k in head for k in _FR_KEYS) else None
    stripped = head.lstrip()
    if stripped.startswith(b"{"):
        if is_fr_json(stripped):
            return FLIGHT_RECORDER
        if _INSPECTOR.search(stripped):
            return NCCL_INSPECTOR
        return None
    if stripped.startswith(b"["):
        return NCCL_PROFILER if _PROFILER_EVENT.search(stripped) else None
    if _NCCL_LINE.search(head):
        return NCCL_LOG
    return None


def sniff(path: Path, named: bool = False) -> str | None:
    return sniff_bytes(read_head(path), named)
