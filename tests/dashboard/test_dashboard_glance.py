"""Read at a glance (issue 45, point 9), through streamlit's AppTest on the bundled runs:
controls open on what the report names, no 'None' or '(?)' printed as a value, labels that
say a thing once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dashboard_helpers import SIMULATED, app_test, no_exception

pytestmark = pytest.mark.slow  # renders pages of ingested runs


def test_whatif_opens_on_the_straggler(monkeypatch: pytest.MonkeyPatch, sample_db: Path) -> None:
    """The simulator slowed rank 3 of `straggler` (ground truth); the what-if's rank
    control opens on it, not on rank 0."""
    truth = json.loads((SIMULATED / "straggler" / "ground_truth.json").read_text())
    at = app_test(monkeypatch, sample_db, page="critical_path", run="straggler")
    at.run()
    no_exception(at)
    rank = next(s for s in at.selectbox if s.key == "cp_rank")
    assert rank.value == truth["config"]["slow_rank"] == 3


def test_op_kinds_name_their_dtype_once(monkeypatch: pytest.MonkeyPatch, sample_db: Path) -> None:
    """The roofline's op kinds read 'GEMMs (bf16)', not 'GEMMs (bf16) bf16'; shapes and
    kernels, whose names do not say it, still get it."""
    at = app_test(monkeypatch, sample_db, page="roofline", run="moe_roofline")
    at.run()
    no_exception(at)
    kinds = next(d.value for d in at.dataframe if "op kind" in d.value.columns)["op kind"]
    assert "GEMMs (bf16)" in kinds.to_list()
    assert all(name.count("bf16") <= 1 for name in kinds), kinds.to_list()
    shapes = next(d.value for d in at.dataframe if "M x N x K" in d.value.columns)["M x N x K"]
    assert all(name.endswith(" bf16") for name in shapes), shapes.to_list()
