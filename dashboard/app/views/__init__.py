"""One module per dashboard page; each has TITLE, HEADER and render(ctx: PageContext).

(Not named `pages/`: Streamlit would turn such a folder into its own navigation.)
"""

from __future__ import annotations

from types import ModuleType

from stepscope.dashboard.app.views import (
    communication,
    compare,
    critical_path,
    guide,
    kernels,
    memory,
    overview,
    pipeline,
    plan,
    ranks,
    roofline,
    runs,
    timeline,
    trends,
    upload,
)

PAGES: dict[str, ModuleType] = {
    "runs": runs,
    "upload": upload,
    "overview": overview,
    "ranks": ranks,
    "timeline": timeline,
    "communication": communication,
    "pipeline": pipeline,
    "critical_path": critical_path,
    "kernels": kernels,
    "roofline": roofline,
    "memory": memory,
    "compare": compare,
    "plan": plan,
    "trends": trends,
    "help": guide,
}
# pages about one run: the sidebar shows the run selector, the URL carries the run
RUN_PAGES = frozenset({"runs", "overview", "ranks", "timeline", "communication", "pipeline",
                       "critical_path", "kernels", "roofline", "memory", "compare",
                       "plan"})
