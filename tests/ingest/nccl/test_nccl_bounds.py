"""Issue 24 §3-§5 for the NCCL formats: memory and time bounded on hostile input, one bad
file failing alone with its own line, nothing skipped in silence.

Every input is generated here. Memory is measured, not guessed: the CLI runs in a child
process and its peak RSS comes from os.wait4 (tests/measure.py); each bound is stated
against a baseline measured the same way on a tiny valid input, so it holds on any
machine. Sizes are tens to hundreds of MB: a peak that stays near the baseline while the
input grows tenfold shows the property.
"""

from __future__ import annotations

import gzip
import json
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest
from conftest import REAL_TRACES, REPO, kineto_trace, write_trace
from measure import Measured, run_cli

from stepscope.cli import main
from stepscope.ingest import TraceFileError
from stepscope.ingest.nccl import safe_pickle
from stepscope.ingest.nccl.safe_pickle import TooLargeError, load_plain
from stepscope.ingest.nccl.sniff import FLIGHT_RECORDER, sniff

pytestmark = pytest.mark.slow  # ingests real Flight Recorder dumps and oversized inputs

FR = REAL_TRACES / "nvidia-resiliency-ext" / "tests" / "attribution" / "unit" / "fr_traces"
LOG = REPO / "tests" / "data" / "nccl" / "tp_across_nodes" / "nccl-logs" / "nccl.node002.1005.log"
# A run that stays near the baseline: what a block of text, a read step and the polars
# frames of one block cost, with room for a noisy machine.
MARGIN_MB = 80


def fr_dir() -> Path:
    path = FR / "gpu_error_1st"
    if not path.is_dir():
        pytest.fail("tests/data/traces (the nvidia-resiliency-ext dumps) is missing")
    return path


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> dict[str, float]:
    """Peak RSS of `hang` on 16 real dumps and of `ingest` of one small NCCL log."""
    tmp = tmp_path_factory.mktemp("baseline")
    hang = run_cli(["hang", str(fr_dir()), "--format", "json"])
    ingest = run_cli(["ingest", str(LOG), "--db", str(tmp / "b.duckdb")])
    assert hang.code == 0 and ingest.code == 0, hang.stderr + ingest.stderr
    return {"hang": hang.peak_rss_mb, "ingest": ingest.peak_rss_mb}


def one_line_error(m: Measured, path: Path) -> str:
    """The one error line naming `path` (others may follow: 'nothing ingested')."""
    lines = [ln for ln in m.stderr.splitlines() if ln.startswith(f"error: {path}:")]
    assert len(lines) == 1 and "Traceback" not in m.stderr, m.stderr
    return lines[0]


# ---- Flight Recorder pickles whose memo shares objects ------------------------------------

def _doubling(levels: int) -> list[Any]:
    """A list of two references to the list below, `levels` deep: 2^levels leaves."""
    value: list[Any] = []
    for _ in range(levels):
        value = [value, value]
    return value


def _dump(edit: Callable[[dict[str, Any]], None]) -> bytes:
    raw = load_plain((fr_dir() / "_dump_3").read_bytes())
    edit(raw)
    return pickle.dumps(raw, protocol=4)


def _frames(raw: dict[str, Any]) -> None:
    raw["entries"][0]["frames"] = _doubling(40)


def _pg_name(raw: dict[str, Any]) -> None:
    e = raw["entries"][0]
    e["process_group"] = (_doubling(40), e["process_group"][1])


def _pg_config(raw: dict[str, Any]) -> None:
    shared: dict[str, Any] = {"x": 1}
    for _ in range(40):
        shared = {"a": shared, "b": shared}
    raw["pg_config"]["0"]["desc"] = shared


def _cycle(raw: dict[str, Any]) -> None:
    loop: list[Any] = []
    loop.append(loop)
    raw["entries"][0]["frames"] = loop


def _deep(raw: dict[str, Any]) -> None:
    value: list[Any] = []
    for _ in range(100):
        value = [value]
    raw["entries"][0]["input_sizes"] = value


HOSTILE_DUMPS = {"frames_2^40": _frames, "pg_name_2^40": _pg_name,
                 "pg_config_2^40": _pg_config, "cycle": _cycle, "nested_100": _deep}


@pytest.mark.parametrize("case", sorted(HOSTILE_DUMPS))
def test_shared_references_are_refused_before_any_walk(
        case: str, tmp_path: Path, baseline: dict[str, float]) -> None:
    """A 3-5 KB plain-data pickle describing 2^40 values (or a cycle, or 100 levels):
    `hang` refuses that dump in one line, analyses the other 15, and stays at the
    baseline's memory (it used to run forever at +65 MB/s)."""
    job = tmp_path / "job"
    shutil.copytree(fr_dir(), job)
    data = _dump(HOSTILE_DUMPS[case])
    assert len(data) < 8000
    (job / "_dump_3").write_bytes(data)
    m = run_cli(["hang", str(job), "--format", "json"], timeout_s=120)
    assert m.code == 3, m.stderr
    line = one_line_error(m, job / "_dump_3")
    assert "refused to load this Flight Recorder dump" in line or "contains itself" in line
    assert m.peak_rss_mb < baseline["hang"] + MARGIN_MB


def test_many_small_objects_are_refused_by_their_cost(tmp_path: Path) -> None:
    """12 MB of pickle opcodes that each build an empty list (~64 bytes apiece, 400 MB
    built): refused while scanning, before anything is built."""
    data = b"\x80\x04]" + b"]a" * (6 << 20) + b"."
    dump = _write(tmp_path / "_dump_0", data)
    m = run_cli(["ingest", str(dump), "--db", str(tmp_path / "s.duckdb")])
    assert m.code == 1 and "more than 256 MiB" in one_line_error(m, dump)
    assert m.peak_rss_mb < 300  # building it would take > 400 MB


def test_opcodes_that_build_nothing_are_bounded_in_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """NONE + POP pairs build nothing, but scanning them takes time: refused past
    MAX_OPCODES (here lowered to 2^20, to keep the test short)."""
    monkeypatch.setattr(safe_pickle, "MAX_OPCODES", 1 << 20)
    with pytest.raises(TooLargeError, match="more than 1048576 opcodes"):
        load_plain(b"\x80\x04]" + b"N0" * (1 << 20) + b".")
    assert load_plain(b"\x80\x04]" + b"N0" * (1 << 18) + b".") == []


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_oversized_flight_recorder_json_is_refused_unread(tmp_path: Path) -> None:
    """A 70 MB JSON dump (a real one is a few MB; 570 MB took 4.66 GB and 46 s): refused
    by its size before a byte is parsed; 30 MB of empty lists (10M values) by what
    parsing would build."""
    big = tmp_path / "_dump_1"
    body = json.dumps({"frames": [{"name": "f" * 60, "filename": "x.py", "line": 1}] * 100})
    with open(big, "w") as fh:
        fh.write('{"pg_config": {}, "entries": [')
        fh.write(",".join([body] * (70_000_000 // len(body))))
        fh.write("]}")
    m = run_cli(["ingest", str(big), "--db", str(tmp_path / "a.duckdb")], timeout_s=60)
    assert m.code == 1 and "more than a Flight Recorder dump holds" in one_line_error(m, big)
    assert m.peak_rss_mb < 300
    dense = _write(tmp_path / "_dump_2", b'{"pg_config": {}, "entries": [' +
                   b",".join([b"[]"] * 10_000_000) + b"]}")
    m = run_cli(["ingest", str(dense), "--db", str(tmp_path / "b.duckdb")], timeout_s=60)
    assert m.code == 1 and "more than 256 MiB" in one_line_error(m, dense)
    assert m.peak_rss_mb < 300


# ---- NCCL_DEBUG logs: size limit, long lines, repeats --------------------------------------

def _log(path: Path, line: bytes, n: int, gz: bool = False, long_line: int = 0) -> Path:
    """The real-shaped log of rank 5, then a line of `long_line` bytes (if any), then
    `line` repeated `n` times; written in pieces (the test process stays small)."""
    opener: Any = gzip.open if gz else open
    with opener(path, "wb") as fh:
        fh.write(LOG.read_bytes())
        for _ in range(long_line >> 20):
            fh.write(b"x" * (1 << 20))
        if long_line:
            fh.write(b"\n")
        for _ in range(n // 100_000):
            fh.write(line * 100_000)
        fh.write(line * (n % 100_000))
    return path


COLL = (b"node002:1005:1005 [1] NCCL INFO AllReduce: opCount 3f sendbuff 0x7fc9c4000000 "
        b"recvbuff 0x7fc9bc000000 count 33554432 datatype 7 op 0 root 0 comm 0x55a000005000 "
        b"[nranks=8] stream 0x5631f0021140\n")
CHANNEL = b"node002:1005:1105 [1] NCCL INFO Channel 05/0 : 4[0] -> 5[1] via P2P/CUMEM\n"
WARN = (b"[2025-09-23 06:58:05] node002:1005:1205 [1] transport/net_ib.cc:1696 NCCL WARN "
        b"NET/IB : Got completion from peer 10.0.0.11<41234> with status=12 opcode=0\n")


def test_gzip_bomb_stops_at_the_per_file_limit(tmp_path: Path,
                                               baseline: dict[str, float]) -> None:
    """~0.7 MB of gzip inflating to 200 MB of log, --max-trace-size 50M: the file fails
    at 50 MB of text, in the baseline's memory (it went past 4.5 GB)."""
    bomb = _log(tmp_path / "nccl.bomb.log.gz", COLL, 200_000_000 // len(COLL), gz=True)
    assert bomb.stat().st_size < 3_000_000
    m = run_cli(["ingest", str(bomb), "--db", str(tmp_path / "s.duckdb"),
                 "--max-trace-size", "50M"])
    assert m.code == 1
    assert "more than 50M of text, the per-file limit" in one_line_error(m, bomb)
    assert m.peak_rss_mb < baseline["ingest"] + MARGIN_MB


@pytest.mark.parametrize("line", [COLL, CHANNEL, WARN], ids=["coll", "channel", "warn"])
def test_memory_does_not_grow_with_a_repeated_line(line: bytes, tmp_path: Path,
                                                   baseline: dict[str, float]) -> None:
    """200 MB of one repeated per-collective line, 60 MB of a connection line or a WARN
    line (every one parsed): ingested, the repeats stored once (a WARN line with its
    count; a row per line took ~800 MB for 200 MB), and the peak within MARGIN_MB of the
    baseline: a small fraction of the input."""
    n = (200_000_000 if line is COLL else 60_000_000) // len(line)
    log = _log(tmp_path / "nccl.rep.log", line, n)
    db = tmp_path / "s.duckdb"
    m = run_cli(["ingest", str(log), "--db", str(db)], timeout_s=240)
    assert m.code == 0, m.stderr
    assert m.peak_rss_mb < baseline["ingest"] + MARGIN_MB
    con = duckdb.connect(str(db), read_only=True)
    channels = con.execute("SELECT count(*) FROM nccl_channels").fetchone()
    warnings = con.execute("SELECT count(*), sum(n_lines) FROM nccl_warnings").fetchone()
    base_channels = 8  # rank 5's own log: 8 distinct connection lines
    assert channels == (base_channels + (line is CHANNEL),)
    assert warnings == ((2, 1 + n) if line is WARN else (1, 1))


def test_one_huge_line_is_skipped_and_said(tmp_path: Path, baseline: dict[str, float]) -> None:
    """A 100 MB line in the middle of a log: never held whole; the lines after it are
    read, and the source's note counts the skipped line."""
    later = b"node002:1005:1300 [1] NCCL INFO Channel 03/1 : 5[1] -> 4[0] via P2P/CUMEM/read\n"
    log = _log(tmp_path / "nccl.long.log", later, 1, long_line=100 << 20)
    db = tmp_path / "s.duckdb"
    m = run_cli(["ingest", str(log), "--db", str(db)])
    assert m.code == 0, m.stderr
    assert m.peak_rss_mb < baseline["ingest"] + MARGIN_MB
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT note FROM nccl_sources").fetchone() == (
        "1 line(s) longer than 65536 bytes skipped (not NCCL's)",)
    assert con.execute("SELECT count(*) FROM nccl_channels WHERE transport = "
                       "'P2P/CUMEM/read'").fetchone() == (1,)


@pytest.mark.parametrize("kind", ["log", "inspector", "profiler"])
def test_per_file_limit_applies_to_every_nccl_format(kind: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    """2 MB of NCCL log, Inspector JSONL or profiler JSON under --max-trace-size 1M: each
    fails alone with the per-file limit, the good dump beside it goes in."""
    if kind == "log":
        path = _log(tmp_path / "nccl.big.log", COLL, 2_000_000 // len(COLL))
    elif kind == "inspector":
        line = (REPO / "tests" / "data" / "nccl" / "tp_across_nodes" /
                "nccl-inspector-unknown-jobid" / "node000-pid1000.log").read_bytes()
        path = _write(tmp_path / "insp.jsonl", line * (2_000_000 // len(line)))
    else:
        path = tmp_path / "profile_7_0.json"
        path.write_text(json.dumps(_profiler_events(7000, same_id=False)))
    assert path.stat().st_size > 1 << 20
    good = tmp_path / "_dump_3"
    shutil.copy(fr_dir() / "_dump_3", good)
    code = main(["ingest", str(path), str(good), "--db", str(tmp_path / "s.duckdb"),
                 "--run", "r", "--max-trace-size", "1M"])
    err = capsys.readouterr().err
    assert code == 3, err
    assert [ln for ln in err.splitlines() if path.name in ln] == [
        f"error: {path}: more than 1M of text, the per-file limit (raise it with "
        "--max-trace-size or STEPSCOPE_MAX_TRACE_SIZE if this log is real)"]


# ---- profiler plugin: begin/end pairing ---------------------------------------------------

def _profiler_events(n: int, same_id: bool, count: int = 1024) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for i in range(n):
        args = {"SeqNum": i, "CommHash": 7, "Rank": 0, "Count": count if i else 2**62,
                "Datatype": "ncclFloat32"}
        ident = 0 if same_id else i
        events.append({"name": "AllReduce", "cat": "COLL", "ph": "b", "id": ident, "pid": 1,
                       "tid": 1, "ts": 10.0 * i, "args": args})
        events.append({"name": "AllReduce", "cat": "COLL", "ph": "e", "id": ident, "pid": 1,
                       "tid": 1, "ts": 10.0 * i + 1 + i % 7, "args": {}})
    return events


def test_events_sharing_one_id_pair_in_linear_time(tmp_path: Path,
                                                   baseline: dict[str, float]) -> None:
    """50,000 begin/end pairs that all share id 0 (15 MB): the k-th begin pairs with the
    k-th end, as planted (a join on the id alone makes 2.5 x 10^9 rows; 8.6 MB of such
    events took > 4.6 GB in 5 s).
    Count 2^62 overflows a BIGINT of bytes: that op's msg_bytes is NULL, no error."""
    path = tmp_path / "profile_7_0.json"
    path.write_text(json.dumps(_profiler_events(50_000, same_id=True)))
    db = tmp_path / "s.duckdb"
    m = run_cli(["ingest", str(path), "--db", str(db)], timeout_s=120)
    assert m.code == 0, m.stderr
    assert m.peak_rss_mb < baseline["ingest"] + 150
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute("SELECT seq, exec_time_us, msg_bytes FROM nccl_ops ORDER BY seq"
                       ).fetchall()
    assert len(rows) == 50_000
    assert all(abs(t - (1 + s % 7)) < 1e-9 for s, t, _ in rows)
    assert rows[0][2] is None and {b for _, _, b in rows[1:]} == {4096}


def test_count_of_2_62_does_not_break_the_report(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A profiler op of Count 2^62 next to normal ones and a Kineto rank: the report
    measures the others (it was a TypeError in analyzers/comm/nccl.py)."""
    root = tmp_path / "job"
    for rank in range(2):
        events = _profiler_events(5, same_id=False)
        for e in events:
            if e["ph"] == "b":
                e["args"]["Rank"] = rank
                e["pid"] = 10 + rank
            else:
                e["pid"] = 10 + rank
        root.mkdir(exist_ok=True)
        (root / f"profile_7_{rank}.json").write_text(json.dumps(events))
        write_trace(root / f"rank{rank}.json.gz", kineto_trace(rank=rank))
    assert main(["report", str(root), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    measured = report["nccl"]["measured"]
    assert [m["n_ops"] for m in measured] == [8] and measured[0]["over_time"] == []


# ---- one bad file fails alone; nothing skipped in silence ----------------------------------

def test_a_rank_past_integer_fails_alone(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """`_dump_99999999999` among 15 good dumps and 2 Kineto ranks: its own one-line
    reason, everything else ingested (the whole ingest used to abort with 'Current
    transaction is aborted')."""
    job = tmp_path / "job"
    shutil.copytree(fr_dir(), job / "fr")
    (job / "fr" / "_dump_3").rename(job / "fr" / "_dump_99999999999")
    for rank in range(2):
        write_trace(job / "traces" / f"rank{rank}.json.gz", kineto_trace(rank=rank))
    db = tmp_path / "s.duckdb"
    assert main(["ingest", str(job), "--db", str(db)]) == 3
    err = capsys.readouterr().err
    assert [ln for ln in err.splitlines() if ln.startswith("error:")] == [
        f"error: {job / 'fr' / '_dump_99999999999'}: its name ends with 99999999999 "
        "(`<prefix><rank>`), which is not a rank (0 to 2147483647); rename it like _dump_3"]
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*), count(DISTINCT rank) FROM nccl_sources").fetchone() \
        == (15, 15)
    assert con.execute("SELECT count(*) FROM ranks").fetchone() == (2,)


@pytest.mark.parametrize("protocol", [0, 1])
def test_old_pickle_protocols_are_recognised(protocol: int, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Dumps pickled with protocol 0 or 1 (no PROTO header): found in a folder (15 of 16
    were analysed, exit 0), named explicitly read as Flight Recorder (was: as Kineto),
    and loaded plain-data-only like the others."""
    job = tmp_path / "job"
    job.mkdir()
    for r in range(16):
        raw = load_plain((fr_dir() / f"_dump_{r}").read_bytes())
        (job / f"_dump_{r}").write_bytes(pickle.dumps(raw, protocol=protocol if r == 7 else 4))
    assert sniff(job / "_dump_7") == FLIGHT_RECORDER
    assert main(["hang", str(job), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["dump_ranks"] == list(range(16))
    assert main(["ingest", str(job), "--db", str(tmp_path / "s.duckdb")]) == 0
    capsys.readouterr()
    con = duckdb.connect(str(tmp_path / "s.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM nccl_sources WHERE kind = 'flight_recorder'"
                       ).fetchone() == (16,)
    assert con.execute("SELECT format FROM nccl_sources WHERE rank = 7").fetchone() == (
        "pickle",)
    con.close()
    assert main(["hang", str(job / "_dump_7"), "--format", "json"]) == 0
    capsys.readouterr()


def test_old_protocol_payload_is_refused(tmp_path: Path) -> None:
    """A protocol-0 dump that would run a command (GLOBAL opcode, text form) is sniffed as
    a dump in a folder and refused; nothing runs."""
    marker = tmp_path / "pwned"
    data = (b"(dp0\nVpg_config\np1\n(dp2\nsVentries\np3\n(lp4\ncos\nsystem\np5\n(V"
            + f"touch {marker}".encode() + b"\ntRp6\nas.")
    path = _write(tmp_path / "_dump_0", data)
    assert sniff(path) == FLIGHT_RECORDER
    from stepscope.ingest.nccl.flight_recorder import read_flight_recorder
    with pytest.raises(TraceFileError, match=r"imports os\.system"):
        read_flight_recorder(path, str(path))
    assert not marker.exists()
