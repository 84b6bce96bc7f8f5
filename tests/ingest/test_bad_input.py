"""Hardening (issue 9): every bad input gets its reason in one line naming the file, one
bad file never sinks a run, limits hold, and the database is what the messages say.

Each case asserts the exit code, the exact message line and the database after.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest
from conftest import SAMPLES, kineto_trace, q, write_trace

from stepscope.cli import main
from stepscope.ingest import read_trace
from stepscope.ingest.errors import TraceFileError


def _trace_bytes(**kwargs: Any) -> bytes:
    return json.dumps(kineto_trace(**kwargs)).encode()


def _with(**changes: Any) -> Callable[[Path], Path]:
    """rank1.json: the good synthetic trace with top-level or distributedInfo changes."""

    def make(d: Path) -> Path:
        trace = kineto_trace(rank=1, world_size=2)
        for key, value in changes.items():
            if key.startswith("dist_"):
                trace["distributedInfo"][key[5:]] = value
            else:
                trace[key] = value
        return write_trace(d / "rank1.json", trace)

    return make


def _raw(data: bytes | str) -> Callable[[Path], Path]:
    return lambda d: write_trace(d / "rank1.json", data)


def _deep(depth: int, where: str) -> bytes:
    nested = "[" * depth + "]" * depth
    good = _trace_bytes(rank=1).decode()
    if where == "meta":
        return good[:-1].encode() + f', "extra": {nested}}}'.encode()
    return good.replace('"traceEvents": [', f'"traceEvents": [{{"args": {nested}}}, ', 1).encode()


def _bad_event(d: Path, key: str, value: Any, exact: bool = False) -> Path:
    """rank1.json with the third event's `key` set to `value`, renamed 'aten::mm'; `exact`:
    every other ts with a nanosecond fraction (the exact-text read path)."""
    trace = kineto_trace(rank=1, world_size=2,
                         base_ns=None if exact else 1_700_000_000_000_000_000)
    events = trace["traceEvents"]
    if exact:
        for event in events:
            if isinstance(event.get("ts"), (int, float)):
                event["ts"] = f"{1_700_000_000_000_000 + int(event['ts'])}.125"
    events[2][key], events[2]["name"] = value, "aten::mm"
    text = json.dumps(trace)
    if exact:  # the numbers as numbers, with more digits than a double holds
        text = re.sub(r'"ts": "(\d+\.125)"', r'"ts": \1', text)
    return write_trace(d / "rank1.json", text)


def _no_ts(d: Path) -> Path:
    trace = kineto_trace(rank=1, world_size=2)
    for event in trace["traceEvents"]:
        event.pop("ts", None)
    return write_trace(d / "rank1.json", trace)


def _huge_ts(d: Path) -> Path:
    trace = kineto_trace(rank=1, world_size=2)
    for event in trace["traceEvents"]:
        if "ts" in event:
            event["ts"] = 1e300
    return write_trace(d / "rank1.json", trace)


# case -> (make rank1 in the run folder, the problem after "rank1.json: ")
PER_FILE_CASES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "rank beyond INTEGER": (
        _with(dist_rank=2**40),
        "distributedInfo.rank 1099511627776 is out of range (0 to 2147483647)"),
    "world_size beyond INTEGER": (
        _with(dist_world_size=10**30),
        "distributedInfo.world_size 1000000000000000000000000000000 is out of range "
        "(0 to 2147483647)"),
    "rank in superscript digits": (
        _with(dist_rank="\u00b2"), "distributedInfo.rank is not a non-negative integer ('²')"),
    "rank in Arabic-Indic digits": (
        _with(dist_rank="\u0663"), "distributedInfo.rank is not a non-negative integer ('٣')"),
    "negative rank": (
        _with(dist_rank=-1), "distributedInfo.rank is not a non-negative integer (-1)"),
    "rank as a list": (
        _with(dist_rank=[1]), "distributedInfo.rank is not a non-negative integer ([1])"),
    "baseTimeNanoseconds 1e30 as an integer": (
        _with(baseTimeNanoseconds=10**30),
        "baseTimeNanoseconds 1000000000000000000000000000000 is out of range (0 to 2^62 ns)"),
    "baseTimeNanoseconds 1e30 as a float": (
        _with(baseTimeNanoseconds=1e30), "baseTimeNanoseconds is not an integer ('1e+30')"),
    "baseTimeNanoseconds negative": (
        _with(baseTimeNanoseconds=-5), "baseTimeNanoseconds -5 is out of range (0 to 2^62 ns)"),
    "deeply nested keys": (
        _raw(_deep(100_000, "meta")), "invalid JSON (nested too deeply to be a trace)"),
    "deeply nested event": (
        _raw(_deep(100_000, "events")), "event 1 of traceEvents: args is a list ([[[["),
    "events without ts": (
        _no_ts, "no timed events: none of its 25 events has a numeric `ts` "
                "(nothing to attribute)"),
    "ts beyond BIGINT": (_huge_ts, "an event's time (ts or dur) is not a number or out of range"),
    "truncated plain JSON": (
        _raw(_trace_bytes(rank=1)[:-1]),
        f"truncated JSON at byte {len(_trace_bytes(rank=1)) - 1} (the document never closes; "
        "re-copy the file)"),
    "truncated after an event": (
        lambda d: write_trace(d / "rank1.json", _cut_after_event()),
        "invalid JSON: the traceEvents list never closes (truncated at byte"),
    "JSON is a string": (_raw('"traceEvents"'), "not a Kineto trace: the JSON is not an object"),
    "only whitespace": (_raw(b" \n\t "), "empty file (no JSON in it)"),
    "BOM then nothing": (_raw(b"\xef\xbb\xbf"), "empty file (no JSON in it)"),
    "NUL bytes": (_raw(b"\0" * 100), "binary data, not a Kineto trace (not JSON at all)"),
    "plain text": (_raw("hello world\n"),
                   "not a Kineto trace: not JSON at all (it starts with 'hello world')"),
    "SQLite database": (
        _raw(b"SQLite format 3\x00" + b"\x10\x00\x01\x01" * 50),
        "an SQLite database (an Nsight Systems export?), not a Kineto trace: stepscope reads "
        "the JSON traces torch.profiler writes (tensorboard_trace_handler or "
        "export_chrome_trace)"),
    "DuckDB database": (
        _raw(b"\x00" * 8 + b"DUCK" + b"\x00" * 100),
        "a DuckDB database, not a trace (a stepscope database is passed as --db)"),
    "ts as text": (
        lambda d: _bad_event(d, "ts", "abc"),
        "event 3 of traceEvents ('aten::mm'): ts is text (\"abc\"), not a number "
        "(microseconds)"),
    "ts as text, exact path": (
        lambda d: _bad_event(d, "ts", "abc", exact=True),
        "event 3 of traceEvents ('aten::mm'): ts is text (\"abc\"), not a number "
        "(microseconds)"),
    "ts as an object": (
        lambda d: _bad_event(d, "ts", {"us": 5}),
        "event 3 of traceEvents ('aten::mm'): ts is an object ({\"us\":5}), not a number "
        "(microseconds)"),
    "dur as text": (
        lambda d: _bad_event(d, "dur", "ten"),
        "event 3 of traceEvents ('aten::mm'): dur is text (\"ten\"), not a number "
        "(microseconds)"),
    # text DuckDB's TRY_CAST reads as a number but the events reader does not: named
    # like "abc", never "invalid JSON in traceEvents (… Failed to cast value …)"
    "ts as text with blanks around": (
        lambda d: _bad_event(d, "ts", " 1000 "),
        "event 3 of traceEvents ('aten::mm'): ts is text (\" 1000 \"), not a number "
        "(microseconds)"),
    "dur as text with a plus sign": (
        lambda d: _bad_event(d, "dur", "+5"),
        "event 3 of traceEvents ('aten::mm'): dur is text (\"+5\"), not a number "
        "(microseconds)"),
    "dur as text with an underscore": (
        lambda d: _bad_event(d, "dur", "1_0"),
        "event 3 of traceEvents ('aten::mm'): dur is text (\"1_0\"), not a number "
        "(microseconds)"),
    "args as text": (
        lambda d: _bad_event(d, "args", "x"),
        "event 3 of traceEvents ('aten::mm'): args is text (\"x\"), not an object"),
    "traceEvents of numbers": (
        _raw('{"traceEvents": [1, 2, 3]}'), "invalid JSON in traceEvents"),
}


def _cut_after_event() -> bytes:
    data = _trace_bytes(rank=1)
    return data[: data.rfind(b"}", 0, len(data) // 2) + 1]


def _ingest_with_bad_rank1(tmp_path: Path, make_bad: Callable[[Path], Path],
                           capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], Path]:
    run_dir = tmp_path / "job"
    write_trace(run_dir / "rank0.json.gz", kineto_trace(rank=0, world_size=2))
    make_bad(run_dir)
    db = tmp_path / "x.duckdb"
    code = main(["ingest", str(run_dir), "--db", str(db), "--quiet"])
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    return code, err.strip().splitlines(), db


@pytest.mark.parametrize("case", sorted(PER_FILE_CASES))
def test_one_bad_file_fails_alone(case: str, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    make_bad, problem = PER_FILE_CASES[case]
    code, lines, db = _ingest_with_bad_rank1(tmp_path, make_bad, capsys)
    bad = tmp_path / "job" / "rank1.json"
    assert code == 3, lines
    assert len(lines) == 1 and lines[0].startswith(f"error: {bad}: {problem}"), lines
    assert q(db, "SELECT run, status, n_ranks FROM runs") == [("job", "partial", 1)]
    failed = json.loads(q(db, "SELECT failed_files FROM runs")[0][0])
    assert [f["file"] for f in failed] == [str(bad)]
    assert failed[0]["error"].startswith(problem)
    assert q(db, "SELECT rank FROM ranks") == [(0,)]
    assert q(db, "SELECT count(*) > 0 FROM gpu_ops WHERE rank = 0") == [(True,)]


def test_the_reason_is_printed_when_the_only_file_fails(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    db = tmp_path / "e.duckdb"
    assert main(["ingest", str(empty), "--db", str(db)]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [
        f"error: {empty}: empty file",
        "error: nothing ingested into run 'empty': none of the 1 trace file(s) could be read "
        "(see the errors above)"]
    assert not db.exists()  # a failed ingest leaves no new database behind
    assert main(["report", str(empty)]) == 1
    assert capsys.readouterr().err.strip().splitlines()[0] == f"error: {empty}: empty file"


def test_every_reason_is_printed_when_all_files_fail(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "all_bad"
    (run_dir / "rank0.json").parent.mkdir()
    (run_dir / "rank0.json").write_bytes(b"")
    write_trace(run_dir / "rank1.json", _trace_bytes(rank=1)[:-1])
    db = tmp_path / "a.duckdb"
    main(["ingest", str(SAMPLES / "ddp"), "--db", str(db), "--run", "all_bad", "--quiet"])
    assert main(["ingest", str(run_dir), "--db", str(db)]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[:2] == [f"error: {run_dir / 'rank0.json'}: empty file",
                         f"error: {run_dir / 'rank1.json'}: truncated JSON at byte "
                         f"{len(_trace_bytes(rank=1)) - 1} "
                         "(the document never closes; re-copy the file)"]
    assert lines[2].startswith("error: nothing ingested into run 'all_bad'") and len(lines) == 3
    # the earlier run of that name is untouched
    assert q(db, "SELECT status, n_ranks FROM runs WHERE run = 'all_bad'") == [("complete", 4)]


def test_utf8_bom_is_valid_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "bom"
    write_trace(run_dir / "rank0.json", b"\xef\xbb\xbf" + _trace_bytes(rank=0))
    write_trace(run_dir / "rank1.json.gz", b"\xef\xbb\xbf" + _trace_bytes(rank=1))
    db = tmp_path / "b.duckdb"
    assert main(["ingest", str(run_dir), "--db", str(db), "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    assert q(db, "SELECT status, n_ranks FROM runs") == [("complete", 2)]
    plain = read_trace(run_dir / "rank0.json")
    assert plain.n_events == read_trace(run_dir / "rank1.json.gz").n_events == 25


def test_truncated_big_json_is_linear_and_says_where(tmp_path: Path) -> None:
    """5 MB missing its last brace (129 s before the fix): the reason names the byte. The
    cost is checked structurally: the end search parses the tail only, never the events."""
    trace = kineto_trace(rank=0, steps=600)
    data = json.dumps(trace).encode()
    assert len(data) > 1_000_000
    path = write_trace(tmp_path / "rank0.json", data[:-1])
    with pytest.raises(TraceFileError) as err:
        read_trace(path)
    assert err.value.problem == (f"truncated JSON at byte {len(data) - 1} (the document never "
                                 "closes; re-copy the file)")
    cut = data[: data.rfind(b"}", 0, len(data) // 2) + 1]
    write_trace(path, cut)
    with pytest.raises(TraceFileError) as err:
        read_trace(path)
    assert err.value.problem == ("invalid JSON: the traceEvents list never closes "
                                 f"(truncated at byte {len(cut)}?)")


def test_fifos_are_refused_without_blocking(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    run_dir = tmp_path / "fifo"
    write_trace(run_dir / "rank0.json.gz", kineto_trace(rank=0))
    os.mkfifo(run_dir / "rank1.json")
    os.mkfifo(tmp_path / "x.zip")
    db = tmp_path / "f.duckdb"
    assert main(["ingest", str(run_dir), "--db", str(db), "--quiet"]) == 3
    assert capsys.readouterr().err.strip() == (
        f"error: {run_dir / 'rank1.json'}: not a regular file (a FIFO, socket or device)")
    assert q(db, "SELECT status, n_ranks FROM runs") == [("partial", 1)]
    assert main(["ingest", str(tmp_path / "x.zip"), "--db", str(db)]) == 1
    assert capsys.readouterr().err.splitlines()[0] == (
        f"error: {tmp_path / 'x.zip'}: not a regular file (a FIFO, socket or device)")
    assert main(["ingest", str(run_dir / "rank1.json"), "--db", str(db)]) == 1
    assert "rank1.json: not a regular file" in capsys.readouterr().err
    assert q(db, "SELECT run FROM runs") == [("fifo",)]


def test_any_reader_exception_fails_that_file_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """PermissionError (unreadable as root, so injected), and an unexpected exception:
    the task turns whatever a reader raises into that file's failure (run inline, so
    the patched reader is the one that runs)."""
    import stepscope.ingest.tasks as tasks

    real = tasks.read_trace

    def flaky(path: Path, display: str | None = None, **kw: Any) -> Any:
        if path.name == "rank1.json.gz":
            raise PermissionError(13, "Permission denied")
        if path.name == "rank2.json.gz":
            raise ZeroDivisionError("division by zero")
        return real(path, display, **kw)

    monkeypatch.setattr(tasks, "read_trace", flaky)
    run_dir = tmp_path / "perm"
    for r in range(3):
        write_trace(run_dir / f"rank{r}.json.gz", kineto_trace(rank=r, world_size=3))
    db = tmp_path / "p.duckdb"
    assert main(["ingest", str(run_dir), "--db", str(db), "--quiet", "--jobs", "1"]) == 3
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: {run_dir / 'rank1.json.gz'}: permission denied (the file cannot be read by "
        "this user)",
        f"error: {run_dir / 'rank2.json.gz'}: could not be read (ZeroDivisionError: division "
        "by zero); please report it"]
    assert q(db, "SELECT status, n_ranks FROM runs") == [("partial", 1)]


def test_unreadable_file_is_a_file_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A trace without read permission: the reader's own open (ingest/kineto_text.py)
    raises PermissionError and that file fails with one line, the other ranks ingest.
    (Injected at the reader's open, not by chmod: root, as CI runs, reads every file.)"""
    import builtins

    import stepscope.ingest.kineto_text as kineto_text

    def unreadable(file: Any, *args: Any, **kwargs: Any) -> Any:
        if Path(file).name == "rank1.json.gz":
            raise PermissionError(13, "Permission denied", str(file))
        return builtins.open(file, *args, **kwargs)

    monkeypatch.setattr(kineto_text, "open", unreadable, raising=False)
    run_dir = tmp_path / "unreadable"
    write_trace(run_dir / "rank0.json.gz", kineto_trace(rank=0))
    write_trace(run_dir / "rank1.json.gz", kineto_trace(rank=1))
    db = tmp_path / "c.duckdb"
    assert main(["ingest", str(run_dir), "--db", str(db), "--quiet", "--jobs", "1"]) == 3
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: {run_dir / 'rank1.json.gz'}: permission denied (the file cannot be read by "
        "this user)"]
    assert q(db, "SELECT status, n_ranks FROM runs") == [("partial", 1)]


def _bomb_gz(path: Path, mib: int) -> Path:
    """A gzip of `mib` MiB of spaces inside a valid trace: tiny on disk."""
    with gzip.GzipFile(path, "wb", mtime=0) as fh:
        fh.write(b'{"traceEvents": [')
        for _ in range(mib):
            fh.write(b" " * (1 << 20))
        fh.write(b"]}")
    return path


def test_decompression_is_capped_per_trace(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "bomb"
    write_trace(run_dir / "rank0.json.gz", kineto_trace(rank=0))
    bomb = _bomb_gz(run_dir / "rank1.json.gz", 40)
    assert bomb.stat().st_size < 100_000
    db = tmp_path / "z.duckdb"
    code = main(["ingest", str(run_dir), "--db", str(db), "--quiet", "--max-trace-size", "16M"])
    assert code == 3
    assert capsys.readouterr().err.strip() == (
        f"error: {bomb}: more than 16M of JSON, the per-trace limit (parsing takes ~6x the "
        "text in memory; raise it with --max-trace-size or STEPSCOPE_MAX_TRACE_SIZE if this "
        "trace is real and the memory is there)")
    assert q(db, "SELECT status, n_ranks FROM runs") == [("partial", 1)]
    # the same member inside a zip is capped while unpacking, never written whole
    archive = tmp_path / "bomb.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("rank0.json", _trace_bytes(rank=0))
        zf.writestr("rank1.json", b'{"traceEvents": [' + b" " * (40 << 20) + b"]}")
    assert archive.stat().st_size < 1_000_000
    code = main(["ingest", str(archive), "--db", str(db), "--quiet", "--max-trace-size", "16M"])
    assert code == 3
    first, second = capsys.readouterr().err.strip().splitlines()
    assert first == (
        f"error: {archive}!rank1.json: more than 16M unpacked, the per-trace limit (raise it "
        "with --max-trace-size or STEPSCOPE_MAX_TRACE_SIZE if this trace is real)")
    assert second.startswith(f"note: replaced run 'bomb' in {db}: ")  # the run of above
    assert sorted(q(db, "SELECT run, n_ranks, status FROM runs")) == [
        ("bomb", 1, "partial")]


def test_trace_size_limit_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    bomb = _bomb_gz(tmp_path / "rank0.json.gz", 3)
    monkeypatch.setenv("STEPSCOPE_MAX_TRACE_SIZE", "2M")
    with pytest.raises(TraceFileError, match="more than 2M of JSON"):
        read_trace(bomb)
    monkeypatch.setenv("STEPSCOPE_MAX_TRACE_SIZE", "lots")
    assert main(["ingest", str(bomb), "--db", str(tmp_path / "e.duckdb")]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: STEPSCOPE_MAX_TRACE_SIZE 'lots': not a size; write it like 8G, 500M or 1048576")
    assert main(["ingest", str(bomb), "--max-trace-size", "0"]) == 2
    assert "--max-trace-size: '0': must be between 1K and 1024T" in capsys.readouterr().err


def test_crafted_table_name_cannot_widen_the_delete(tmp_path: Path) -> None:
    """A table of the user's whose name carries SQL, with a `run` column: stepscope does
    not own it, so a re-ingest leaves every row of it (the delete names only the tables
    of stepscope_tables, quoted)."""
    db = tmp_path / "c.duckdb"
    main(["ingest", str(SAMPLES / "ddp"), "--db", str(db), "--run", "r", "--quiet"])
    name = 'evil" WHERE 1=1 OR run <> "x'
    con = duckdb.connect(str(db))
    con.execute('CREATE TABLE "evil"" WHERE 1=1 OR run <> ""x" (run VARCHAR, v INTEGER)')
    con.execute(f'INSERT INTO "{name.replace(chr(34), chr(34) * 2)}" VALUES '
                "('other', 1), ('r', 2)")
    con.close()
    assert main(["ingest", str(SAMPLES / "ddp"), "--db", str(db), "--run", "r",
                 "--quiet"]) == 0
    assert q(db, f'SELECT run, v FROM "{name.replace(chr(34), chr(34) * 2)}" ORDER BY v') == [
        ("other", 1), ("r", 2)]


def _spec(tmp_path: Path, text: str, suffix: str = ".yaml") -> Path:
    path = tmp_path / f"model{suffix}"
    path.write_text(text)
    return path


GOOD_SPEC = ("n_params: 7e9\nn_layers: 32\nhidden: 4096\nseq_len: 4096\n"
             "global_batch_tokens: 4194304\n")

# case -> (arguments after `stepscope`, with {tmp}/{trace}; the message after "error: ")
USAGE_CASES: dict[str, tuple[list[str], str]] = {
    "--peak-tflops nan": (
        ["report", "{trace}", "--peak-tflops", "nan"],
        "stepscope report: argument --peak-tflops: not a finite number: 'nan' (see --help)"),
    "--peak-tflops inf": (
        ["report", "{trace}", "--peak-tflops", "inf"],
        "stepscope report: argument --peak-tflops: not a finite number: 'inf' (see --help)"),
    "--peak-tflops 0": (
        ["diff", "{trace}", "{trace}", "--peak-tflops", "0"],
        "stepscope diff: argument --peak-tflops: '0' is out of range: must be in (0, 1e+06] "
        "(see --help)"),
    "--peak-tflops -5": (
        ["report", "{trace}", "--peak-tflops", "-5"],
        "stepscope report: argument --peak-tflops: '-5' is out of range: must be in "
        "(0, 1e+06] (see --help)"),
    "--out in a missing folder": (
        ["report", "{trace}", "--out", "{tmp}/nope/r.md"],
        "stepscope report: argument --out: {tmp}/nope/r.md: the folder {tmp}/nope does not "
        "exist (see --help)"),
    "--out is a folder": (
        ["diff", "{trace}", "{trace}", "--out", "{tmp}"],
        "stepscope diff: argument --out: {tmp}: is a folder; give a file name (see --help)"),
    "plan --out in a missing folder": (
        ["plan", "--params", "7e9", "--gpus", "8", "--gpu", "H100", "--seq", "4096",
         "--out", "{tmp}/nope/p.json"],
        "stepscope plan: argument --out: {tmp}/nope/p.json: the folder {tmp}/nope does not "
        "exist (see --help)"),
    "plan --efficiency 0": (
        ["plan", "--params", "7e9", "--gpus", "8", "--gpu", "H100", "--seq", "4096",
         "--efficiency", "0"],
        "stepscope plan: argument --efficiency: '0' is out of range: must be in (0, 1] "
        "(see --help)"),
    "plan --network-gbs 0": (
        ["plan", "--params", "7e9", "--gpus", "8", "--gpu", "H100", "--seq", "4096",
         "--network-gbs", "0"],
        "stepscope plan: argument --network-gbs: '0' is out of range: must be in (0, 100000] "
        "(see --help)"),
    "plan --micro-batch 0": (
        ["plan", "--params", "7e9", "--gpus", "8", "--gpu", "H100", "--seq", "4096",
         "--micro-batch", "0"],
        "stepscope plan: argument --micro-batch: '0' is out of range: must be from 1 to "
        "65536 (see --help)"),
    "plan --gpus 10^18": (
        ["plan", "--params", "7e9", "--gpus", "1000000000000000000", "--gpu", "H100",
         "--seq", "4096"],
        "stepscope plan: argument --gpus: '1000000000000000000' is out of range: must be "
        "from 1 to 1048576 (see --help)"),
    "plan --gpus 1e18": (
        ["plan", "--params", "7e9", "--gpus", "1e18", "--gpu", "H100", "--seq", "4096"],
        "stepscope plan: argument --gpus: not a whole number: '1e18' (see --help)"),
    "plan --params nan": (
        ["plan", "--params", "nan", "--gpus", "8", "--gpu", "H100", "--seq", "4096"],
        "stepscope plan: argument --params: not a finite number: 'nan' (see --help)"),
    "plan with no microbatch": (
        ["plan", "--params", "7e9", "--gpus", "8", "--gpu", "H100", "--seq", "4096",
         "--global-batch-tokens", "100"],
        "plan: a global batch of 100 tokens is less than one micro-batch (1 x 4096 tokens): "
        "no layout has a microbatch"),
    "ingest --jobs 0": (
        ["ingest", "{trace}", "--jobs", "0"],
        "stepscope ingest: argument --jobs: '0' is out of range: must be from 1 to 1024 "
        "(see --help)"),
    "spec with NaN": (
        ["report", "{trace}", "--model", "{spec:n_params: .nan}"],
        "{tmp}/model.yaml: n_params must be a finite number, not nan"),
    "spec with .inf": (
        ["report", "{trace}", "--model", "{spec:global_batch_tokens: .inf}"],
        "{tmp}/model.yaml: global_batch_tokens must be a finite number, not inf"),
    "spec with a negative size": (
        ["report", "{trace}", "--model", "{spec:hidden: -4096}"],
        "{tmp}/model.yaml: hidden -4096 is out of range (must be above 0 and at most 1e+07)"),
    "spec with a fractional layer count": (
        ["report", "{trace}", "--model", "{spec:n_layers: 32.5}"],
        "{tmp}/model.yaml: n_layers must be a whole number, not 32.5"),
    "spec with a list": (
        ["report", "{trace}", "--model", "{spec:seq_len: [1, 2]}"],
        "{tmp}/model.yaml: seq_len must be a number, not [1, 2]"),
    "spec with a boolean": (
        ["report", "{trace}", "--model", "{spec:n_layers: true}"],
        "{tmp}/model.yaml: n_layers must be a number, not True"),
    "spec with mixed-type keys": (
        ["report", "{trace}", "--model", "{spec:1: 2}"],
        "{tmp}/model.yaml: field names must be text, found 1"),
}


def _fill(arg: str, tmp: Path, trace: Path) -> str:
    if arg.startswith("{spec:"):
        override = arg[len("{spec:"):-1]
        key = override.split(":")[0]
        lines = [x for x in GOOD_SPEC.splitlines() if not x.startswith(key + ":")]
        return str(_spec(tmp, "\n".join([*lines, override]) + "\n"))
    return arg.replace("{tmp}", str(tmp)).replace("{trace}", str(trace))


@pytest.mark.parametrize("case", sorted(USAGE_CASES))
def test_bad_numbers_and_paths_are_usage_errors_before_any_work(
        case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import stepscope

    def no_work(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("work started before the arguments were checked")

    # report and diff ingest trace paths through stepscope.targets -> stepscope.ingest_run
    monkeypatch.setattr(stepscope, "ingest_run", no_work)
    trace = write_trace(tmp_path / "rank0.json.gz", kineto_trace(rank=0))
    argv, message = USAGE_CASES[case]
    code = main([_fill(a, tmp_path, trace) for a in argv])
    err = capsys.readouterr()
    assert code == 2, err
    assert err.err.strip().splitlines() == [f"error: {_fill(message, tmp_path, trace)}"]
    assert err.out == ""
    assert not (tmp_path / "stepscope.duckdb").exists()


def test_json_output_is_strict_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No NaN/Infinity token in any JSON the CLI writes; non-finite values become null."""
    from stepscope.dashboard.render.strict_json import dumps

    assert dumps({"a": float("nan"), "b": [float("inf"), 1.5], "c": (float("-inf"),)}) == \
        '{"a": null, "b": [null, 1.5], "c": [null]}'
    out = tmp_path / "r.json"
    assert main(["report", str(SAMPLES / "ddp"), "--format", "json", "--peak-tflops", "1e-9",
                 "--out", str(out)]) == 0
    text = out.read_text()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in the JSON report"))
    assert not list(tmp_path.glob(".r.json.*.tmp"))
