"""Reader failures by class (issue 43, audit round 10, the ingest side): each class of a
file's problem is one line naming the file (never a silent skip), and the machine's
failures are the machine's line and exit code. New fixtures, built here, beside the
audit's own cases (tests/cli/test_audit_round10_inputs.py).

Each case asserts the exit code and the start of the first error line.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import kineto_trace, write_trace

from stepscope.cli import main

NOTHING = "error: nothing ingested into run"


def _ingest(capsys: pytest.CaptureFixture[str], folder: Path, db: Path) -> tuple[int, list[str]]:
    rc = main(["ingest", str(folder), "--db", str(db), "--run", "r", "--quiet"])
    return rc, capsys.readouterr().err.splitlines()


def _one_trace(events: int = 0) -> str:
    extra = [{"ph": "i", "name": "mark", "pid": 100, "tid": 100, "ts": 1500.0 + i, "s": "t"}
             for i in range(events)]
    return json.dumps(kineto_trace(rank=0, world_size=1, extra_events=extra))


# --- a trace in UTF-16 or UTF-32: named, never skipped as "no trace" (round 10 "UTF-32",
# round 9's UTF-16 traces) --------------------------------------------------------------

ENCODED: dict[str, tuple[Callable[[str], bytes], str]] = {
    "utf-16 with a BOM": (lambda t: t.encode("utf-16"), "UTF-16"),
    "utf-16-le without a BOM": (lambda t: t.encode("utf-16-le"), "UTF-16"),
    "utf-16-be without a BOM": (lambda t: t.encode("utf-16-be"), "UTF-16"),
    "utf-32 with a BOM": (lambda t: t.encode("utf-32"), "UTF-32"),
    "utf-32-le without a BOM": (lambda t: t.encode("utf-32-le"), "UTF-32"),
    "utf-16 gzipped": (lambda t: t.encode("utf-16"), "UTF-16"),  # write_trace gzips it
}


@pytest.mark.parametrize("case", list(ENCODED))
@pytest.mark.parametrize("events", [0, 3000], ids=["small", "over 64 KiB"])
def test_a_wide_encoding_is_named(case: str, events: int, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A small file was skipped as a non-trace .json (json.loads reads UTF-16/32 bytes),
    a large UTF-16-LE one too (no `"traceEvents"` in its bytes): "no trace files", exit
    2. Now the file's line names its encoding, then "nothing ingested" (exit 1)."""
    encode, encoding = ENCODED[case]
    name = "rank0.json.gz" if "gzip" in case else "rank0.json"
    write_trace(tmp_path / "t" / name, encode(_one_trace(events)))
    rc, err = _ingest(capsys, tmp_path / "t", tmp_path / "db.duckdb")
    assert rc == 1, err
    assert err[0] == (f"error: {tmp_path / 't' / name}: {encoding} text, not UTF-8: stepscope "
                      f"reads traces in UTF-8 (convert it, e.g. iconv -f {encoding} -t UTF-8)")
    assert len(err) == 2 and err[1].startswith(NOTHING)


def test_the_same_trace_in_utf8_ingests(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """The control: the trace of the cases above, in UTF-8 (with a BOM too), ingests."""
    write_trace(tmp_path / "t" / "rank0.json", b"\xef\xbb\xbf" + _one_trace(3000).encode())
    rc, err = _ingest(capsys, tmp_path / "t", tmp_path / "db.duckdb")
    assert rc == 0 and not err


# --- NCCL Inspector JSONL: recognized by the plugin's own keys, so a damaged file is named
# (round 10 "Inspector without header / coll_perf / comm_name of 1 MiB"), a UTF-8 BOM
# read (round 9) ------------------------------------------------------------------------

def _inspector(header: dict[str, object] | None = None, perf: dict[str, object] | None = None,
               drop: str = "") -> str:
    line: dict[str, object] = {
        "header": {"id": "0x7f8c", "comm_name": "", "rank": 0, "n_ranks": 2, "nnodes": 1,
                   **(header or {})},
        "metadata": {"inspector_output_format_version": "v4.0", "dump_timestamp_us": 1,
                     "hostname": "node0", "pid": 7},
        "coll_perf": {"coll": "AllGather", "coll_sn": 1, "coll_msg_size_bytes": 4096,
                      "coll_exec_time_us": 25.5, "coll_timing_source": "kernel_gpu",
                      "coll_algobw_gbs": 2.0, "coll_busbw_gbs": 1.0, **(perf or {})}}
    line.pop(drop, None)
    return json.dumps(line)


INSPECTOR_DAMAGED = {
    "no header": (_inspector(drop="header"), "2 NCCL Inspector line(s) without header.id"),
    "no metadata nor header": (json.dumps({"coll_perf": json.loads(_inspector())["coll_perf"]}),
                               "2 NCCL Inspector line(s) without header.id"),
    "no coll_perf": (_inspector(drop="coll_perf"),
                     "2 NCCL Inspector line(s) without coll_perf.coll / p2p_perf.p2p"),
}


@pytest.mark.parametrize("case", list(INSPECTOR_DAMAGED))
def test_a_damaged_inspector_file_is_named(case: str, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Skipped in silence before ("no trace files", exit 2): the sniff wanted a header
    and a perf part in one line. Now the file's line says what its lines lack (exit 1)."""
    line, problem = INSPECTOR_DAMAGED[case]
    write_trace(tmp_path / "t" / "host-pid7.log", (line + "\n") * 2)
    rc, err = _ingest(capsys, tmp_path / "t", tmp_path / "db.duckdb")
    assert rc == 1 and err[0] == f"error: {tmp_path / 't' / 'host-pid7.log'}: {problem}", err
    assert len(err) == 2 and err[1].startswith(NOTHING)


def _stored_ops(db: Path) -> list[tuple[object, ...]]:
    import duckdb
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute("SELECT comm_name, nccl_op, exec_time_us FROM nccl_ops "
                           "ORDER BY ALL").fetchall()


@pytest.mark.parametrize("case", ["a 1 MiB comm_name", "a UTF-8 BOM"])
def test_an_inspector_file_the_sniff_missed_ingests(case: str, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A line longer than the sniffed 64 KiB (coll_perf after a 1 MiB comm_name), or a
    file that opens with a BOM, was skipped in silence; now its two ops are stored."""
    name = "c" * (1 << 20) if "MiB" in case else "dp"
    text = (_inspector(header={"comm_name": name}) + "\n") * 2
    write_trace(tmp_path / "t" / "host-pid7.log",
                ("\ufeff" + text) if "BOM" in case else text)
    rc, err = _ingest(capsys, tmp_path / "t", tmp_path / "db.duckdb")
    assert rc == 0 and not err
    assert _stored_ops(tmp_path / "db.duckdb") == [(name, "AllGather", 25.5)] * 2


FIRST_LINES = {"cut by a partial write": lambda line: line[40:],
               "a JSON list": lambda line: "[1, 2, 3]", "plain text": lambda line: "hello"}


@pytest.mark.parametrize("case", list(FIRST_LINES))
def test_an_inspector_file_whose_first_line_is_none_fails_alone(
        case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Inspector lines after a first line that is none were skipped without a word
    (beside a trace: exit 0, the file not even counted); now the file fails alone,
    naming the line the reader could not take (exit 3 beside the trace)."""
    line = _inspector(header={"comm_name": "dp"})
    write_trace(tmp_path / "t" / "host-pid7.log",
                FIRST_LINES[case](line) + "\n" + line + "\n" + line + "\n")
    write_trace(tmp_path / "t" / "rank0.json", _one_trace())
    rc, err = _ingest(capsys, tmp_path / "t", tmp_path / "db.duckdb")
    assert rc == 3 and len(err) == 1, err
    said = {"cut by a partial write": "malformed JSON at byte 5 of line 1: unexpected content "
            "after document)", "a JSON list": "line 1 is a list ([1,2,3]), not a JSON object)",
            "plain text": "malformed JSON at byte 1 of line 1: unexpected character)"}[case]
    assert err == [f"error: {tmp_path / 't' / 'host-pid7.log'}: not readable as NCCL "
                   f"Inspector JSONL ({said}"], err


def test_jsonl_of_another_tool_is_no_inspector_file(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The control: JSON lines without the plugin's keys, or text that names one outside
    a JSON object, stay no NCCL evidence (skipped as before)."""
    write_trace(tmp_path / "t" / "other.log", '{"a": 1}\n{"b": 2}\n')
    write_trace(tmp_path / "t" / "notes.log", 'notes\nthe key "coll_perf": is documented\n')
    write_trace(tmp_path / "t" / "rank0.json", _one_trace())
    rc, err = _ingest(capsys, tmp_path / "t", tmp_path / "db.duckdb")
    assert rc == 0 and not err, err


# --- NCCL Inspector values that are no measurement: refused with a count (round 10
# "Inspector exec time 1e308", round 9's negative / NaN / inf values) ---------------------

DAY = "negative, not finite or over a day (86,400,000,000 us)"
INSPECTOR_VALUES = {
    "exec time 1e308": ({"coll_exec_time_us": 1e308}, DAY, "1e308"),
    "exec time -1": ({"coll_exec_time_us": -1}, DAY, "-1"),
    "exec time NaN": ({"coll_exec_time_us": float("nan")}, DAY, "NaN"),
    "exec time a day and a second": ({"coll_exec_time_us": 86_401e6}, DAY, "86401000000.0"),
    "bus bandwidth Infinity": ({"coll_busbw_gbs": float("inf")}, "negative or not finite",
                               "Infinity"),
    "algo bandwidth -2": ({"coll_algobw_gbs": -2.0}, "negative or not finite", "-2.0"),
    "message size -4096": ({"coll_msg_size_bytes": -4096}, "outside [0, 2^63)", "-4096"),
}


@pytest.mark.parametrize("case", list(INSPECTOR_VALUES))
def test_an_inspector_value_that_is_no_measurement(case: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Stored before (exit 0): 1e308 us summed to inf in the report. Now one line naming
    the field, with the count of such lines (both here) and the first such value, then
    "nothing ingested" (exit 1)."""
    perf, what, first = INSPECTOR_VALUES[case]
    write_trace(tmp_path / "t" / "host-pid7.log", (_inspector(perf=perf) + "\n") * 2)
    rc, err = _ingest(capsys, tmp_path / "t", tmp_path / "db.duckdb")
    assert rc == 1 and err[0] == (f"error: {tmp_path / 't' / 'host-pid7.log'}: 2 NCCL "
                                  f"Inspector line(s) with coll_perf.{next(iter(perf))} "
                                  f"{what} (first: {first})"), err
    assert len(err) == 2 and err[1].startswith(NOTHING)


def test_inspector_values_at_their_bounds_ingest(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """The control: zero sizes and bandwidths, an execution time of exactly a day."""
    perf = {"coll_exec_time_us": 86_400e6, "coll_msg_size_bytes": 0, "coll_algobw_gbs": 0.0,
            "coll_busbw_gbs": 0.0}
    write_trace(tmp_path / "t" / "host-pid7.log", (_inspector(perf=perf) + "\n") * 2)
    rc, err = _ingest(capsys, tmp_path / "t", tmp_path / "db.duckdb")
    assert rc == 0 and not err
    assert _stored_ops(tmp_path / "db.duckdb") == [("", "AllGather", 86_400e6)] * 2


# --- an NCCL_DEBUG log whose communicator line has a rank outside [0, nRanks) (round 10
# "NCCL log rank past nRanks") ------------------------------------------------------------

HEAD = "node0:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
COMM_LINES = {
    "Init COMPLETE rank 5 of 2": "comm 0x55a0 rank 5 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 "
                                 "commId 0xabc - Init COMPLETE",
    "nRanks line rank 2 of 2": "comm 0x55a0 rank 2 nRanks 2 nNodes 1 localRanks 2 localRank 0 "
                               "MNNVL 0",
    "Init COMPLETE rank 0 of 0": "comm 0x55a0 rank 0 nranks 0 cudaDev 0 busId 18000 - Init "
                                 "COMPLETE",
}


@pytest.mark.parametrize("case", list(COMM_LINES))
def test_a_log_rank_outside_its_communicator(case: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Stored before (exit 0, world 2 with a rank 5). Now the log's line (exit 1)."""
    write_trace(tmp_path / "t" / "nccl.log", HEAD + f"node0:1:2 [0] NCCL INFO {COMM_LINES[case]}\n")
    rc, err = _ingest(capsys, tmp_path / "t", tmp_path / "db.duckdb")
    assert rc == 1 and err[0] == (f"error: {tmp_path / 't' / 'nccl.log'}: 1 communicator "
                                  "line(s) with a rank outside [0, nRanks) ('comm 0x.. rank R "
                                  "nRanks N')"), err
    assert len(err) == 2 and err[1].startswith(NOTHING)


def test_a_log_rank_inside_its_communicator_ingests(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The control: rank 1 of 2 in both kinds of line."""
    lines = [line.replace("rank 5", "rank 1").replace("rank 2 ", "rank 1 ")
             for line in list(COMM_LINES.values())[:2]]
    write_trace(tmp_path / "t" / "nccl.log",
                HEAD + "".join(f"node0:1:2 [0] NCCL INFO {line}\n" for line in lines))
    rc, err = _ingest(capsys, tmp_path / "t", tmp_path / "db.duckdb")
    assert rc == 0 and not err


def test_a_log_with_unit_separators_in_binary_garbage_ingests(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Binary garbage around a log's lines (stdout with a core dump mixed in) whose first
    line holds 0x1F bytes: "unreadable NCCL log (provided `new_columns` does not match
    number of columns in file (1 != 5 in file) …" before; now the NCCL lines are read."""
    garbage = b"\x00\x1fab\x1fcd\x1f\xff\xfe\x1f\n\x1f\x1f\x01\n"
    lines = HEAD + ("node0:1:2 [0] NCCL INFO comm 0x55a0 rank 1 nranks 2 cudaDev 0 busId "
                    "18000 - Init COMPLETE\n")
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "nccl.log").write_bytes(garbage + lines.encode() + garbage)
    rc, err = _ingest(capsys, tmp_path / "t", tmp_path / "db.duckdb")
    assert rc == 0 and not err, err
    import duckdb
    with duckdb.connect(str(tmp_path / "db.duckdb"), read_only=True) as con:
        assert con.execute("SELECT nccl_version, host FROM nccl_sources").fetchall() \
            == [("2.21.5+cuda12.4", "node0")]
        assert con.execute("SELECT rank, nranks FROM nccl_comms").fetchall() == [(1, 2)]


# --- the machine's failure while the database opens: exit 1, never blamed on the database
# or on $STEPSCOPE_MEMORY_LIMIT (round 10 "ingest in 400 MB of address space") ------------

MACHINE_AT_OPEN = {
    "400 MB of address space": ((__import__("resource").RLIMIT_AS, 400 << 20),
                                "out of memory; free memory, or ingest with fewer --jobs"),
    "a 20 KB file size limit": ((__import__("resource").RLIMIT_FSIZE, 20_000),
                                "the file size limit is reached; raise it (ulimit -f)"),
}


@pytest.mark.parametrize("case", list(MACHINE_AT_OPEN))
def test_the_machines_failure_at_open(case: str, tmp_path: Path) -> None:
    """Before: exit 2, "cannot open the database with $STEPSCOPE_MEMORY_LIMIT='1GB' (Out of
    Memory Error: Allocation failure); give a size such as 2GB" (a setting never given),
    or "cannot open the database (... File too large)". Now the machine's line, exit 1."""
    import os
    import resource
    import signal
    import subprocess
    import sys
    (limit, value), problem = MACHINE_AT_OPEN[case]
    write_trace(tmp_path / "t" / "rank0.json", _one_trace())

    def preexec() -> None:
        resource.setrlimit(limit, (value, value))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    env = {k: v for k, v in os.environ.items() if k != "STEPSCOPE_MEMORY_LIMIT"}
    proc = subprocess.run([sys.executable, "-P", "-m", "stepscope", "ingest", "t", "--db",
                           "x.duckdb", "--run", "x", "--quiet", "--jobs", "1"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=180, preexec_fn=preexec,
                          env=env, check=False)
    err = proc.stderr.splitlines()
    assert proc.returncode == 1 and len(err) == 1, (proc.returncode, err)
    assert "STEPSCOPE_MEMORY_LIMIT" not in err[0], err
    if "ulimit -v" in err[0]:  # below the floor every command refuses to start
        # (stepscope/address_space.py): the open is never reached, nothing is written
        assert err[0].startswith("error: out of memory; the address-space limit (ulimit "
                                 "-v) of 400 MiB is below the 600 MiB stepscope needs"), err
        assert not (tmp_path / "x.duckdb").exists()
        return
    if err[0].startswith("error: t/rank0.json: "):  # one malloc arena under an address-
        # space limit (stepscope/address_space.py): the open fits, the parse does not
        assert err[0].startswith(f"error: t/rank0.json: {problem}") and "(the machine's " \
            "failure, not the file's): the ingest stopped and nothing was committed" in err[0]
        return
    assert err[0].startswith(f"error: x.duckdb: cannot open the database: {problem}"), err
    assert "(the machine's failure, not the database's); nothing was committed" in err[0]


# --- no file handle left in the middle of the work: the machine's line, never the files'
# ("could not be stored ... please report this file") nor a raw "database error" ----------

@pytest.mark.parametrize("fds", [8, 9, 10])
def test_no_file_handle_left_is_the_machines(fds: int, tmp_path: Path) -> None:
    """Under `ulimit -n` 8: "t/rank0.json.gz, t/rank1.json.gz: could not be stored (IO
    Error: ... Too many open files) ... (please report this file)"; 9 or 10: "x.duckdb:
    database error (IOException: ...)". Both exit 1; now the machine's line."""
    import resource
    import subprocess
    import sys
    for r in range(2):
        write_trace(tmp_path / "t" / f"rank{r}.json.gz", kineto_trace(rank=r, world_size=2))

    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (fds, fds))

    proc = subprocess.run([sys.executable, "-P", "-m", "stepscope", "ingest", "t", "--db",
                           "x.duckdb", "--run", "x", "--quiet", "--jobs", "1"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=180, preexec_fn=preexec,
                          check=False)
    err = proc.stderr.splitlines()
    assert proc.returncode == 1 and len(err) == 1, (proc.returncode, err)
    assert err[0].startswith("error: too many open files in this process; raise the limit "
                             "(ulimit -n) (the machine's failure, not the "), err
