"""A fresh audit of issue 43's classes (session of 2026-12-05, after the lock wait, the
Ray stop and the --out trace guard): 30 command lines not held by the earlier audits,
each with the exit code the README's table promises and one line on stderr (no
traceback, no internal error, no raw escape code). First run: 29 of 30 (the --out onto a
trace of an earlier ingest replaced it, exit 0); all 30 since."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import cli_in_process as cli
from conftest import kineto_trace, write_trace


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    base = tmp_path_factory.mktemp("audit4")
    for r in range(2):
        write_trace(base / "t" / f"rank{r}.json.gz", kineto_trace(rank=r, world_size=2))
    (base / "gar.json.gz").write_bytes(gzip.compress(b"\x00\x01garbage"))
    (base / "empty").mkdir()
    (base / "dirmodel").mkdir()
    (base / "ck.json").write_text("[]")
    assert cli(("ingest", base / "t", "--db", base / "db.duckdb", "--run", "base",
                "--quiet"))[0] == 0
    yield base


D = "{db}"
T = "{t}"
CASES: dict[str, tuple[tuple[str, ...], dict[str, str] | None, int, int]] = {
    # name: (argv with {db} {t} {root}, env, exit code, error lines)
    "lock wait inf": (("ingest", T, "--db", D, "--run", "x", "--quiet"),
                      {"STEPSCOPE_LOCK_WAIT": "inf"}, 2, 1),
    # pinned as the default at first; refused since issue 43's one grammar of numbers
    # (docs/cli.md "Numbers": only an empty variable is unset)
    "lock wait blank is refused": (("ingest", T, "--db", D, "--run", "x2", "--quiet"),
                                   {"STEPSCOPE_LOCK_WAIT": " "}, 2, 1),
    "--db empty": (("report", "base", "--db", ""), None, 2, 1),
    "--stage-dir a file": (("ingest", T, "--db", D, "--run", "y", "--stage-dir",
                            "{root}/ck.json", "--quiet"), None, 2, 1),
    "ray port 0": (("ingest", T, "--db", D, "--executor", "ray:127.0.0.1:0"), None, 2, 1),
    "ray client port 99999": (("ingest", T, "--db", D, "--executor", "ray://h:99999"),
                              None, 2, 1),
    "ray colons": (("ingest", T, "--db", D, "--executor", "ray:::"), None, 2, 1),
    "--jobs 0": (("ingest", T, "--db", D, "--jobs", "0"), None, 2, 1),
    "--jobs -3": (("ingest", T, "--db", D, "--jobs", "-3"), None, 2, 1),
    "--max-trace-size -1": (("ingest", T, "--db", D, "--max-trace-size", "-1"), None, 2, 1),
    "--max-trace-size 12QB": (("ingest", T, "--db", D, "--max-trace-size", "12QB"), None, 2,
                              1),
    "garbage gzip alone": (("ingest", "{root}/gar.json.gz", "--db", D, "--run", "g",
                            "--quiet"), None, 1, 2),  # its line, then 'nothing ingested'
    "empty folder": (("ingest", "{root}/empty", "--db", D, "--run", "e", "--quiet"), None, 2,
                     1),
    "--model a folder": (("report", "base", "--db", D, "--model", "{root}/dirmodel"), None,
                         2, 1),
    "--comm-kernels a list": (("ingest", T, "--db", D, "--run", "c", "--comm-kernels",
                               "{root}/ck.json", "--quiet"), None, 2, 1),
    "run name with OSC": (("ingest", T, "--db", D, "--run", "run\x1b]0;pwned\x07",
                           "--quiet"), None, 2, 1),
    "unknown run": (("report", "nope", "--db", D), None, 2, 1),
    "db missing": (("report", "base", "--db", "{root}/missing.duckdb"), None, 2, 1),
    "db is a trace": (("report", "base", "--db", "{t}/rank0.json.gz"), None, 2, 1),
    "memory limit 0": (("report", "base", "--db", D), {"STEPSCOPE_MEMORY_LIMIT": "0"}, 2, 1),
    "memory limit -5MB": (("ingest", T, "--db", D, "--run", "m"),
                          {"STEPSCOPE_MEMORY_LIMIT": "-5MB"}, 2, 1),
    "--out in a missing folder": (("report", "base", "--db", D, "--out",
                                   "{root}/no/r.md"), None, 2, 1),
    "--out the db": (("report", "base", "--db", D, "--out", D), None, 2, 1),
    "--out a trace of the run": (("report", "base", "--db", D, "--out", "{t}/rank1.json.gz"),
                                 None, 2, 1),
    "nightly --run .. without --out-dir": (("nightly", T, "--db", D, "--job", "j", "--run",
                                            ".."), None, 2, 1),
    "nightly --job empty": (("nightly", T, "--db", D, "--job", "", "--out-dir",
                             "{root}/n"), None, 2, 1),
    "--step-marker with a tab": (("ingest", T, "--db", D, "--run", "s", "--step-marker",
                                  "a\tb"), None, 2, 1),
    "export --steps backwards": (("export", "base", "--db", D, "--out", "{root}/e.json",
                                  "--steps", "5-3"), None, 2, 1),
    "whatif --speedup 0": (("whatif", "base", "--db", D, "--rank", "0", "--speedup", "0"),
                           None, 2, 1),
    "whatif --speedup nan": (("whatif", "base", "--db", D, "--rank", "0", "--speedup",
                              "nan"), None, 2, 1),
}


@pytest.mark.parametrize("name", list(CASES))
def test_case(root: Path, name: str) -> None:
    argv, env, want_rc, want_lines = CASES[name]
    fill = {"db": str(root / "db.duckdb"), "t": str(root / "t"), "root": str(root)}
    rc, err = cli(tuple(a.format(**fill) if "{" in a else a for a in argv), env)
    errors = [x for x in err if not x.startswith(("warning:", "note:"))]
    assert rc == want_rc and len(errors) == want_lines, (rc, err)
    assert not any("Traceback" in x or "internal error" in x or "\x1b" in x for x in err), err
