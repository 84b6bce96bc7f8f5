"""Packaging: every data file the packages read ships in the wheel (the README's usage
lines are checked against `--help` in test_docs.py)."""

from __future__ import annotations

import fnmatch
import tomllib

from conftest import REPO


def test_package_data_covers_every_non_python_file() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    data = config["package-data"]
    for package in config["packages"]:
        root = REPO / package.replace(".", "/")
        for path in root.rglob("*"):
            if path.is_dir() or path.suffix in (".py", ".pyc") or "__pycache__" in path.parts:
                continue
            rel = path.relative_to(root).as_posix()
            globs = data.get(package, [])
            assert any(fnmatch.fnmatch(rel, g) for g in globs), f"{package}: {rel} not shipped"


def test_every_package_folder_is_in_the_wheel() -> None:
    """pyproject.toml lists the packages by hand (the layers are linked into stepscope/):
    every folder of a layer that holds an __init__.py is listed, and nothing else."""
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    found = {"stepscope", "stepscope.commands"} | {
        "stepscope." + ".".join(init.parent.relative_to(REPO).parts)
        for layer in ("ingest", "analyzers", "dashboard")
        for init in (REPO / layer).rglob("__init__.py")}
    assert listed == found
