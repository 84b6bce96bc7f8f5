"""One module per dashboard page; each has TITLE and render(ctx: PageContext).

(Not named `pages/`: Streamlit would turn such a folder into its own navigation.)
"""

from __future__ import annotations

from types import ModuleType

from dashboard.views import runs, upload

PAGES: dict[str, ModuleType] = {
    "runs": runs,
    "upload": upload,
}
# pages about one run: the sidebar shows the run selector, the URL carries the run
RUN_PAGES = frozenset({"runs"})
