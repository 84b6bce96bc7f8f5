"""Issue 43, writes outside their place: `report RUN --out FILE` replaced a trace of an
earlier ingest (exit 0, the gzip trace gone: the trace is no input of a report read from
the database, so the input guard did not see it). An existing compressed file, archive
or Kineto trace is now refused like a database (exit 2, one line, the file unchanged); a
report written before is still replaced."""

from __future__ import annotations

import contextlib
import io
import json
import zipfile
from pathlib import Path

import pytest
from conftest import kineto_trace, write_trace

from stepscope.cli import main


def cli(*argv: str | Path) -> tuple[int, list[str]]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        rc = main([str(a) for a in argv])
    return rc, err.getvalue().splitlines()


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("out")
    for r in range(2):
        write_trace(root / "t" / f"rank{r}.json.gz", kineto_trace(rank=r, world_size=2))
    db = root / "db.duckdb"
    assert cli("ingest", root / "t", "--db", db, "--run", "base", "--quiet")[0] == 0
    return root, db


def _zip(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("rank0.json", "{}")
    return path


@pytest.mark.parametrize(("name", "what"), [
    ("t/rank0.json.gz", "a gzip file (a trace?)"),
    ("traces.zip", "a zip archive"),
    ("rank9.json", "a Kineto trace"),
])
def test_report_out_onto_a_trace_or_archive_is_refused(ingested: tuple[Path, Path],
                                                       name: str, what: str) -> None:
    root, db = ingested
    target = root / name
    if name.endswith(".zip"):
        _zip(target)
    elif name == "rank9.json":
        target.write_text(json.dumps(kineto_trace(rank=9, world_size=10)))
    before = target.read_bytes()
    rc, err = cli("report", "base", "--db", db, "--out", target)
    assert rc == 2 and err == [f"error: --out {target}: is {what}; writing there would "
                               "destroy it. Choose another file"], err
    assert target.read_bytes() == before


def test_an_earlier_report_is_still_replaced(ingested: tuple[Path, Path]) -> None:
    root, db = ingested
    out = root / "report.json"
    assert cli("report", "base", "--db", db, "--format", "json", "--out", out)[0] == 0
    first = out.read_bytes()
    out.write_text('{"old": true}')
    rc, err = cli("report", "base", "--db", db, "--format", "json", "--out", out)
    assert rc == 0 and err == [], err
    assert out.read_bytes() == first


def test_an_earlier_export_is_still_replaced(ingested: tuple[Path, Path]) -> None:
    """`stepscope export` writes Chrome JSON with traceEvents: its own earlier file is
    replaced, not taken for someone's trace."""
    root, db = ingested
    out = root / "export.json"
    assert cli("export", "base", "--db", db, "--out", out)[0] == 0
    first = out.read_bytes()
    assert b'"traceEvents"' in first
    out.write_text('{"otherData":{"stepscope":{}},"traceEvents":[]}')
    rc, err = cli("export", "base", "--db", db, "--out", out)
    assert rc == 0 and not [x for x in err if x.startswith("error")], err
    assert out.read_bytes() == first
