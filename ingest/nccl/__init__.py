"""Readers for NCCL evidence outside Kineto: Flight Recorder dumps, NCCL_DEBUG logs,
NCCL Inspector and profiler-plugin output (docs/schema.md, `fr_*` and `nccl_*`)."""

from stepscope.ingest.nccl.flight_recorder import FrDump, read_flight_recorder
from stepscope.ingest.nccl.safe_pickle import UnsafePickleError, load_plain
from stepscope.ingest.nccl.sniff import KINDS, sniff

__all__ = ["KINDS", "FrDump", "UnsafePickleError", "load_plain", "read_flight_recorder",
           "sniff"]
