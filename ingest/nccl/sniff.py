"""Recognize NCCL evidence by content, not by file name.

Flight Recorder dumps are named `<prefix><rank>` with no extension, NCCL logs are
`nccl.%h.%p.log` or mixed into stdout, Inspector files are JSONL: only the first bytes
tell what a file is. `sniff` reads at most 64 KiB and returns the kind, or None for
anything else (Kineto traces included: they keep their own path).
"""

from __future__ import annotations

import gzip
import pickletools
import re
import zlib
from pathlib import Path

SNIFF_BYTES = 1 << 16
FLIGHT_RECORDER = "flight_recorder"
NCCL_LOG = "nccl_log"
NCCL_INSPECTOR = "nccl_inspector"
NCCL_PROFILER = "nccl_profiler"
KINDS = (FLIGHT_RECORDER, NCCL_LOG, NCCL_INSPECTOR, NCCL_PROFILER)

_NCCL_LINE = re.compile(rb"NCCL (?:INFO|WARN)\b|^NCCL version \d", re.MULTILINE)
# nccl-tests output without NCCL_DEBUG lines: its first line, or a result table's header
_NCCL_TESTS = re.compile(rb"^# nThread \d+ nGpus \d+ |^#\s+size\s+count\s+type\s+redop",
                         re.MULTILINE)
# An Inspector line: a JSON object holding one of the plugin's own keys, or opening with
# its header. Not the whole header + perf pattern of a line: a line may lack a part (then
# the reader names the file and what is missing, never a silent skip) or be longer than
# the sniffed 64 KiB (a 1 MiB comm_name: only its header's start is seen).
_INSPECTOR = re.compile(rb'"(?:coll_perf|p2p_perf|inspector_output_format_version)"\s*:'
                        rb'|^\s*\{\s*"header"\s*:\s*\{[^{}]{0,256}?"(?:id|comm_name|rank|'
                        rb'n_ranks|nnodes)"\s*:', re.MULTILINE)
UTF8_BOM = b"\xef\xbb\xbf"
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


# Protocols 0 and 1 have no PROTO header: a dict starts with MARK + DICT ("(d", 0) or
# EMPTY_DICT ("}", 1), a list with MARK + LIST or EMPTY_LIST.
_OLD_PICKLE_STARTS = (b"(d", b"(l", b"}", b"]")
_OLD_PICKLE_OPCODES = 4


def is_pickle_head(head: bytes) -> bool:
    """Do these bytes start a pickle? Protocols 2-5 say so in their first two bytes;
    protocols 0-1 do when their first opcodes decode (pickletools executes nothing)."""
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return True
    if not head.startswith(_OLD_PICKLE_STARTS):
        return False
    decoded = 0
    try:
        for op, _arg, _pos in pickletools.genops(head):
            decoded += 1
            if op.name == "STOP" or decoded >= _OLD_PICKLE_OPCODES:
                return True
    except Exception:  # noqa: BLE001 - not a pickle, or the head cuts an opcode
        return False
    return False


def is_fr_json(head: bytes) -> bool:
    """A JSON object with the keys of a Flight Recorder dump (not a Kineto trace). Here,
    not in flight_recorder.py, so that sniffing a file loads no Arrow."""
    text = head.lstrip()[:1 << 16]
    return (text.startswith(b"{") and b'"traceEvents"' not in text
            and b'"pg_config"' in text and (b'"entries"' in text or b'"pg_status"' in text))


def sniff_bytes(head: bytes, named: bool = False) -> str | None:
    """The kind of NCCL evidence these first bytes start, or None.

    A pickle is a Flight Recorder candidate when it mentions an FR key (other pickles in
    a job folder, e.g. checkpoints, are not ours), or always when the user named the file
    (`named`): then a pickle that is not plain FR data is refused loudly, never skipped.
    """
    if is_pickle_head(head):
        return FLIGHT_RECORDER if named or any(k in head for k in _FR_KEYS) else None
    stripped = head.removeprefix(UTF8_BOM).lstrip()
    if stripped.startswith(b"{"):
        if is_fr_json(stripped):
            return FLIGHT_RECORDER
        if b'"traceEvents"' not in stripped and _INSPECTOR.search(stripped):
            return NCCL_INSPECTOR
        return None
    if stripped.startswith(b"[") and _PROFILER_EVENT.search(stripped):
        return NCCL_PROFILER
    if _NCCL_LINE.search(head) or _NCCL_TESTS.search(head):
        return NCCL_LOG
    return NCCL_INSPECTOR if _later_inspector_line(stripped) else None


_LATER_LINES = 64  # the lines after the first that may show an Inspector file


def _later_inspector_line(head: bytes) -> bool:
    """Whether a line after the first is an Inspector line (an object with one of the
    plugin's keys) in a head that is no trace: the first line cut (a partial write, a
    log rotated mid-line) or junk. Such a file was skipped without a word; now the
    reader fails it, naming the line."""
    if b'"traceEvents"' in head:
        return False
    _, _, rest = head.partition(b"\n")
    return any(line.lstrip().startswith(b"{") and _INSPECTOR.search(line) is not None
               for line in rest.split(b"\n", _LATER_LINES)[:_LATER_LINES])


def sniff(path: Path, named: bool = False) -> str | None:
    return sniff_bytes(read_head(path), named)
