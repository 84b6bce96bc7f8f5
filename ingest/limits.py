"""Resource limits of ingest, with their documented defaults (README "Limits").

A trace is capped by the size of its JSON text after decompression, so a small
compressed file that inflates without end (a "zip bomb") fails that file only, after
writing at most the limit to a temporary file; memory stays bounded because the text
is memory-mapped, never held whole in a Python object.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from stepscope.ingest.errors import UsageError

# Real Kineto traces of one rank are 10 MB to ~2 GB of JSON; 8 GiB leaves 4x headroom.
# But a trace needs about 6x its JSON text in memory while it is parsed (measured:
# 0.43 GB peak RSS for 47 MB, 1.25 GB for 190 MB; docs/scale.md), so the default is
# also at most an eighth of the memory this process may use: a trace at the limit
# parses within 3/4 of it. 8 GiB on machines with 64 GiB or more, 3 GiB with 24 GiB.
MAX_DEFAULT_TRACE_BYTES = 8 << 30
MIN_DEFAULT_TRACE_BYTES = 256 << 20
TEXT_MEMORY_FACTOR = 6
MEMORY_SHARE = 8
MAX_TRACE_ENV = "STEPSCOPE_MAX_TRACE_SIZE"


def usable_memory_bytes() -> int | None:
    """The memory this process may use: the machine's, or less under a cgroup limit
    (a container); None when it cannot be told."""
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        physical = None
    limits = [physical] if physical else []
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()  # a one-line pseudo-file
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:
            limits.append(int(text))
    return min(limits) if limits else None


def default_max_trace_bytes() -> int:
    """The default per-trace limit: 8 GiB, or an eighth of the usable memory when that
    is smaller (never below 256 MiB), rounded down to a whole MiB."""
    memory = usable_memory_bytes()
    if memory is None:
        return MAX_DEFAULT_TRACE_BYTES
    share = max(MIN_DEFAULT_TRACE_BYTES, memory // MEMORY_SHARE) >> 20 << 20
    return min(MAX_DEFAULT_TRACE_BYTES, share)


DEFAULT_MAX_TRACE_BYTES = default_max_trace_bytes()

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*$", re.IGNORECASE | re.ASCII)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str, what: str = "--max-trace-size") -> int:
    """'8G', '500M', '1.5GiB', '123456' -> bytes (binary units); UsageError otherwise."""
    match = _SIZE.match(text)
    if match is None:
        raise UsageError(f"{what} {text!r}: not a size; write it like 8G, 500M or 1048576")
    value = int(float(match.group(1)) * _UNITS[match.group(2).upper()])
    if not 1 << 10 <= value <= 1 << 50:
        raise UsageError(f"{what} {text!r}: must be between 1K and 1024T")
    return value


def format_size(n: int) -> str:
    """Bytes in the largest binary unit that keeps it exact enough: 8589934592 -> '8G'."""
    for unit in ("T", "G", "M", "K"):
        if n >= _UNITS[unit]:
            return f"{n / _UNITS[unit]:.3g}{unit}"
    return f"{n}B"


def max_trace_bytes(explicit: int | None = None) -> int:
    """The per-trace limit: the explicit value, else $STEPSCOPE_MAX_TRACE_SIZE, else the
    default (8 GiB, or an eighth of the memory when smaller)."""
    if explicit is not None:
        if explicit <= 0:
            raise UsageError("max_trace_bytes must be positive")
        return explicit
    env = os.environ.get(MAX_TRACE_ENV)
    return parse_size(env, MAX_TRACE_ENV) if env else DEFAULT_MAX_TRACE_BYTES
