"""Fit the process to an address-space limit (`ulimit -v`, RLIMIT_AS) before any library loads.

Under such a limit what runs out first is address space reserved but never used: glibc
gives each thread that allocates its own 64 MiB malloc arena, OpenBLAS (loaded with
numpy) and polars (whose Rust allocator aborts when it fails) reserve per thread. A
command that needs 300 MB then died under a 600 MB limit, sometimes inside glibc
("cannot allocate memory for thread-local data: ABORT", exit 127), where no handler can
turn it into stepscope's one line. With one arena, one BLAS thread and one polars thread
the limit is spent on the data, and running out of it is a MemoryError or DuckDB's
out-of-memory error: the one-line machine failure (exit 1). DuckDB's own connections
run on one thread under such a limit (`ingest.limits.address_space_config`).

Nothing changes without a limit. Called first by the CLI's entry, before numpy, DuckDB
or polars load (they load on first use); the variables reach the ingest's workers too.
"""

from __future__ import annotations

import ctypes
import os

from stepscope.ingest.limits import address_space_limited

M_ARENA_MAX = -8  # glibc's mallopt parameter (malloc.h)
# the settings of the jemallocs polars (prefixed `_rjem_`) and Arrow link
JEMALLOC_CONFS = ("_RJEM_MALLOC_CONF", "JE_ARROW_MALLOC_CONF")


def fit_address_space_limit() -> None:
    """One malloc arena, one BLAS and one polars thread when the address space is limited."""
    if not address_space_limited():
        return
    os.environ.setdefault("MALLOC_ARENA_MAX", "1")  # for the worker processes
    for name in ("OPENBLAS_NUM_THREADS", "POLARS_MAX_THREADS"):
        os.environ.setdefault(name, "1")
    # polars' and Arrow's jemalloc: no background purging threads (each reserves its own
    # arena, and one that cannot start prints "<jemalloc>: background thread creation
    # failed", once per allocation: 363,569 lines in one `report` under 600 MB)
    for name in JEMALLOC_CONFS:
        os.environ.setdefault(name, "background_thread:false")
    # Arrow (DuckDB's results reach polars through it): the system allocator, whose one
    # arena is the one above, instead of a jemalloc of its own with its own threads
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(ctypes.c_int(M_ARENA_MAX), ctypes.c_int(1))
    except (OSError, AttributeError):  # not glibc: its allocator has no such arenas
        pass
