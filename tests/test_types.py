"""The packages type-check (mypy, configured in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import REPO

pytest.importorskip("mypy", reason="mypy is part of the dev extra")


def test_mypy_is_clean() -> None:
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:]
