"""Helpers for the dashboard tests: a fixture database and an AppTest on it."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

REPO = Path(__file__).resolve().parent.parent
APP = REPO / "dashboard" / "app" / "main.py"
SIMULATED = REPO / "sample_traces" / "simulated"
CPU = REPO / "sample_traces" / "cpu"


def app_test(monkeypatch: pytest.MonkeyPatch, db: Path, page: str | None = None,
             run: str | None = None, **env: str) -> AppTest:
    """An AppTest of the dashboard on `db`, arriving on `page` / `run` as a deep link."""
    monkeypatch.setenv("STEPSCOPE_DB", str(db))
    monkeypatch.delenv("STEPSCOPE_TRACES_ROOT", raising=False)
    monkeypatch.delenv("STEPSCOPE_MAX_UPLOAD_MB", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    at = AppTest.from_file(str(APP), default_timeout=120)
    if page:
        at.query_params["page"] = page
    if run:
        at.query_params["run"] = run
    return at


def texts(at: AppTest) -> str:
    """Every markdown, caption, metric, alert and header text of the page, joined."""
    parts: list[str] = []
    for kind in ("markdown", "caption", "header", "subheader", "title", "success", "info",
                 "warning", "error"):
        parts += [str(e.value) for e in getattr(at, kind)]
    parts += [f"{m.label}: {m.value}" for m in at.metric]
    return "\n".join(parts)


def no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    internal = [e.value for e in at.error if "Internal error" in str(e.value)]
    assert not internal, internal


def button(at: AppTest, key: str) -> Any:
    return next(b for b in at.button if b.key == key)


def tar_gz(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tf.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def upload(at: AppTest, files: list[tuple[str, bytes]], run: str | None = None) -> None:
    at.file_uploader(key="upload_files").set_value(
        [(name, content, "application/octet-stream") for name, content in files])
    at.run()
    if run is not None:
        next(t for t in at.text_input if t.label == "Run name").set_value(run)
        at.run()
    button(at, "ingest_uploads").click()
    at.run()
