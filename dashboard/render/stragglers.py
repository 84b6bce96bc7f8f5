"""What the report can say about stragglers when it found none: a straggler is the rank
the others wait for, which only shows when every rank of the job was traced. With ranks
missing, "none" would be a claim nobody checked; every page says "unknown" instead."""

from __future__ import annotations

from stepscope.analyzers.results import Report

NONE_FOUND = "none: no rank is consistently the last to arrive"


def untraced_ranks(report: Report) -> str | None:
    """'unknown: 1 of 64 ranks traced' when no straggler was found and fewer ranks were
    traced than the job had (world size from the traces, or from the NCCL logs of a run
    without profiler traces: 'unknown: 0 of 8 ranks traced'); None otherwise."""
    ranks, world = report.run.ranks or 0, report.run.world_size or 0
    if report.stragglers or not 0 <= ranks < world:
        return None
    return f"unknown: {ranks} of {world} ranks traced"


def no_straggler_line(report: Report) -> str:
    """The sentence that stands where the list of stragglers would be."""
    unknown = untraced_ranks(report)
    if unknown is None:
        return NONE_FOUND
    return (f"{unknown}: a straggler shows only in the arrival times of every rank of its "
            "groups, so none can be named or ruled out")
