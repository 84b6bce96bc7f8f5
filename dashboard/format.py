"""Display labels and number formatting shared by the pages (analyzers return raw
numbers; how they read is the renderers' business)."""

from __future__ import annotations

from typing import Any

LABELS = {
    "compute": "compute", "recompute": "recompute", "exposed_comm": "exposed communication",
    "straggler_wait": "straggler wait", "bubble": "pipeline bubble", "memory": "memory copies",
    "idle": "idle", "kernel_efficiency": "kernel efficiency",
}


def pct(fraction: float | None, digits: int = 1) -> str:
    """0.4213 -> '42.1%'; None -> '-'."""
    return "-" if fraction is None else f"{100 * fraction:.{digits}f}%"


def ms(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f} ms"


def mfu_of(report: Any) -> float | None:
    """The run's MFU (None when it cannot be computed honestly)."""
    mfu = report["mfu"] if isinstance(report, dict) else report.mfu
    if mfu is None:
        return None
    return mfu.get("mfu") if isinstance(mfu, dict) else mfu.mfu


def failed_raw(report: Any) -> str | None:
    """runs.failed_files (JSON text) as the report carries it."""
    info = report["run"] if isinstance(report, dict) else report.run
    return info["failed_files"] if isinstance(info, dict) else info.failed_files
