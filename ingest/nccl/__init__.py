"""Readers for NCCL evidence outside Kineto: Flight Recorder dumps, NCCL_DEBUG logs,
NCCL Inspector and profiler-plugin output (docs/schema.md, `fr_*` and `nccl_*`).

The names below load their module on first use, so that sniffing files
(`stepscope.ingest.nccl.sniff`) does not load the readers and Arrow.
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stepscope.ingest.nccl.flight_recorder import FrDump, read_flight_recorder
    from stepscope.ingest.nccl.safe_pickle import UnsafePickleError, load_plain
    from stepscope.ingest.nccl.sniff import KINDS, sniff

_LAZY = {"FrDump": "flight_recorder", "read_flight_recorder": "flight_recorder",
         "UnsafePickleError": "safe_pickle", "load_plain": "safe_pickle",
         "KINDS": "sniff", "sniff": "sniff"}

__all__ = ["KINDS", "FrDump", "UnsafePickleError", "load_plain", "read_flight_recorder",
           "sniff"]


def __getattr__(name: str) -> object:
    """A name of `__all__`, imported from its submodule on first use."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
