"""The layers' imports, read from the source (README "Architecture"): dependencies point
one way, stepscope -> dashboard -> analyzers -> ingest; no two modules import each other
at module level, even for type checking only; the renderers import no Streamlit, plotly
or database."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from conftest import REPO

# lowest first; the top layer is the stepscope package itself (CLI and Python API)
LAYERS = ("ingest", "analyzers", "dashboard", "stepscope")


def _modules() -> dict[str, Path]:
    """Every module of the code by import name (stepscope.analyzers.flops.mfu -> its file)."""
    out = {}
    for layer in LAYERS:
        for path in (REPO / layer).rglob("*.py"):  # rglob does not follow stepscope/'s links
            parts = path.relative_to(REPO).with_suffix("").parts
            name = ".".join(parts if layer == "stepscope" else ("stepscope", *parts))
            out[name.removesuffix(".__init__")] = path
    return out


MODULES = _modules()


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements run at import (and those under `if TYPE_CHECKING:`), not the ones
    inside functions, which import lazily on purpose."""
    for node in body:
        if isinstance(node, ast.If):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            yield from _top_level(node.body)
        else:
            yield node


def _imported(path: Path, everywhere: bool) -> set[str]:
    """Absolute import names of a file: `from a.b import c` gives a.b.c when that is a
    module, else a.b."""
    tree = ast.parse(path.read_text())
    nodes = ast.walk(tree) if everywhere else _top_level(tree.body)
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES
                      else node.module for a in node.names}
    return names


def _layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS[:3] else 3


def test_dependencies_point_down_the_layers() -> None:
    upward = sorted(f"{name} imports {dep}" for name, path in MODULES.items()
                    for dep in _imported(path, everywhere=True)
                    if dep.startswith("stepscope.") and _layer(dep) > _layer(name))
    assert upward == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            if component:
                found.append(sorted([v, *component]))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_between_modules() -> None:
    """E.g. the run context carries the model spec and the MFU analyzer reads the context:
    the spec has its own module (analyzers/flops/model_spec.py) so the two do not import
    each other."""
    graph = {name: {d for d in _imported(path, everywhere=False) if d in MODULES} - {name}
             for name, path in MODULES.items()}
    assert _cycles(graph) == []
    assert _cycles({"a": {"b"}, "b": {"c", "a"}, "c": set()}) == [["a", "b"]]  # it finds one


def test_the_renderers_need_no_app_and_no_database() -> None:
    render = {n: p for n, p in MODULES.items() if n.startswith("stepscope.dashboard.render")}
    assert "stepscope.dashboard.render.html_report" in render
    heavy = sorted(f"{name} imports {dep}" for name, path in render.items()
                   for dep in _imported(path, everywhere=True)
                   if dep.split(".")[0] in ("streamlit", "plotly", "duckdb")
                   or dep.startswith("stepscope.dashboard.")
                   and not dep.startswith("stepscope.dashboard.render"))
    assert heavy == []


def test_exit_codes_are_defined_once() -> None:
    """ingest/exit_codes.py holds them; every other module imports them."""
    defined = sorted(f"{name}: {target.id}" for name, path in MODULES.items()
                     for node in _top_level(ast.parse(path.read_text()).body)
                     if isinstance(node, ast.Assign)
                     for target in ast.walk(node) if isinstance(target, ast.Name)
                     and isinstance(target.ctx, ast.Store) and target.id.startswith("EXIT_"))
    assert defined and all(d.startswith("stepscope.ingest.exit_codes: ") for d in defined)


def test_the_cli_module_loads_no_heavy_dependency() -> None:
    """`stepscope.cli` imports its exit codes from the ingest package, which loads DuckDB
    and the readers only on first use: a Ctrl-C while Python starts stays one line."""
    code = ("import sys, stepscope.cli; print(sorted({m.split('.')[0] for m in sys.modules}"
            " & {'duckdb', 'polars', 'pyarrow', 'msgspec', 'numpy', 'streamlit', 'plotly'}))")
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True,
                         check=True, cwd=REPO).stdout
    assert out.strip() == "[]"
