"""Display labels of the attribution categories and MFU stages, shared by every renderer
(Markdown, HTML) and the Streamlit pages."""

from __future__ import annotations

from stepscope.analyzers.results import CATEGORIES, STAGES, CollectiveStat, Report
from stepscope.dashboard.render.format import DASH, num, short_name

CATEGORY_LABELS = {
    "compute": "compute", "recompute": "recompute", "exposed_comm": "exposed communication",
    "straggler_wait": "straggler wait", "bubble": "pipeline bubble", "memory": "memory copies",
    "idle": "idle",
}
STAGE_LABELS = {"kernel_efficiency": "kernel efficiency", **CATEGORY_LABELS}
WATERFALL_LABELS = {"kernel_efficiency": "kernel efficiency (compute below peak)",
                    **CATEGORY_LABELS}
# the parts of idle (analyzers.results.IdleSplit), in order
IDLE_PARTS = ("host_bound", "launch_overhead", "other")
IDLE_LABELS = {"host_bound": "waiting for the host", "launch_overhead": "launch overhead",
               "other": "other (launched, not running)"}
IDLE_SHOWN_SHARE = 0.01  # the renderers show the idle split from this share of the step


def group_name(label: str, width: int = 32) -> str:
    """A process group's label short enough for a table column: Megatron's
    'PIPELINE_MODEL_PARALLEL_GROUP' reads 'PIPELINE_PARALLEL'."""
    return short_name(label.removesuffix("_GROUP").replace("_MODEL_PARALLEL", "_PARALLEL"),
                      width)


# how a collective's time splits (report, diff, dashboard): one sentence everywhere
COMM_SPLIT = ("Each collective's time = exposed (nothing else ran: the exposed communication "
              "category) + straggler wait (waiting for a late rank) + in bubble "
              "(point-to-point, the pipeline bubble) + overlapped (hidden under compute or "
              "another collective); the columns add up over the collectives to the "
              "categories of the same names.")



def peak_source(c: CollectiveStat) -> str | None:
    """Where a collective's link peak comes from, for a label beside it: NVLink's from
    the device's peak table; every other link's is an assumption the report never
    measured (analyzers/comm/collectives.py: the network at one 400 Gb/s NIC per GPU,
    a socket at TCP over 100 GbE). None: no peak."""
    if c.link_peak_gbs is None:
        return None
    if c.link == "nvlink":
        return "from the peak table"
    if c.link == "socket":
        return "assumed (TCP over a 100 GbE NIC)"
    return "assumed (one 400 Gb/s NIC per GPU)"


def link_cell(c: CollectiveStat, missing: str = DASH) -> str:
    """A collective's link with its peak, and 'assumed' where that peak was never measured
    (the dashboard's bandwidth chart says the same): 'network (50, assumed)'. Unescaped:
    each renderer escapes it for its format."""
    assumed = (peak_source(c) or "").startswith("assumed")
    return f"{c.link} ({num(c.link_peak_gbs, '.0f', missing)}{', assumed' if assumed else ''})"


def idle_shown(report: Report) -> bool:
    """Whether the renderers explain idle (the JSON always has the split): a GPU timeline
    (on a CPU timeline all of idle is `other`) whose idle is at least 1% of the step."""
    step, idle = report.step_time_ms, report.breakdown_ms.idle
    return (report.idle_split is not None and report.run.timeline != "cpu" and step > 0
            and idle >= IDLE_SHOWN_SHARE * step)

__all__ = ["CATEGORIES", "CATEGORY_LABELS", "COMM_SPLIT", "IDLE_LABELS", "IDLE_PARTS",
           "IDLE_SHOWN_SHARE", "STAGES", "STAGE_LABELS", "WATERFALL_LABELS", "group_name",
           "idle_shown", "peak_source"]
