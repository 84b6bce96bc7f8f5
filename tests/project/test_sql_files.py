"""SQL in one place: every query lives in a domain folder of analyzers/sql/ or ingest/sql/
with a header comment. Python holds no query text but one statement:
ingest.db.delete_run_rows, whose table names come from the owned-tables registry
stepscope_tables (a name cannot be a query parameter, and DuckDB has no relational
delete), quoted with ingest.db.quote_identifier."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from conftest import REPO

PACKAGES = ("analyzers", "dashboard", "stepscope", "ingest")
KEYWORDS = ("SELECT ", "WITH ", "INSERT ", "UPDATE ", "DELETE ", "CREATE ")
QUOTERS = {"quote_identifier", "q"}
SQL_FOLDERS = ["analyzers/sql", "ingest/sql"]
SQL_NAME = re.compile(r"[a-z_]+/[a-z0-9_]+\.sql")


def _python_files() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py"))


def _is_query(text: str) -> bool:
    text = text.strip()
    return text.upper().startswith(KEYWORDS) and text[:6].isupper()


def _quotes_a_name(node: ast.JoinedStr) -> bool:
    """An f-string whose only interpolations are quoted identifiers."""
    values = [v.value for v in node.values if isinstance(v, ast.FormattedValue)]
    return bool(values) and all(
        isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id in QUOTERS
        for v in values)


def _queries_in(path: Path, root: Path = REPO) -> list[str]:
    """Query text in string literals of one module (docstrings left out), as file:line."""
    tree = ast.parse(path.read_text())
    skip = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef))
            and n.body and isinstance(n.body[0], ast.Expr)}
    # an f-string is judged as a whole, not again by its constant parts
    skip |= {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            head = node.values[0] if node.values else None
            if (isinstance(head, ast.Constant) and isinstance(head.value, str)
                    and _is_query(head.value) and not _quotes_a_name(node)):
                found.append(f"{path.relative_to(root)}:{node.lineno}")
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and id(node) not in skip and _is_query(node.value)):
            found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_no_query_text_in_python() -> None:
    found = [hit for path in _python_files() for hit in _queries_in(path)]
    assert found == [], "move these queries into analyzers/sql or ingest/sql: " + ", ".join(found)


def test_one_statement_is_built_from_a_quoted_name() -> None:
    """Quoted names are allowed in exactly one place, so a new one is a decision."""
    quoted = [f"{path.relative_to(REPO)}:{node.lineno}" for path in _python_files()
              for node in ast.walk(ast.parse(path.read_text()))
              if isinstance(node, ast.JoinedStr) and _quotes_a_name(node)]
    assert len(quoted) == 1 and quoted[0].startswith("ingest/db.py:"), quoted


def test_the_check_finds_what_it_must(tmp_path: Path) -> None:
    """The scan flags a plain query and an f-string splicing a value, not a quoted name,
    a docstring or prose."""
    module = tmp_path / "probe.py"
    module.write_text('"""SELECT in a docstring."""\nX = "SELECT 1 FROM runs"\n'
                      'Y = "Delete run"\n'
                      'def f(t, v):\n    return f"DELETE FROM {q(t)} WHERE run = $run", '
                      'f"SELECT * FROM runs WHERE run = {v}"\n')
    assert _queries_in(module, tmp_path) == ["probe.py:2", "probe.py:5"]


@pytest.mark.parametrize("folder", SQL_FOLDERS)
def test_every_sql_file_has_a_header(folder: str) -> None:
    files = sorted((REPO / folder).rglob("*.sql"))
    assert files
    missing = [f.name for f in files if not f.read_text().lstrip().startswith("--")]
    assert missing == [], f"{folder}: files without a header comment: {missing}"


@pytest.mark.parametrize("folder", SQL_FOLDERS)
def test_sql_files_are_grouped_by_domain(folder: str) -> None:
    """Every query sits in a domain folder (nccl/, hang/, history/, ...), one level deep,
    and is named by that path (`sql("nccl/rings.sql")`)."""
    files = [f.relative_to(REPO / folder) for f in (REPO / folder).rglob("*.sql")]
    assert [f for f in files if len(f.parts) != 2] == []


def _sql_names_in(path: Path) -> list[tuple[int, str]]:
    """(line, name) of every string literal in a module that names a SQL file."""
    return [(node.lineno, node.value) for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and SQL_NAME.fullmatch(node.value)]


def test_every_named_sql_file_exists() -> None:
    """A domain-qualified name in a layer's Python ('nccl/rings.sql') is a file of that
    layer's sql/ folder (analyzers/sql for the analyzers, ingest/sql for the ingest)."""
    missing = [f"{path.relative_to(REPO)}:{line}: {name}"
               for layer in ("analyzers", "ingest") for path in (REPO / layer).rglob("*.py")
               for line, name in _sql_names_in(path)
               if not (REPO / layer / "sql" / name).is_file()]
    assert missing == []


def test_every_sql_file_is_used() -> None:
    """No orphan queries: each file is named by some module of its layer."""
    for layer in ("analyzers", "ingest"):
        named = {name for path in (REPO / layer).rglob("*.py") for _, name in _sql_names_in(path)}
        files = {f.relative_to(REPO / layer / "sql").as_posix()
                 for f in (REPO / layer / "sql").rglob("*.sql")}
        assert files - named == set(), layer
