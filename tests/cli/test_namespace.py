"""One import name: `pip install .` installs only `stepscope` (the layers are
stepscope.ingest / .analyzers / .dashboard), and nothing in the folder a user starts the
CLI from, nor another distribution's `dashboard` or `analyzers` package, can shadow the
code the CLI or its worker processes run."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, SIM

from stepscope.ingest.executors import death_reason, worker_command

pytestmark = pytest.mark.slow  # pip-installs the checkout

LAYERS = ("ingest", "analyzers", "dashboard")
HOSTILE = "raise SystemExit('a module of the current folder was imported: {name}')\n"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A non-editable install of the checkout into its own folder, where two packages of
    other distributions named `dashboard` and `analyzers` were installed first."""
    site = tmp_path_factory.mktemp("site")
    # from a copy, so pip's in-tree build leaves no build/ folder in the checkout
    source = tmp_path_factory.mktemp("source") / "stepscope"
    shutil.copytree(REPO, source, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "*.egg-info", "__pycache__", "sample_traces", "tests",
        "benchmarks", "*.duckdb"))
    for name in ("dashboard", "analyzers"):
        (site / name).mkdir()
        (site / name / "__init__.py").write_text(f"OTHER_DISTRIBUTION = {name!r}\n")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(site), str(source)], check=True, capture_output=True)
    return site


def test_the_wheel_installs_one_top_level_name_beside_other_packages(installed: Path) -> None:
    new = {p.name for p in installed.iterdir()} - {"dashboard", "analyzers"}
    assert {n for n in new if not n.endswith(".dist-info")} == {"bin", "stepscope"}
    for name in ("dashboard", "analyzers"):  # the other distributions' files are untouched
        assert [p.name for p in (installed / name).iterdir()] == ["__init__.py"]
        assert "OTHER_DISTRIBUTION" in (installed / name / "__init__.py").read_text()
    for layer in LAYERS:  # the wheel holds real files, not the checkout's links
        package = installed / "stepscope" / layer
        assert not package.is_symlink() and (package / "__init__.py").is_file()
    assert (installed / "stepscope" / "ingest" / "sql" / "schema" / "core.sql").is_file()
    assert (installed / "stepscope" / "analyzers" / "data" / "peaks.json").is_file()


def _hostile_folder(root: Path) -> Path:
    """A folder holding modules named like the standard library's and like our layers."""
    folder = root / "work"
    (folder / "dashboard").mkdir(parents=True)
    for name in ("inspect", "json", "ingest", "analyzers"):
        (folder / f"{name}.py").write_text(HOSTILE.format(name=name))
    (folder / "dashboard" / "__init__.py").write_text(HOSTILE.format(name="dashboard"))
    return folder


def test_a_multi_rank_ingest_from_a_folder_that_shadows_module_names(
        installed: Path, tmp_path: Path) -> None:
    """The installed CLI, started from that folder, ingests an 8-rank job in worker
    processes and reports on it; the same report twice."""
    cwd = _hostile_folder(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(installed)}
    env.pop("STEPSCOPE_JOBS", None)
    cli = [sys.executable, str(installed / "bin" / "stepscope")]
    done = subprocess.run([*cli, "ingest", str(SIM / "healthy"), "--db", "s.duckdb",
                           "--executor", "process", "--jobs", "2", "--run", "job"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "8 rank" in done.stdout + done.stderr
    reports = [subprocess.run([*cli, "report", "job", "--db", "s.duckdb", "--format", "json"],
                              cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
               for _ in range(2)]
    assert [r.returncode for r in reports] == [0, 0], reports[0].stderr
    assert reports[0].stdout == reports[1].stdout
    assert '"world_size": 8' in reports[0].stdout


def test_the_worker_never_imports_from_the_current_folder(tmp_path: Path) -> None:
    cwd = _hostile_folder(tmp_path)
    done = subprocess.run([*worker_command()], cwd=cwd, input=b"", capture_output=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert worker_command()[1] == "-P"


def test_a_dead_worker_says_why() -> None:
    stderr = ("Traceback (most recent call last):\n  File \"x.py\", line 1\n"
              "ModuleNotFoundError: No module named 'duckdb'\n")
    assert death_reason(1, stderr) == (
        "exit code 1: \"ModuleNotFoundError: No module named 'duckdb'\"")
    assert death_reason(-9, "") == "killed by SIGKILL, with nothing on stderr: out of memory?"
    assert death_reason(-15, "") == "killed by SIGTERM"
    assert death_reason(3, "") == "exit code 3"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree)
              if isinstance(n, ast.ImportFrom) and n.module and n.level == 0}
    return names


def test_code_imports_the_layers_only_through_the_stepscope_namespace() -> None:
    """A bare `import ingest` would work in a checkout (the folder is on sys.path) and
    load a second copy of the module; in an install it fails. (rglob does not follow
    the links, so each file is read once.)"""
    roots = [*LAYERS, "stepscope", "tests", "benchmarks", "sample_traces"]
    bare = sorted(f"{p.relative_to(REPO)}: {name}"
                  for root in roots for p in (REPO / root).rglob("*.py")
                  for name in _imports(p) if name.split(".")[0] in LAYERS)
    assert bare == []


def test_the_checkout_links_each_layer_into_the_namespace() -> None:
    for layer in LAYERS:
        link = REPO / "stepscope" / layer
        assert link.is_symlink() and os.readlink(link) == f"../{layer}"
