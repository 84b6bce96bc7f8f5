"""Resource limits of ingest, with their documented defaults (README "Limits").

A trace is capped by the size of its JSON text after decompression, so a small
compressed file that inflates without end (a "zip bomb") fails that file only, after
writing at most the limit to a temporary file; memory stays bounded because the text
is memory-mapped, never held whole in a Python object.
"""

from __future__ import annotations

import functools
import os
import re
import resource
from pathlib import Path

from stepscope.ingest.errors import UsageError
from stepscope.ingest.number_text import SIZE_UNITS, NumberTextError, decimal, setting
from stepscope.ingest.number_text import size as number_size

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

_UNITS = SIZE_UNITS


def parse_size(text: str, what: str = "--max-trace-size") -> int:
    """'8G', '500M', '1.5GiB', '16 G', '123456' -> bytes (binary units), between 1K and
    1024T; UsageError naming `what` otherwise (ingest.number_text: ASCII only, no
    surrounding space)."""
    try:
        return number_size(text, 1 << 10, 1 << 50)
    except NumberTextError as exc:
        raise UsageError(f"{what} {text!r}: {exc.problem}") from None


def format_size(n: int) -> str:
    """Bytes in the largest binary unit that keeps it exact enough: 8589934592 -> '8G'."""
    for unit in ("T", "G", "M", "K"):
        if n >= _UNITS[unit]:
            return f"{n / _UNITS[unit]:.3g}{unit}"
    return f"{n}B"


MEMORY_LIMIT_ENV = "STEPSCOPE_MEMORY_LIMIT"
MAX_MEMORY_LIMIT_BYTES = 1 << 50  # 1 PiB: past the memory of any machine
_MEMORY_UNITS = {"b": 1, "byte": 1, "bytes": 1, "k": 10**3, "kb": 10**3, "kib": 1 << 10,
                 "m": 10**6, "mb": 10**6, "mib": 1 << 20, "g": 10**9, "gb": 10**9,
                 "gib": 1 << 30, "t": 10**12, "tb": 10**12, "tib": 1 << 40}


def memory_limit_setting() -> str | None:
    """$STEPSCOPE_MEMORY_LIMIT as DuckDB is given it, None when unset or empty; the one
    reader of the variable, for every command and the Python API. It must be a positive
    size with a unit (2GB, 512MiB, 1.5 GB: a decimal of ASCII digits, optionally one
    space, a unit DuckDB reads) up to 1 PiB: DuckDB reads '-1GB' as no limit at all, a
    bare number as an error, and 10^20 GB was taken as given."""
    value = setting(MEMORY_LIMIT_ENV)
    if value is None:
        return None
    number, unit = value.split(" ", 1) if " " in value else _split_unit(value)
    try:
        amount = decimal(number, 0, float("inf"))  # finite and above 0
    except NumberTextError:
        amount = None
    scale = _MEMORY_UNITS.get(unit.lower())
    if amount is None or scale is None or "e" in number.lower() \
            or amount * scale > MAX_MEMORY_LIMIT_BYTES:
        raise UsageError(f"cannot open the database with ${MEMORY_LIMIT_ENV}="
                         f"{value[:40]!r} (not a positive size with a unit, at most 1 PiB); "
                         "give a size such as 2GB (default 1GB)")
    return value


def _split_unit(value: str) -> tuple[str, str]:
    """'2GB' -> ('2', 'GB'): the number, and the ASCII letters that end the text."""
    unit = re.search(r"[A-Za-z]*\Z", value)
    cut = unit.start() if unit else len(value)
    return value[:cut], value[cut:]


def max_trace_bytes(explicit: int | None = None) -> int:
    """The per-trace limit: the explicit value, else $STEPSCOPE_MAX_TRACE_SIZE, else the
    default (8 GiB, or an eighth of the memory when smaller)."""
    if explicit is not None:
        if explicit <= 0:
            raise UsageError("max_trace_bytes must be positive")
        return explicit
    env = setting(MAX_TRACE_ENV)
    return parse_size(env, MAX_TRACE_ENV) if env is not None else DEFAULT_MAX_TRACE_BYTES


# Under `ulimit -v` DuckDB's room is a quarter of the address space still free when the
# process's first connection opens (at least 16 MiB): past it DuckDB fails with its own
# out-of-memory error, the one-line machine failure, while polars (whose Rust allocator
# aborts the process when it fails), Arrow and NumPy keep the rest. Measured on `report`
# of a 2-rank run: a third still ran out of address space at 700 MB (DuckDB's
# "bad allocation" of a 16 KiB block), a quarter runs from 600 MB up.
ADDRESS_ROOM_SHARE = 4
MIN_ADDRESS_ROOM_BYTES = 16 << 20


def address_space_limited() -> bool:
    """True when this process runs under a finite address-space limit (`ulimit -v`)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    return soft != resource.RLIM_INFINITY


def address_space_config() -> dict[str, str | bool | int | float | list[str]]:
    """DuckDB settings for a connection opened under an address-space limit: one thread,
    no I/O threads, a room within the address space left.

    DuckDB starts its worker threads (and 8 I/O threads) when a database opens; under
    `ulimit -v` the first touch of a new thread's thread-local data can find no address
    space left, and glibc then aborts the process ("cannot allocate memory for
    thread-local data", exit 127), where no handler can turn it into the one-line machine
    failure (measured: 1 run in 6 of `export` under 600 MB). With these settings DuckDB
    starts no thread. Nothing changes without a limit.
    """
    if not address_space_limited():
        return {}
    return {"threads": 1, "async_threads": 0, "memory_limit": f"{_address_room()}B"}


@functools.cache
def _address_room() -> int:
    """DuckDB's room under an address-space limit, fixed at the first connection: DuckDB
    refuses a second connection to an open file with other settings."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    return max(MIN_ADDRESS_ROOM_BYTES, (soft - _address_space_used()) // ADDRESS_ROOM_SHARE)


def _address_space_used() -> int:
    """The address space this process has mapped (VmSize), 0 when it cannot be told."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:  # a small pseudo-file
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) << 10
    except (OSError, ValueError, IndexError):
        pass
    return 0
