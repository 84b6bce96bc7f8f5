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


# ------------------------------------------------------------------ every synopsis, every page
BLOCK_USAGE = re.compile(r"^(stepscope ([a-z]+) .*\[.*(?:\n {4,}\S.*)*)", re.M)
VALUES = re.compile(r"^[A-Za-z0-9:/.-]+(?:\|[A-Za-z0-9:/.-]+)+$")


def doc_usages() -> list[tuple[str, str, str]]:
    """(page, command, synopsis) of every synopsis in README.md and docs/*.md: inline
    (`stepscope CMD ... [...]`, table cells unescaped) and in code blocks (a line
    `stepscope CMD ... [...]` and its indented continuation lines)."""
    out = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = page.read_text().replace("\\|", "|")
        found = [(m.group(1), m.group(2)) for m in USAGE.finditer(text)]
        for block in re.findall(r"^```[a-z]*\n(.*?)^```", text, re.M | re.S):
            found += [(m.group(1), m.group(2)) for m in BLOCK_USAGE.finditer(block)]
        out += [(page.name, command, " ".join(usage.split())) for usage, command in found
                if command in COMMANDS]
    return out


def option_values(usage: str, option: str) -> list[str] | None:
    """The values a synopsis lists for `option` (`--format md|json|html` -> [md, json,
    html]), or None when it names a placeholder (`--dtype D`) or no value."""
    match = re.search(rf"{option}[ =]([^\s\]]+)", usage)
    if match is None or not VALUES.match(match.group(1)):
        return None
    return match.group(1).split("|")


def test_every_synopsis_matches_help() -> None:
    """Each command's synopsis on every page (README, docs/cli.md, its own page) names only
    options its --help has, and an option with fixed values lists exactly those, its
    default first: README had report `--format json|md|html` (default md) and plan
    `--dtype D`, which reads as report's five dtypes where plan takes bf16, fp16, fp32.
    README and docs/cli.md, the full references, name every option."""
    parsers = subparsers()
    usages = doc_usages()
    assert {c for p, c, _ in usages if p == "cli.md"} == set(COMMANDS)
    for page, command, usage in usages:
        options, _ = help_words(parsers[command])
        where = f"{page}: stepscope {command}"
        assert set(OPTION.findall(usage)) <= options, f"{where} names options --help lacks"
        if page in ("README.md", "cli.md"):
            assert options <= set(OPTION.findall(usage)), f"{where} misses options"
        for action in parsers[command]._actions:
            long = [o for o in action.option_strings if o.startswith("--")]
            if not action.choices or not long or long[0] not in usage:
                continue
            values = option_values(usage, long[0])
            assert values is not None, f"{where}: {long[0]} without its values"
            assert set(values) == {str(c) for c in action.choices}, f"{where}: {long[0]}"
            if action.default in action.choices:
                assert values[0] == action.default, f"{where}: {long[0]}'s default first"


def _help(command: str, option: str) -> str:
    (action,) = [a for a in subparsers()[command]._actions
                 if option in a.option_strings or a.metavar == option]
    return " ".join(str(action.help).split())


def test_help_and_docs_say_the_same_defaults() -> None:
    """What --help and the docs disagreed on: `.tar` archives (ingest reads them, --help
    left them out), $STEPSCOPE_JOBS (the --jobs default, missing in the docs and in
    nightly's --help), the --format defaults (in no --help) and the fingerprint in the
    nightly run name (docs only)."""
    from stepscope.ingest.sources import ARCHIVE_SUFFIXES

    readme, cli = (REPO / "README.md").read_text(), (REPO / "docs" / "cli.md").read_text()
    for suffix in ARCHIVE_SUFFIXES:
        assert suffix + ")" in _help("ingest", "PATH") or suffix + "," in _help("ingest", "PATH")
        assert f"`{suffix}`" in readme and f"`{suffix}`" in cli, suffix
    for command in ("ingest", "nightly"):
        assert "(default: $STEPSCOPE_JOBS" in _help(command, "--jobs"), command
    assert "`--jobs N` worker processes run them (default: `$STEPSCOPE_JOBS`" in cli
    for command, parser in subparsers().items():
        for action in parser._actions:
            if "--format" in action.option_strings:
                assert f"default: {action.default}" in str(action.help), command
    assert "<fingerprint of their content>" in _help("nightly", "--run")
    nightly = (REPO / "docs" / "nightly.md").read_text()
    assert "`NAME-<start>-<content>`" in nightly and "a fingerprint" in nightly
