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


# The least address space in which every command ran or failed with its one line
# (measured on the samples: below it polars' one thread could not be spawned, a Rust
# panic of 45 lines, or its allocator aborted the process, exit 134; polars alone maps
# ~390 MB, and OpenBLAS exits the process itself when its buffer cannot be had).
ADDRESS_SPACE_FLOOR = 600 << 20


def check_address_space_floor() -> None:
    """Refuse, with the machine's one line (exit 1), to start a command under an
    address-space limit below ADDRESS_SPACE_FLOOR, where a library would stop the process
    itself; above it, start polars' one thread now, before DuckDB takes its room (the
    thread could not be spawned later: `nightly` at 550 MB panicked 3 runs in 3)."""
    import resource

    from stepscope.ingest.errors import MachineFailure

    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return
    if soft < ADDRESS_SPACE_FLOOR:
        raise MachineFailure(
            f"out of memory; the address-space limit (ulimit -v) of {soft >> 20} MiB is "
            f"below the {ADDRESS_SPACE_FLOOR >> 20} MiB stepscope needs: raise it (the "
            "machine's failure, not stepscope's)")
    try:
        _start_polars_thread()
    except (Warning, ImportError, MemoryError, OSError) as exc:
        raise MachineFailure(_too_little(soft)) from exc
    except BaseException as exc:  # polars' Rust panic (pyo3's PanicException)
        if type(exc).__name__ != "PanicException":
            raise
        raise MachineFailure(_too_little(soft)) from None


def _too_little(soft: int) -> str:
    return (f"out of memory; the address-space limit (ulimit -v) of {soft >> 20} MiB leaves "
            "too little to load polars and start its thread: raise it (the machine's "
            "failure, not stepscope's)")


def _start_polars_thread() -> None:
    """Load polars and spawn its thread pool (one thread under a limit)."""
    import warnings

    with warnings.catch_warnings():  # "Polars binary is missing!": its load ran out
        warnings.simplefilter("error")
        import polars

        polars.thread_pool_size()
