"""How the dashboard process is configured: `stepscope dashboard` passes its options to
the Streamlit app through environment variables (Streamlit owns the app's argv)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from stepscope.ingest import DEFAULT_DB

ENV_DB = "STEPSCOPE_DB"
ENV_TRACES_ROOT = "STEPSCOPE_TRACES_ROOT"
ENV_MAX_UPLOAD_MB = "STEPSCOPE_MAX_UPLOAD_MB"
DEFAULT_MAX_UPLOAD_MB = 2048


@dataclass(frozen=True)
class DashboardConfig:
    """The database the app browses and writes, the server folder it may ingest from
    (None: uploads only) and the upload size limit."""

    db: Path
    traces_root: Path | None
    max_upload_mb: int

    def to_env(self) -> dict[str, str]:
        env = {ENV_DB: str(self.db), ENV_MAX_UPLOAD_MB: str(self.max_upload_mb)}
        if self.traces_root is not None:
            env[ENV_TRACES_ROOT] = str(self.traces_root)
        return env

    @classmethod
    def from_env(cls) -> DashboardConfig:
        root = os.environ.get(ENV_TRACES_ROOT)
        return cls(
            db=Path(os.environ.get(ENV_DB, DEFAULT_DB)).resolve(),
            traces_root=Path(root).resolve() if root else None,
            max_upload_mb=int(os.environ.get(ENV_MAX_UPLOAD_MB, DEFAULT_MAX_UPLOAD_MB)),
        )
