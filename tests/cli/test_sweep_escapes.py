"""Terminal controls in every name a trace carries, through every command and format
(issue 43, the pre-audit sweep).

One two-rank job whose kernel, op, thread, device and process-group names hold ESC/OSC,
a C1 CSI (U+009B), a right-to-left override (U+202E), DEL and NUL is ingested once; each
command then writes each of its formats. Nothing printed (text, md, json) and no file
written (md, the chrome-json export) may hold a raw control character (newlines and tabs
aside), HTML has none either, and the names are not lost: the export's JSON decodes to
the very names of the traces.

First run, before this branch: the chrome-json export held the C1 CSI and the override
raw (DuckDB's to_json leaves U+007F-U+009F and the bidirectional controls as they are:
valid JSON, but `head export.json` ran a CSI on the terminal); every printed output was
clean already.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from audit8_inputs import raw_controls
from conftest import cli, kineto_trace, write_trace

HOSTILE = "\x1b]0;own\x07\x1b[2J\x9b31m\u202e\x7f\x00Z"


def _hostile_trace(rank: int) -> dict[str, object]:
    """kineto_trace with HOSTILE in its GEMM kernel, aten::mm, thread, device and
    process-group names."""
    trace = kineto_trace(rank=rank, world_size=2, steps=3)
    for e in trace["traceEvents"]:
        args = e.get("args", {})
        if e.get("cat") == "kernel" and e["name"].startswith("sm90"):
            e["name"] = "gemm" + HOSTILE
        elif e.get("name") == "aten::mm":
            e["name"] = "aten::mm" + HOSTILE
        elif e.get("name") == "thread_name":
            args["name"] = "thread" + HOSTILE
        if "Process Group Description" in args:
            args["Process Group Description"] = "pg" + HOSTILE
    trace["deviceProperties"][0]["name"] = "GPU" + HOSTILE  # type: ignore[index]
    trace["distributedInfo"]["pg_config"][0]["pg_desc"] = "pg" + HOSTILE  # type: ignore[index]
    return trace


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sweep_esc")
    for rank in range(2):
        write_trace(root / "traces" / f"rank{rank}.json", _hostile_trace(rank))
    db = root / "db.duckdb"
    for run in ("a", "b"):
        rc, _, err = cli("ingest", root / "traces", "--db", db, "--run", run, "--quiet")
        assert rc == 0, err
    return db


COMMANDS = {
    "summary text": ("summary", "--format", "text"),
    "summary md": ("summary", "--format", "md"),
    "summary json": ("summary", "--format", "json"),
    "report md": ("report", "a", "--format", "md"),
    "report json": ("report", "a", "--format", "json"),
    "report html": ("report", "a", "--format", "html"),
    "diff md": ("diff", "a", "b", "--format", "md"),
    "diff html": ("diff", "a", "b", "--format", "html"),
    "whatif --op text": ("whatif", "a", "--op", "gemm", "--speedup", "2"),
    "whatif --op md": ("whatif", "a", "--op", "aten", "--speedup", "2", "--format", "md"),
    "whatif --rank json": ("whatif", "a", "--rank", "0", "--format", "json"),
}


@pytest.mark.parametrize("name", COMMANDS)
def test_printed_output_has_no_raw_control(hostile_db: Path, name: str) -> None:
    rc, out, err = cli(*COMMANDS[name], "--db", hostile_db)
    assert rc == 0, err
    assert not raw_controls(out) and not raw_controls(err), out[:2000]
    if name in ("summary text", "summary md", "report md", "diff md"):
        assert "\\u001b" in out, out[:2000]  # shown, escaped: not dropped
    if name.endswith("json"):
        json.loads(out)  # the escapes are JSON's own: still one valid document


def test_report_md_file_has_no_raw_control(hostile_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.md"
    rc, _, err = cli("report", "a", "--db", hostile_db, "--format", "md", "--out", out)
    assert rc == 0, err
    text = out.read_text(encoding="utf-8")
    assert "pg\\u001b" in text and not raw_controls(text)


def test_chrome_export_has_no_raw_control_and_keeps_the_names(hostile_db: Path,
                                                              tmp_path: Path) -> None:
    out = tmp_path / "e.json"
    rc, _, err = cli("export", "a", "--db", hostile_db, "--out", out)
    assert rc == 0, err
    text = out.read_text(encoding="utf-8")
    assert not raw_controls(text), sorted({hex(ord(c)) for c in text if raw_controls(c)})
    names = {e.get("name") for e in json.loads(text)["traceEvents"]}
    assert {"gemm" + HOSTILE, "aten::mm" + HOSTILE} <= names
    stated = err.split("export: ")[1]
    events = int(stated.split(" events")[0].replace(",", ""))
    assert events == len(json.loads(text)["traceEvents"])


def test_export_size_counts_the_escapes(hostile_db: Path, tmp_path: Path) -> None:
    import duckdb

    from stepscope.analyzers.export import export_chrome

    out = tmp_path / "e.json"
    con = duckdb.connect(str(hostile_db), read_only=True)
    try:
        size = export_chrome(con, "a", out)
    finally:
        con.close()
    body = out.read_bytes()
    body = body[body.index(b"[\n") + 2:body.rindex(b"\n]}")]
    assert size.total_bytes == len(body) + 2  # each event's ",\n", the last one's too


def test_perfetto_export_keeps_the_names(hostile_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "e.pftrace"
    rc, _, err = cli("export", "a", "--db", hostile_db, "--out", out, "--format", "perfetto")
    assert rc == 0 and not raw_controls(err), err
    assert ("gemm" + HOSTILE).encode() in out.read_bytes()  # a binary file: names as they are
