"""Display labels of the attribution categories and MFU stages, shared by every renderer
(Markdown, HTML) and the Streamlit pages."""

from __future__ import annotations

from stepscope.analyzers.model import CATEGORIES, STAGES

CATEGORY_LABELS = {
    "compute": "compute", "recompute": "recompute", "exposed_comm": "exposed communication",
    "straggler_wait": "straggler wait", "bubble": "pipeline bubble", "memory": "memory copies",
    "idle": "idle",
}
STAGE_LABELS = {"kernel_efficiency": "kernel efficiency", **CATEGORY_LABELS}
WATERFALL_LABELS = {"kernel_efficiency": "kernel efficiency (compute below peak)",
                    **CATEGORY_LABELS}

__all__ = ["CATEGORIES", "CATEGORY_LABELS", "STAGES", "STAGE_LABELS", "WATERFALL_LABELS"]
