"""The sample-trace generator really produces ingestible 4-rank traces (needs torch)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from stepscope.ingest import ingest

pytest.importorskip("torch", reason="torch is the optional `torch` extra")


def test_generator_writes_a_fresh_ingestible_run(tmp_path: Path) -> None:
    out = tmp_path / "gen"
    proc = subprocess.run(
        [sys.executable, str(REPO / "sample_traces" / "generate_cpu.py"),
         "--out", str(out), "--variants", "straggler", "--steps", "2"],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run_dir = out / "straggler"
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "rank0.json.gz", "rank1.json.gz", "rank2.json.gz", "rank3.json.gz", "variant.json"]
    facts = json.loads((run_dir / "variant.json").read_text())
    assert facts["straggler_rank"] == 2 and facts["profiled_steps"] == 2
    result = ingest([run_dir], db=tmp_path / "g.duckdb")
    assert sorted(result.ranks) == [0, 1, 2, 3] and result.exit_code == 0
    assert not any(p.name.startswith(".") for p in out.iterdir())


def test_generator_rejects_unknown_variant() -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "sample_traces" / "generate_cpu.py"), "--variants", "nope"],
        capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "unknown variant(s) nope" in proc.stderr
