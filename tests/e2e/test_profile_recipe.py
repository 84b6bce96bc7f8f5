"""The README's profiling recipe works: its Python block, run as it is on a tiny CPU
model (one rank), writes a trace that stepscope ingests with what the recipe promises:
the 3 active steps, the op shapes (record_shapes) and the memory events (profile_memory),
under a file name that carries the rank. Skipped only where torch (the optional extra) is
not installed."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest
from conftest import REPO

import stepscope

RECIPE = re.compile(r"<!-- recipe:[^\n]*-->\n```python\n(.*?)```", re.S)


def recipe() -> str:
    """The README's recipe block, exactly as a reader copies it."""
    found = RECIPE.search((REPO / "README.md").read_text())
    assert found is not None, "README.md has no recipe block"
    return found.group(1)


def test_the_readme_has_the_settings_the_recipe_promises() -> None:
    code = recipe()
    for setting in ("record_shapes=True", "profile_memory=True", "schedule(wait=1, warmup=1, "
                    "active=3", "prof.step()", 'f"rank{rank}.json.gz"'):
        assert setting in code, setting


@pytest.mark.slow
def test_the_recipe_runs_and_its_trace_ingests(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 8))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def train_step() -> None:
        optimizer.zero_grad()
        model(torch.randn(16, 64)).pow(2).mean().backward()
        optimizer.step()

    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("TRACE_DIR", str(tmp_path / "traces"))
    exec(compile(recipe(), "README.md recipe", "exec"), {"train_step": train_step})
    written = sorted(p.name for p in (tmp_path / "traces").iterdir())
    assert written == ["rank3.json.gz"]

    db = tmp_path / "r.duckdb"
    result = stepscope.ingest_run([tmp_path / "traces"], db=db, run="recipe", jobs=1)
    assert not result.failures
    con = duckdb.connect(str(db), read_only=True)
    try:
        def one(query: str) -> object:
            return con.execute(query).fetchone()[0]  # type: ignore[index]
        assert one("SELECT list(DISTINCT rank) FROM ranks WHERE run = 'recipe'") == [3]
        assert one("SELECT rank_source FROM ranks WHERE run = 'recipe'") == "file_name"
        assert one("SELECT count(DISTINCT step) FROM steps WHERE run = 'recipe'") == 3
        assert one("SELECT count(*) FROM cpu_ops WHERE run = 'recipe' AND name = 'aten::addmm'"
                   " AND input_dims IS NOT NULL") >= 6  # type: ignore[operator]
        assert one("SELECT count(*) FROM memory_events WHERE run = 'recipe'") > 0  # type: ignore[operator]
    finally:
        con.close()


def test_the_readme_reads_in_a_new_users_order() -> None:
    """Quick start, then how to profile your own job, then what you get (a real output and
    a screenshot that exists), then the commands; the details live in docs/cli.md."""
    text = (REPO / "README.md").read_text()
    heads = re.findall(r"^## (.+)$", text, re.M)
    order = ["Quick start", "Profile your job", "What you get", "The commands"]
    assert heads[:4] == order, heads
    shot = re.search(r"!\[[^]]*\]\((docs/img/[^)]+\.png)\)", text)
    assert shot is not None and (REPO / shot.group(1)).is_file()
    assert (REPO / "docs" / "cli.md").is_file() and "docs/cli.md" in text
    opening = text[:text.index("## Quick start")]
    assert len(opening.split()) < 80, len(opening.split())
