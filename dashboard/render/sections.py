"""The run report's sections, named once in the order a reader meets them.

The Markdown renderer (report.py `MARKDOWN`) and the HTML renderer (html_report.py
`HTML`) each draw every section in its own way, and both walk this one list, so the two
outputs cannot drift apart in what they show or in which order (tests/render checks that
each renderer draws exactly these sections). The nightly report reuses both walks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

REPORT_SECTIONS: tuple[str, ...] = (
    "header",           # run, ranks, device, layout, notes, files that failed
    "breakdown",        # where the step time went, with the idle split
    "mfu",              # MFU / HFU and the waterfall of lost points
    "roofline",         # kernels against their roofline
    "recommendations",  # fixes with predicted gains
    "collectives",      # communication per type and group
    "all_to_all",       # MoE / embedding exchange imbalance
    "memory",           # peak memory per rank against the device
    "nccl",             # NCCL's own evidence (logs, Flight Recorder, Inspector)
    "stragglers",       # the ranks the others wait for
    "pipeline",         # stages, microbatches, bubble against 1F1B
    "critical_path",    # the cross-rank critical path and its what-ifs
    "clocks",           # the hosts' clocks aligned from the collectives
    "per_rank",         # the breakdown of every rank
    "per_step",         # the breakdown of every step
)

Out = TypeVar("Out")
Model = TypeVar("Model")


def walk(drawers: Mapping[str, Callable[[Model], Out]], model: Model) -> list[Out]:
    """Each section of REPORT_SECTIONS drawn by its renderer's drawer, in order."""
    missing = [name for name in REPORT_SECTIONS if name not in drawers]
    if missing or len(drawers) != len(REPORT_SECTIONS):
        raise KeyError(f"a renderer must draw exactly the report's sections; missing: {missing}")
    return [drawers[name](model) for name in REPORT_SECTIONS]
