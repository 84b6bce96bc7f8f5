"""The names PyTorch and NCCL give their evidence by default: a Flight Recorder dump
`nccl_trace_rank_<N>` (TORCH_NCCL_DEBUG_INFO_TEMP_FILE's default prefix), an NCCL_DEBUG
log `nccl.log` or `nccl.<host>.<pid>.log` (the usual NCCL_DEBUG_FILE pattern).

Evidence is recognized by content (sniff.py); a file under one of these names whose
content is not that evidence is reported, never skipped in silence: a dump that was cut,
overwritten or is another pickle would otherwise leave its rank out without a word."""

from __future__ import annotations

import re

from stepscope.ingest.nccl.sniff import FLIGHT_RECORDER, NCCL_LOG

_DEFAULT_NAMES = ((re.compile(r"nccl_trace_rank_\d+"), FLIGHT_RECORDER),
                  (re.compile(r"nccl(?:\.[^/]+)?\.log", re.IGNORECASE), NCCL_LOG))

NOT_WHAT_ITS_NAME_SAYS = {
    FLIGHT_RECORDER: "named like a Flight Recorder dump, but not one (neither a pickle "
                     "nor JSON of a dump's keys)",
    NCCL_LOG: "named like an NCCL log, but no NCCL_DEBUG line in its first 64 KiB",
}


def default_kind(name: str) -> str | None:
    """The kind of NCCL evidence a file of this name is by default, or None."""
    return next((kind for pattern, kind in _DEFAULT_NAMES if pattern.fullmatch(name)), None)
