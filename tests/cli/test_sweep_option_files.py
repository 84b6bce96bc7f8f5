"""Hostile `--model` specs (JSON and YAML) through every command that reads one (issue 43,
the pre-audit sweep): a field written twice, deep nesting, huge numbers, YAML tags,
several documents, a NUL, booleans and dates for numbers. Each is refused before any work
with exit 2 and one line that names the file and the problem, in bounded time.

First run, before this branch: a field written twice (`n_params: 1e9` then `n_params:
7e9`, in JSON or YAML) was taken in silence, the last value winning (exit 0, an MFU from
7e9 parameters); `--comm-kernels` refused the same already. The others were refused.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from audit8_inputs import cli, raw_controls

SPEC = {"n_params": "1e9", "n_layers": "12", "hidden": "768", "seq_len": "1024",
        "global_batch_tokens": "1e6"}


def _json(extra: str = "", **changed: str) -> str:
    fields = {**SPEC, **changed}
    return "{" + ", ".join(f'"{k}": {v}' for k, v in fields.items()) + extra + "}"


def _yaml(extra: str = "", **changed: str) -> str:
    fields = {**SPEC, **changed}
    return "".join(f"{k}: {v}\n" for k, v in fields.items()) + extra


# file name -> (content, what the one line says after "error: FILE: ")
SPECS: dict[str, tuple[str, str]] = {
    "twice.json": (_json(', "n_params": 7e9'),
                   "not valid JSON (the key 'n_params' appears twice in one object; keep one)"),
    "twice_nested.json": (_json(', "x": {"a": 1, "a": 2}'),
                          "not valid JSON (the key 'a' appears twice in one object"),
    "twice.yaml": (_yaml("n_params: 7e9\n"),
                   "the key 'n_params' appears twice in one mapping; keep one (line 6)"),
    "twice_quoted.yml": (_yaml("'hidden': 1024\n"), "the key 'hidden' appears twice"),
    "deep.json": ("[" * 100_000 + "]" * 100_000, "not valid JSON (maximum recursion depth"),
    "deep.yaml": ("[" * 100_000 + "]" * 100_000, "not valid YAML (maximum recursion depth"),
    "digits.json": (_json(n_params="1" + "0" * 5000), "not valid JSON (Exceeds the limit"),
    "huge_exponent.json": (_json(n_params="1e999999999"),
                           "n_params must be a finite number, not inf"),
    "tag.yaml": ("!!python/object/apply:os.system ['true']\n",
                 "not valid YAML (could not determine a constructor"),
    "two_documents.yaml": (_yaml("---\na: 1\n"), "not valid YAML (expected a single document"),
    "nul.json": (_json() + "\x00", "not valid JSON (Extra data"),
    "bool.yaml": (_yaml(hidden="yes"), "hidden must be a number, not True"),
    "date.yaml": (_yaml(n_params="2001-12-14"), "n_params must be a number, not datetime"),
    "escape_key.json": (_json(', "\\u001b[2Jx": 1'), "unknown field(s) \\x1b[2Jx"),
    "list.json": ("[1, 2]", "the model spec must be a mapping of fields"),
}
COMMANDS = {
    "report": ("report", "nope", "--db", "{db}"),
    "diff": ("diff", "nope", "nope2", "--db", "{db}"),
    "plan": ("plan", "--from", "nope", "--db", "{db}"),
    "nightly": ("nightly", "{root}/missing", "--job", "j", "--db", "{db}", "--out-dir",
                "{root}/n"),
}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("sweep_specs")
    for name, (text, _) in SPECS.items():
        (base / name).write_text(text, encoding="utf-8")
    return base


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("spec", SPECS)
def test_hostile_model_spec_is_one_line(root: Path, spec: str, command: str) -> None:
    argv = tuple(a.format(root=root, db=root / "db.duckdb") for a in COMMANDS[command])
    started = time.process_time()
    rc, err, out = cli((*argv, "--model", str(root / spec)))
    assert time.process_time() - started < 10
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith(f"error: {root / spec}: {SPECS[spec][1]}"), err
    assert not raw_controls(err[0]) and not out
    assert not (root / "db.duckdb").exists() and not (root / "n").exists()


def test_one_value_per_field_still_reads(root: Path) -> None:
    from stepscope.analyzers.flops.model_spec import load_spec

    for name, text in (("ok.json", _json()), ("ok.yaml", _yaml())):
        (root / name).write_text(text)
        spec = load_spec(root / name)
        assert (spec.n_params, spec.n_layers, spec.hidden) == (1e9, 12, 768)
