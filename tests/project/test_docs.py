"""The docs say what the code does: the README's usage lines match each command's
`--help`, and docs/schema.md lists exactly the tables and columns of a freshly ingested
database."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest
from conftest import REPO

import stepscope
from stepscope.cli import build_parser
from stepscope.commands import COMMANDS

USAGE = re.compile(r"(?<!`)`(stepscope ([a-z]+) [^`]*\[[^`]*)`(?!`)")
OPTION = re.compile(r"--[a-z][a-z0-9-]*")
HEADING = re.compile(r"^#{2,4} `([a-z_]+)`", re.M)
ROW = re.compile(r"^\| ([a-z_][a-z0-9_, ]*) \|", re.M)
PROSE_COLUMNS = re.compile(r"^`([a-z_, ]+)`", re.M)


def readme_usages() -> dict[str, str]:
    """The usage synopsis of each command in README.md (the longest if several)."""
    out: dict[str, str] = {}
    for match in USAGE.finditer((REPO / "README.md").read_text()):
        usage, command = " ".join(match.group(1).split()), match.group(2)
        if len(usage) > len(out.get(command, "")):
            out[command] = usage
    return out


def subparsers() -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in build_parser()._actions
                 if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def help_words(parser: argparse.ArgumentParser) -> tuple[set[str], list[str]]:
    """(long options, positional metavars) that `--help` shows."""
    options = {o for a in parser._actions for o in a.option_strings
               if o.startswith("--") and o != "--help"}
    positionals = [str(a.metavar or a.dest) for a in parser._actions if not a.option_strings]
    return options, positionals


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_readme_usage_matches_help(command: str) -> None:
    usage = readme_usages().get(command)
    assert usage is not None, f"README.md has no usage line `stepscope {command} ...`"
    options, positionals = help_words(subparsers()[command])
    documented = set(OPTION.findall(usage))
    assert documented - options == set(), f"README documents options {command} lacks"
    assert options - documented == set(), f"README's usage of {command} misses options"
    for name in positionals:
        assert name.upper() in usage, f"README's usage of {command} misses {name}"


def documented_columns() -> dict[str, set[str]]:
    """Table (or view) -> columns, as docs/schema.md lists them."""
    text = (REPO / "docs" / "schema.md").read_text()
    heads = list(HEADING.finditer(text))
    out: dict[str, set[str]] = {}
    for head, nxt in zip(heads, [*heads[1:], None], strict=True):
        body = text[head.end():nxt.start() if nxt else len(text)]
        cells = [c for row in ROW.findall(body) if row.strip() not in ("column", "macro")
                 for c in row.split(",")]
        if not cells:  # a view described in prose: "`run, rank, step`: ..."
            prose = PROSE_COLUMNS.search(body)
            cells = prose.group(1).split(",") if prose else []
        if cells:
            out[head.group(1)] = {c.strip() for c in cells}
    return out


def test_schema_doc_lists_exactly_the_tables_and_columns(
        make_run: Callable[..., Path], tmp_path: Path) -> None:
    db = tmp_path / "fresh.duckdb"
    stepscope.ingest_run(make_run(world_size=2), db=db, run="fresh")
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute("SELECT table_name, column_name FROM duckdb_columns() "
                           "WHERE NOT internal AND schema_name = 'main'").fetchall()
    finally:
        con.close()
    actual: dict[str, set[str]] = {}
    for table, column in rows:
        actual.setdefault(table, set()).add(column)
    documented = documented_columns()
    assert set(documented) == set(actual), "tables in docs/schema.md vs the database"
    for table, columns in actual.items():
        assert documented[table] == columns, table


def test_nightly_docs_synopsis_matches_help() -> None:
    """docs/nightly.md's synopsis lacked --jobs and --comm-kernels."""
    text = (REPO / "docs" / "nightly.md").read_text()
    block = text[text.index("stepscope nightly PATH"):text.index("stepscope history JOB")]
    options, _ = help_words(subparsers()["nightly"])
    assert set(OPTION.findall(block)) == options
