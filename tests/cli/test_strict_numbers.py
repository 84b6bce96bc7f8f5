"""One grammar of numbers, everywhere (issue 43; docs/cli.md "Numbers").

Every numeric option of every command, found by walking the parser as
test_option_matrix.py does, gets the spellings Python's int() and float() read but no
option documents: a '+', a space before, a newline after, a '_', full-width and
Arabic-Indic digits, '-0', and a value past any range. Each must end in one usage error
(exit 2) that names the option. Every numeric STEPSCOPE_* variable gets them too, under a
command that reads it, and must be refused naming the variable; a new STEPSCOPE_*
variable in the sources fails test_every_variable_is_classified until it is listed
here. The grammar itself (ingest/number_text.py) is pinned on what stays legal: '16 G',
7e9, .5, a list's '0, 1'.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
from test_option_matrix import (  # the matrix's parser walk, base lines and sandbox
    BASE,
    _argv,
    _check,
    _kind,
    _run,
    _subparsers,
    _variables,
    sandbox,
)

from stepscope.ingest import number_text
from stepscope.ingest.number_text import NumberTextError
from stepscope.validate import integer

__all__ = ["sandbox"]  # the fixture, used by the tests below

HOSTILE = {
    "plus": "+2",
    "leading space": " 2",
    "trailing newline": "2\n",
    "underscore": "2_0",
    "full-width": "\uff12",
    "Arabic-Indic": "\u0662",
    "minus zero": "-0",
    "trailing space": "2 ",
    "huge": "9" * 40,
    "blank": "  ",
}
# Numeric variables and a command that reads each before any work; the others are named
# in NOT_NUMBERS. A new STEPSCOPE_* variable must be put in one of them.
NUMERIC_VARIABLES = {
    "STEPSCOPE_JOBS": "ingest",
    "STEPSCOPE_LOCK_WAIT": "summary",
    "STEPSCOPE_MEMORY_LIMIT": "report",
    "STEPSCOPE_MAX_TRACE_SIZE": "ingest",
    "STEPSCOPE_MAX_UPLOAD_MB": "dashboard",
    "STEPSCOPE_BUSY_RETRIES": "dashboard",
}
NOT_NUMBERS = {"STEPSCOPE_DB", "STEPSCOPE_TRACES_ROOT", "STEPSCOPE_DEBUG"}
# A variable's value: a size where the variable is one (a unit right after the number:
# '2G ', '+2G', ' 2G').
UNIT = {"STEPSCOPE_MEMORY_LIMIT": "GB", "STEPSCOPE_MAX_TRACE_SIZE": "G"}


def _numeric_options() -> list[Any]:
    cases = []
    for command, parser in _subparsers().items():
        for action in parser._actions:
            if _kind(action) != "number" and getattr(action.type, "__name__", "") != "_ranks":
                continue
            flag = (action.option_strings or [action.dest])[0]
            for label, value in HOSTILE.items():
                cases.append(pytest.param(command, action.dest, value,
                                          id=f"{command} {flag} {label}"))
    return cases


OPTION_CASES = _numeric_options()


def test_every_numeric_option_is_walked() -> None:
    """The walk finds the options issue 43 named, so a renamed type cannot empty it."""
    walked = {" ".join(p.id.split(" ")[:2]) for p in OPTION_CASES}
    for wanted in ("ingest --jobs", "plan --params", "history --last", "dashboard --port",
                   "ingest --max-trace-size", "whatif --rank", "nightly --keep",
                   "dashboard --max-upload-mb", "plan --gpus"):
        assert wanted in walked, wanted
    print(f"{len(OPTION_CASES)} option cases over {len(walked)} options")


@pytest.mark.parametrize(("command", "dest", "value"), OPTION_CASES)
def test_option_refuses(sandbox: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                        command: str, dest: str, value: str) -> None:
    """exit 2, one line, naming the option (not the base line's missing run)."""
    action = next(a for a in _subparsers()[command]._actions if a.dest == dest)
    rc, err, out = _run(sandbox, tmp_path, monkeypatch, _argv(command, action, value), None)
    errors = _check(rc, err, out)
    assert rc == 2 and action.option_strings[0] in errors[0], errors


def test_every_variable_is_classified() -> None:
    """Each STEPSCOPE_* name the sources read is a number checked here, or named as no
    number."""
    assert set(_variables()) == set(NUMERIC_VARIABLES) | NOT_NUMBERS


@pytest.mark.parametrize("variable", sorted(NUMERIC_VARIABLES))
@pytest.mark.parametrize("label", sorted(HOSTILE))
def test_variable_refuses(sandbox: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                          variable: str, label: str) -> None:
    """exit 2, one line, naming the variable."""
    command = NUMERIC_VARIABLES[variable]
    hostile, unit = HOSTILE[label], UNIT.get(variable, "")
    value = hostile.replace("2", "2" + unit, 1) if "2" in hostile else hostile + unit
    rc, err, out = _run(sandbox, tmp_path, monkeypatch, BASE[command], {variable: value})
    errors = _check(rc, err, out)
    assert rc == 2 and variable in errors[0], errors


@pytest.mark.parametrize("variable", sorted(NUMERIC_VARIABLES))
def test_empty_variable_is_unset(sandbox: Path, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    """An empty variable is unset: the base line fails on its own problem."""
    command = NUMERIC_VARIABLES[variable]
    rc, err, out = _run(sandbox, tmp_path, monkeypatch, BASE[command], {variable: ""})
    errors = _check(rc, err, out)
    assert variable not in errors[0], errors


LEGAL = [
    ("whole", "4096", 4096), ("whole", "0", 0),
    ("decimal", "7e9", 7e9), ("decimal", ".5", 0.5), ("decimal", "1e-3", 1e-3),
    ("decimal", "0.35", 0.35), ("size", "16 G", 16 << 30), ("size", "16G", 16 << 30),
    ("size", "1.5GiB", 3 << 29), ("size", "500MB", 500 << 20), ("size", "1048576", 1 << 20),
]


@pytest.mark.parametrize(("kind", "text", "value"), LEGAL)
def test_legal_spellings(kind: str, text: str, value: float) -> None:
    read = {"whole": lambda t: number_text.whole(t, 0, 1 << 40),
            "decimal": lambda t: number_text.decimal(t, 0, 1e16),
            "size": lambda t: number_text.size(t, 1, 1 << 50)}[kind]
    assert read(text) == pytest.approx(value, rel=1e-12)


ILLEGAL = ["+2", " 2", "2 ", "2\n", "2_0", "\uff12", "\u0662", "-0", "", "nan", "inf",
           "1e400", "0x10", "2.", "16  G", "16G\n", " 16G", "\u0661G"]


@pytest.mark.parametrize("text", ILLEGAL)
def test_illegal_spellings(text: str) -> None:
    """Refused by every reader."""
    for read in (lambda t: number_text.whole(t, 0, 1 << 40),
                 lambda t: number_text.decimal(t, 0, 1e16),
                 lambda t: number_text.size(t, 1, 1 << 50)):
        with pytest.raises(NumberTextError):
            read(text)


def test_negative_only_where_the_range_has_them() -> None:
    assert number_text.decimal("-0.5", -1.0, 1.0) == -0.5
    for read in (lambda: number_text.decimal("-0", 0.0, 1.0, low_open=False),
                 lambda: number_text.whole("-0", 0, 3)):
        with pytest.raises(NumberTextError) as refused:
            read()
        assert refused.value.out_of_range and "out of range" in refused.value.about("-0")


def test_list_items() -> None:
    """Spaces around a comma belong to the list; anything else to an item."""
    assert number_text.list_items("0, 1 ,2") == ["0", "1", "2"]
    assert number_text.list_items("0,\n1") == ["0", "\n1"]


def test_argparse_names_the_option() -> None:
    parser = argparse.ArgumentParser(exit_on_error=False)
    parser.add_argument("--n", type=integer(1, 10))
    with pytest.raises(argparse.ArgumentError, match="not a whole number: '\\+2'"):
        parser.parse_args(["--n", "+2"])
