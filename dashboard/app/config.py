"""How the dashboard process is configured: `stepscope dashboard` passes its options to
the Streamlit app through environment variables (Streamlit owns the app's argv)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from stepscope.ingest import DEFAULT_DB, UsageError
from stepscope.ingest.number_text import NumberTextError, setting, whole

ENV_DB = "STEPSCOPE_DB"
ENV_TRACES_ROOT = "STEPSCOPE_TRACES_ROOT"
ENV_MAX_UPLOAD_MB = "STEPSCOPE_MAX_UPLOAD_MB"
DEFAULT_MAX_UPLOAD_MB = 2048
MAX_UPLOAD_MB = 1 << 20  # 1 TiB: past any upload a browser sends
ENV_BUSY_RETRIES = "STEPSCOPE_BUSY_RETRIES"  # about one a second; tests shorten it
DEFAULT_BUSY_RETRIES = 60
MAX_BUSY_RETRIES = 86_400


def busy_retries() -> int:
    """How often a page retries a database a writer holds ($STEPSCOPE_BUSY_RETRIES,
    default 60, about one a second), read by the one grammar of numbers
    (ingest.number_text); checked by `stepscope dashboard` before its server starts."""
    text = setting(ENV_BUSY_RETRIES) or str(DEFAULT_BUSY_RETRIES)
    try:
        return whole(text, 0, MAX_BUSY_RETRIES)
    except NumberTextError as exc:
        raise UsageError(f"${ENV_BUSY_RETRIES}: {exc.about(text)}") from None


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
            max_upload_mb=whole(os.environ.get(ENV_MAX_UPLOAD_MB) or str(DEFAULT_MAX_UPLOAD_MB),
                                1, MAX_UPLOAD_MB),  # as `stepscope dashboard` checked it
        )
