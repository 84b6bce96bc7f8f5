"""Flight Recorder dumps: safe loading, the fr_* tables, and `stepscope hang` on the real
16-rank dumps of nvidia-resiliency-ext (fault labels + upstream reference verdicts)."""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest
from conftest import REAL_TRACES, SAMPLES, validate_json

from stepscope.analyzers.hang import build_hang_report
from stepscope.analyzers.results import HangReport
from stepscope.cli import main
from stepscope.ingest import TraceFileError, ingest
from stepscope.ingest.nccl.flight_recorder import read_flight_recorder, split_profiling_name
from stepscope.ingest.nccl.safe_pickle import UnsafePickleError, load_plain

FR_ROOT = REAL_TRACES / "nvidia-resiliency-ext" / "tests" / "attribution" / "unit"
SCENARIOS = ("gpu_error_1st", "lock_gil_1st")


def scenario(name: str) -> Path:
    path = FR_ROOT / "fr_traces" / name
    if not path.is_dir():
        pytest.fail("tests/data/traces (the nvidia-resiliency-ext dumps) is missing")
    return path


def reference(name: str) -> dict[str, Any]:
    """The upstream tool's table row: PGID | desc | op | size | dtype | missing ranks."""
    lines = (FR_ROOT / "reference_outputs" / f"{name}_reference.txt").read_text().splitlines()
    cells = [c.strip() for c in lines[1].split("|")]
    return {"pg": cells[0], "desc": cells[1].split(",")[0], "op": cells[2], "size": cells[3],
            "dtype": cells[4], "missing": sorted(int(r) for r in cells[5].split(","))}


def fault_ranks(name: str) -> list[int]:
    text = (scenario(name) / "fault_injection.log").read_text()
    match = re.search(r"Fault ranks: \[([\d, ]+)\]", text)
    assert match
    return sorted(int(r) for r in match.group(1).split(","))


def hang_json(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["hang", str(path), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    validate_json(out, HangReport)
    return out


@pytest.mark.parametrize("name", SCENARIOS)
def test_hang_matches_reference_and_fault_log(name: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    ref = reference(name)
    out = hang_json(scenario(name), capsys)
    first = out["stuck"][0]
    assert (first["pg_name"], first["pg_desc"], first["profiling_name"], first["dtype"]) == (
        ref["pg"], ref["desc"], ref["op"], ref["dtype"])
    assert "x".join(str(d) for d in first["sizes"][0]) == ref["size"]
    assert first["missing_ranks"] == ref["missing"]
    assert first["kind"] == "not_entered" and first["state"] == "scheduled"
    assert out["suspect_ranks"] == fault_ranks(name)
    assert f"pg {ref['pg']}" in out["verdict"]
    assert out["mismatches"] == []
    assert out["fr_versions"] == ["2.9"] and out["nccl_versions"] == ["2.27.3"]


def test_gpu_error_explains_the_rank_that_entered(capsys: pytest.CaptureFixture[str]) -> None:
    """Rank 14 (faulted) did enter #20537; it is named because it never saw #20530-#20536
    complete while 13 and 15 did."""
    out = hang_json(scenario("gpu_error_1st"), capsys)
    lag = next(x for x in out["completion_lags"] if x["pg_name"] == "74")
    assert lag == {"pg_name": "74", "pg_desc": "EXPERT_MODEL_PARALLEL_GROUP",
                   "lagging_ranks": [12, 14], "ahead_ranks": [13, 15],
                   "first_seq": 20530, "last_seq": 20536}
    group = next(g for g in out["groups"] if g["pg_name"] == "74")
    assert group["last_completed_by_all"] == 20529 and group["last_enqueued_max"] == 20538


def test_a_rank_that_wrote_no_dump_is_named(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A rank killed by its GPU error usually writes no dump: without rank 12's, its
    peers still wait for it, so it is a suspect (last: a dump may just not have been
    collected), and the stuck table says which members wrote none. It was named only in
    a note, and the verdict read 'Suspect rank 14'."""
    job = tmp_path / "no12"
    shutil.copytree(scenario("gpu_error_1st"), job)
    (job / "_dump_12").unlink()
    out = hang_json(job, capsys)
    assert out["suspect_ranks"] == [14, 12]
    silent = next(s for s in out["suspects"] if s["rank"] == 12)
    assert silent["reasons"][0].startswith("wrote no Flight Recorder dump while rank 14 "
                                           "waited in nccl:all_to_all #20530 of "
                                           "EXPERT_MODEL_PARALLEL_GROUP (pg 74)")
    assert "Suspect ranks 12, 14." in out["verdict"]
    a2a = next(x for x in out["stuck"] if x["pg_name"] == "74")
    assert a2a["ranks_without_dump"] == [12] and a2a["missing_ranks"] == []
    assert main(["hang", str(job)]) == 0
    assert "| scheduled | **12 (no dump)** | 14 |" in capsys.readouterr().out


def test_lock_gil_ranks_have_nothing_in_flight(capsys: pytest.CaptureFixture[str]) -> None:
    out = hang_json(scenario("lock_gil_1st"), capsys)
    assert [(s["rank"], s["idle"]) for s in out["suspects"]] == [(9, True), (14, True)]
    assert "stuck outside NCCL" in out["verdict"]


def test_markdown_for_people(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "hang.md"
    assert main(["hang", str(scenario("lock_gil_1st")), "--out", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("# Why did `lock_gil_1st` hang?")
    assert "| 72 | EXPERT_MODEL_PARALLEL_GROUP | nccl:all_to_all | 45265 | 2048x5120 | " \
           "BFloat16 | scheduled | **9, 14** |" in text


def test_report_of_dumps_alone_says_what_it_cannot_tell(tmp_path: Path) -> None:
    """A run of Flight Recorder dumps alone (16 NCCL ranks, no profiler trace): a GPU run
    whose GPU is not named, no zero breakdown table, no "no category costs enough" and no
    "0 stragglers" (they read as measured; nothing was)."""
    db = tmp_path / "fr.duckdb"
    ingest([scenario("lock_gil_1st")], db=db, run="fr")
    md, page = tmp_path / "fr.md", tmp_path / "fr.html"
    assert main(["report", "fr", "--db", str(db), "--out", str(md)]) == 0
    assert main(["report", "fr", "--db", str(db), "--format", "html", "--out", str(page)]) == 0
    text = md.read_text()
    assert "- 0 of 16 ranks on ? host(s); device: GPU (not named in the Flight Recorder " \
           "dumps);" in text
    assert "no profiler traces (only NCCL evidence: NCCL logs or Flight Recorder dumps)" in text
    assert "## Where the step time went\n\n- not attributed: the run holds no profiler " \
           "traces\n" in text
    assert "| compute |" not in text and "no category costs enough" not in text
    assert "CPU-only" not in text and "ProfilerStep" not in text
    assert text.count("- none: no step of any rank was attributed") == 2
    html = page.read_text()
    assert "Not attributed: the run holds no profiler traces." in html
    assert "no category costs enough" not in html and "0.00 ms" not in html


@pytest.mark.slow
def test_hang_on_an_ingested_run_and_errors(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.duckdb"
    ingest([scenario("gpu_error_1st")], db=db, run="job")
    ingest([SAMPLES / "ddp"], db=db, run="ddp")
    assert main(["hang", "job", "--db", str(db), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["suspect_ranks"] == [12, 14]
    assert main(["hang", "ddp", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no Flight Recorder dump" in err
    assert main(["hang", "nope", "--db", str(db)]) == 2


def test_fr_tables(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    result = ingest([scenario("gpu_error_1st")], db=db)
    assert result.exit_code == 0 and len(result.nccl_files) == 16
    con = duckdb.connect(str(db), read_only=True)
    n, ranks = con.execute("SELECT count(*), list(DISTINCT rank ORDER BY rank) FROM nccl_sources"
                           " WHERE kind = 'flight_recorder' AND rank_source = 'file_name'"
                           " AND note IS NULL").fetchone()
    assert n == 16 and ranks == list(range(16))
    assert con.execute("SELECT count(*) FROM fr_entries").fetchone() == (289,)
    row = con.execute(
        "SELECT op, peer_rank, peer_local_rank, input_sizes, input_dtypes, state, "
        "time_started_ns FROM fr_entries WHERE rank = 0 AND record_id = 86676").fetchone()
    assert row == ("send", 12, 3, [[4096, 1, 5120]], ["BFloat16"], "scheduled", None)
    # pg_id -> pg_name: from entries where they exist, else creation order (agreeing)
    sources = dict(con.execute(
        "SELECT pg_id_source, count(*) FROM fr_groups GROUP BY ALL").fetchall())
    assert sources == {"entries": 88, "creation_order": 112}
    assert con.execute("SELECT count(*) FROM process_groups WHERE source = 'flight_recorder'"
                       ).fetchone() == (65,)


# ---- untrusted pickles -------------------------------------------------------------------

class _Payload:
    """Unpickling this would run `touch <marker>`."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def crafted_dump(marker: Path, protocol: int) -> bytes:
    """A dump-shaped pickle (it mentions pg_config) whose entries would run a command."""
    return pickle.dumps({"version": "2.9", "pg_config": {}, "entries": [_Payload(marker)]},
                        protocol=protocol)


@pytest.mark.parametrize("protocol", [0, 2, 4, 5])
def test_crafted_pickle_is_refused_and_runs_nothing(tmp_path: Path, protocol: int) -> None:
    marker = tmp_path / "pwned"
    data = crafted_dump(marker, protocol)
    with pytest.raises(UnsafePickleError, match=r"imports (posix|os|nt)\.system"):
        load_plain(data)
    path = tmp_path / "_dump_3"
    path.write_bytes(data)
    with pytest.raises(TraceFileError) as exc:
        read_flight_recorder(path, str(path))
    assert "\n" not in str(exc.value) and str(path) in str(exc.value)
    assert "refused" in str(exc.value) and "nothing was executed" in str(exc.value)
    assert not marker.exists()


def test_crafted_pickle_in_a_job_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                        ) -> None:
    """One refused dump: one line naming it, exit 3, the other dumps still analysed."""
    job = tmp_path / "job"
    shutil.copytree(scenario("lock_gil_1st"), job / "fr")
    marker = tmp_path / "pwned"
    (job / "fr" / "_dump_9").write_bytes(crafted_dump(marker, 4))
    assert main(["ingest", str(job), "--db", str(tmp_path / "s.duckdb")]) == 3
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len([ln for ln in lines if "_dump_9" in ln]) == 1 and "refused" in err
    assert not marker.exists()
    con = duckdb.connect(str(tmp_path / "s.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM nccl_sources").fetchone() == (15,)


def test_plain_builtins_only() -> None:
    value = {"a": [1, 2.5, None, True, "x", b"y", (1, 2)], "b": {"c": frozenset({1})}}
    assert load_plain(pickle.dumps(value, protocol=4)) == value
    for bad in (pickle.dumps(Path("/tmp")), pickle.dumps(complex(1, 2), protocol=2)):
        with pytest.raises(UnsafePickleError):
            load_plain(bad)


# ---- the JSON form and bad input -----------------------------------------------------------

def as_json_dump(path: Path) -> dict[str, Any]:
    """What `_dump_nccl_trace_json` writes for the same content: lists for tuples, numbers
    as strings in pg_status, 0 for times never observed."""
    raw = load_plain(path.read_bytes())
    for e in raw["entries"]:
        e["process_group"] = list(e["process_group"])
        for key in ("time_discovered_started_ns", "time_discovered_completed_ns"):
            e[key] = e[key] or 0
    raw["pg_status"] = {k: {f: str(v) for f, v in s.items()} for k, s in raw["pg_status"].items()}
    raw["comm_lib_version"] = raw.pop("nccl_version")
    raw["version"] = "2.10"
    return raw


def test_json_form_reads_like_the_pickle(tmp_path: Path) -> None:
    src = scenario("gpu_error_1st") / "_dump_12"
    dst = tmp_path / "nccl_trace_rank_12.json"
    dst.write_text(json.dumps(as_json_dump(src)))
    a, b = read_flight_recorder(src, str(src)), read_flight_recorder(dst, str(dst))
    assert (b.format, b.version, b.comm_lib_version, b.rank) == ("json", "2.10", "2.27.3", 12)
    assert a.entries.to_pylist() == b.entries.to_pylist()
    assert a.groups.to_pylist() == b.groups.to_pylist()


def test_job_folder_with_traces_and_json_dumps(tmp_path: Path) -> None:
    """Kineto traces in traces/, FR dumps (JSON, .json names) in fr/: one ingest."""
    job = tmp_path / "job"
    shutil.copytree(SAMPLES / "ddp", job / "traces")
    (job / "fr").mkdir()
    for r in range(16):
        src = scenario("lock_gil_1st") / f"_dump_{r}"
        (job / "fr" / f"rank_{r}.json").write_text(json.dumps(as_json_dump(src)))
    result = ingest([job], db=tmp_path / "s.duckdb")
    assert result.exit_code == 0
    assert sorted(result.ranks) == [0, 1, 2, 3] and len(result.nccl_files) == 16
    con = duckdb.connect(str(tmp_path / "s.duckdb"), read_only=True)
    report = build_hang_report(con, "job")
    assert report.suspect_ranks == [9, 14]


def test_desync_names_the_odd_rank(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Rank 13 issues #20537 of pg 74 as Float while its peers use BFloat16."""
    job = tmp_path / "job"
    job.mkdir()
    for r in range(16):
        raw = as_json_dump(scenario("gpu_error_1st") / f"_dump_{r}")
        if r == 13:
            for e in raw["entries"]:
                if e["pg_id"] == 11 and e["collective_seq_id"] == 20537:
                    e["input_dtypes"] = ["Float"]
        (job / f"_dump_{r}").write_text(json.dumps(raw))
    out = hang_json(job, capsys)
    mm = [m for m in out["mismatches"] if m["pg_name"] == "74"]
    assert [(m["seq"], m["fields"]) for m in mm] == [(20537, ["dtype"])]
    assert 13 in out["suspect_ranks"]
    assert any("desync" in r for s in out["suspects"] if s["rank"] == 13 for r in s["reasons"])


BAD_DUMPS = {
    "truncated.pkl": lambda good: good[: len(good) // 2],
    "garbage": lambda good: b"\x80\x04" + os.urandom(64),
    "not_a_dict": lambda good: pickle.dumps([1, 2, 3], protocol=4) + b"",
    "entries_not_list.json": lambda good: b'{"version": "2.9", "pg_config": {}, "entries": 3}',
    "bad_entry.json": lambda good: json.dumps({"version": "2.9", "pg_config": {"0": {
        "name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
        "entries": [{"profiling_name": "nccl:all_reduce", "state": "scheduled"}]}).encode(),
    "bad_ranks.json": lambda good: b'{"pg_config": {"0": {"ranks": "[0, 1"}}, "entries": []}',
    "bad_state.json": lambda good: json.dumps({"pg_config": {}, "entries": [{
        "process_group": ["0", "x"], "profiling_name": "nccl:all_reduce",
        "state": "exploded"}]}).encode(),
}


@pytest.mark.parametrize("name", sorted(BAD_DUMPS))
def test_fuzzed_dumps_fail_alone_with_one_line(name: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    job = tmp_path / "job"
    job.mkdir()
    good = (scenario("lock_gil_1st") / "_dump_8").read_bytes()
    (job / "_dump_8").write_bytes(good)
    bad = job / name
    bad.write_bytes(BAD_DUMPS[name](good))
    code = main(["ingest", str(bad), str(job / "_dump_8"), "--db", str(tmp_path / "s.duckdb"),
                 "--run", "r"])
    err = capsys.readouterr().err
    assert code == 3, err
    bad_lines = [ln for ln in err.splitlines() if name in ln]
    assert len(bad_lines) == 1 and "Traceback" not in err


def test_rank_identity_conflict_is_reported(tmp_path: Path) -> None:
    """A dump named for rank 5 whose process groups all contain only 12 and friends."""
    src = scenario("gpu_error_1st") / "_dump_12"
    dst = tmp_path / "_dump_5"
    shutil.copy(src, dst)
    dump = read_flight_recorder(dst, str(dst))
    assert dump.rank == 5 and dump.rank_conflict is not None and "[12]" in dump.rank_conflict
    nameless = tmp_path / "dump.pickle"
    shutil.copy(src, nameless)
    assert read_flight_recorder(nameless, str(nameless)).rank_source == "pg_config"


def test_profiling_names() -> None:
    assert split_profiling_name("nccl:all_reduce") == ("nccl", "all_reduce", None)
    assert split_profiling_name("nccl:send 0->3") == ("nccl", "send", 3)
    assert split_profiling_name("gloo:recv 2<-0") == ("gloo", "recv", 0)
    assert split_profiling_name("custom") == (None, "custom", None)


CHECKED_FIELDS = ("record_id", "pg_id", "collective_seq_id", "p2p_seq_id", "op_id",
                  "time_created_ns", "time_discovered_started_ns",
                  "time_discovered_completed_ns", "timeout_ms")


@pytest.mark.parametrize("value", [True, False, [1], {"n": 1}], ids=repr)
@pytest.mark.parametrize("key", CHECKED_FIELDS)
def test_a_boolean_or_container_id_fails_the_dump(key: str, value: Any, tmp_path: Path) -> None:
    """A JSON boolean is no id, sequence number or time (True is an int in Python): the
    dump fails with one line naming the entry and the field, as 2^70 does; it was stored
    as a missing value, in silence."""
    src = scenario("gpu_error_1st") / "_dump_12"
    raw = as_json_dump(src)
    raw["entries"][1][key] = value
    dst = tmp_path / "nccl_trace_rank_12.json"
    dst.write_text(json.dumps(raw))
    with pytest.raises(TraceFileError, match=f"Flight Recorder entry 1: {key} is not a "
                       "whole number"):
        read_flight_recorder(dst, str(dst))
