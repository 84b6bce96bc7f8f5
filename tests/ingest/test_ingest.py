"""Ingest into DuckDB: runs, ranks, bad input, atomic replacement, exit codes."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import SAMPLES, kineto_trace, q, write_trace

from stepscope.cli import main
from stepscope.ingest import NothingIngestedError, UsageError, ingest


def test_ingest_sample_run(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    result = ingest([SAMPLES / "ddp"], db=db)
    assert result.run == "ddp" and sorted(result.ranks) == [0, 1, 2, 3]
    assert result.exit_code == 0 and result.skipped == [str(SAMPLES / "ddp" / "variant.json")]
    assert q(db, "SELECT run, status, world_size, n_ranks FROM runs") == [
        ("ddp", "complete", 4, 4)]
    ranks = q(db, "SELECT rank, rank_source, host, backend FROM ranks ORDER BY rank")
    assert ranks == [(r, "distributedInfo", "vm", "gloo") for r in range(4)]
    # every rank has the same steps and the same number of collectives
    per_rank = q(db, "SELECT rank, count(*) FROM collectives GROUP BY rank ORDER BY rank")
    assert len({n for _, n in per_rank}) == 1
    assert q(db, "SELECT count(DISTINCT step) FROM steps") == [(3,)]


@pytest.mark.slow
def test_every_variant_ingests_with_rank_identity(tmp_path: Path) -> None:
    db = tmp_path / "all.duckdb"
    assert main(["ingest", str(SAMPLES), "--run-per-dir", "--db", str(db), "--quiet"]) == 0
    runs = q(db, "SELECT run, n_ranks, status FROM runs ORDER BY run")
    assert runs == [(v, 4, "complete") for v in
                    ("ckpt", "ckpt_reent", "ddp", "fsdp2", "pipeline", "straggler")]
    # pids differ per rank: the rank came from each file's own distributedInfo
    assert q(db, "SELECT count(DISTINCT pid) FROM ranks WHERE run = 'ddp'") == [(4,)]
    groups = q(db, "SELECT pg_name, ranks FROM process_groups WHERE run = 'pipeline' ORDER BY 1")
    assert groups == [("0", [0, 1, 2, 3]), ("1", [0, 1]), ("2", [2, 3])]


@pytest.mark.slow
def test_reingest_replaces_only_that_run(make_run: Callable[..., Path], tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    ingest([make_run(world_size=2)], db=db, run="a")
    ingest([make_run(world_size=2)], db=db, run="b")
    before_b = q(db, "SELECT count(*) FROM gpu_ops WHERE run = 'b'")
    ingest([make_run(world_size=4, steps=3)], db=db, run="a")
    assert q(db, "SELECT n_ranks FROM runs WHERE run = 'a'") == [(4,)]
    assert q(db, "SELECT count(DISTINCT rank) FROM gpu_ops WHERE run = 'a'") == [(4,)]
    assert q(db, "SELECT count(*) FROM gpu_ops WHERE run = 'b'") == before_b
    assert q(db, "SELECT count(*) FROM runs") == [(2,)]


BAD_INPUTS: dict[str, tuple[Callable[[Path], Path], str]] = {
    "truncated gzip": (
        lambda d: _truncated_gzip(d / "rank1.json.gz"),
        "rank1.json.gz: truncated gzip file"),
    "corrupt gzip": (
        lambda d: _write(d / "rank1.json.gz", b"\x1f\x8b\x08\x00" + b"garbage" * 50),
        "rank1.json.gz: corrupt gzip data"),
    "truncated JSON": (
        lambda d: write_trace(d / "rank1.json.gz", '{"traceEvents": [{"ph": "X",'),
        "rank1.json.gz: truncated JSON at byte 28"),
    "invalid JSON": (
        lambda d: write_trace(d / "rank1.json.gz", '{"traceEvents": [{"ph": "X" "cat": 1}]}'),
        "rank1.json.gz: invalid JSON"),
    "JSON that is not a trace": (
        lambda d: write_trace(d / "rank1.json.gz", {"hello": "world"}),
        "rank1.json.gz: not a Kineto trace: no traceEvents list at the top level"),
    "JSON array": (
        lambda d: write_trace(d / "rank1.json.gz", "[1, 2, 3]"),
        "rank1.json.gz: not a Kineto trace: the JSON is a list, not an object holding "
        "traceEvents"),
    "empty file": (
        lambda d: _write(d / "rank1.json", b""),
        "rank1.json: empty file"),
    "events without known categories": (
        lambda d: write_trace(d / "rank1.json.gz", {
            "traceEvents": [{"ph": "X", "cat": "mystery", "name": "x", "ts": 1, "dur": 1}]}),
        "rank1.json.gz: not a Kineto trace: no CPU op, kernel or annotation events"),
    "traceEvents not a list": (
        lambda d: write_trace(d / "rank1.json.gz", {"traceEvents": {"a": 1}}),
        "rank1.json.gz: not a Kineto trace: traceEvents is not a list"),
}


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _truncated_gzip(path: Path) -> Path:
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb") as gz:
        gz.write(json.dumps(kineto_trace(rank=1)).encode())
    data = buf.getvalue()
    path.write_bytes(data[: len(data) // 2])
    return path


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_file_is_one_line_and_others_still_ingest(
        case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_bad, expected = BAD_INPUTS[case]
    run_dir = tmp_path / "job"
    write_trace(run_dir / "rank0.json.gz", kineto_trace(rank=0, world_size=2))
    make_bad(run_dir)
    db = tmp_path / "x.duckdb"
    code = main(["ingest", str(run_dir), "--db", str(db), "--quiet"])
    err = capsys.readouterr().err
    assert code == 3, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert lines[0].startswith("error: ") and expected in lines[0]
    status, failed = q(db, "SELECT status, failed_files FROM runs")[0]
    assert status == "partial"
    assert [f["file"].rsplit("/", 1)[-1] for f in json.loads(failed)] == [
        expected.split(":")[0]]
    assert q(db, "SELECT rank FROM ranks") == [(0,)]


def test_unknown_categories_are_recorded_not_fatal(tmp_path: Path) -> None:
    extra = [{"ph": "X", "cat": "brand_new_thing", "name": "x", "pid": 1, "tid": 1,
              "ts": 10.0, "dur": 1.0}]
    write_trace(tmp_path / "j" / "rank0.json.gz", kineto_trace(rank=0, world_size=1,
                                                              extra_events=extra))
    db = tmp_path / "u.duckdb"
    assert ingest([tmp_path / "j"], db=db).exit_code == 0
    assert q(db, "SELECT unknown_categories FROM ranks") == [('["brand_new_thing"]',)]


def test_strict_fails_whole_ingest_and_leaves_db(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.duckdb"
    ingest([SAMPLES / "ddp"], db=db, run="keep")
    run_dir = tmp_path / "job"
    write_trace(run_dir / "rank0.json.gz", kineto_trace(rank=0))
    _write(run_dir / "rank1.json", b"")
    code = main(["ingest", str(run_dir), "--db", str(db), "--strict", "--run", "keep"])
    err = capsys.readouterr().err
    assert code == 1
    assert "rank1.json: empty file (--strict: nothing was ingested)" in err
    assert q(db, "SELECT run, n_ranks FROM runs") == [("keep", 4)]
    assert q(db, "SELECT count(DISTINCT rank) FROM cpu_ops") == [(4,)]


def test_nothing_ingested_exit_1_and_db_untouched(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "n.duckdb"
    ingest([SAMPLES / "ddp"], db=db)
    bad = tmp_path / "bad"
    _write(bad.mkdir() or bad / "rank0.json", b"")
    assert main(["ingest", str(bad), "--db", str(db), "--run", "ddp"]) == 1
    assert "nothing ingested into run 'ddp'" in capsys.readouterr().err
    assert q(db, "SELECT n_ranks, status FROM runs WHERE run = 'ddp'") == [(4, "complete")]


@pytest.mark.interrupt
def test_interrupted_ingest_leaves_db_as_it_was(tmp_path: Path) -> None:
    db = tmp_path / "i.duckdb"
    ingest([SAMPLES / "ddp"], db=db)
    before = q(db, "SELECT count(*) FROM cpu_ops")

    def interrupt(done: int, total: int, file: str) -> None:
        if done == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ingest([SAMPLES / "pipeline"], db=db, run="ddp", progress=interrupt)
    assert q(db, "SELECT count(*) FROM cpu_ops") == before
    assert q(db, "SELECT run FROM runs") == [("ddp",)]


def test_rank_from_file_name_when_no_distributed_info(tmp_path: Path) -> None:
    for r, name in enumerate(["worker0.json.gz", "trace_rank-1.json.gz", "x_rank_2.json"]):
        write_trace(tmp_path / "j" / name, kineto_trace(rank=r, with_distributed=False))
    db = tmp_path / "f.duckdb"
    result = ingest([tmp_path / "j"], db=db)
    assert sorted(result.ranks) == [0, 1, 2]
    assert q(db, "SELECT DISTINCT rank_source FROM ranks") == [("file_name",)]


def test_single_file_without_rank_is_rank_0(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "trace.json.gz", kineto_trace(with_distributed=False))
    result = ingest([path], db=tmp_path / "o.duckdb")
    assert result.ranks == [0]


def test_unknown_rank_among_several_files_says_how_to_fix(tmp_path: Path) -> None:
    write_trace(tmp_path / "j" / "a.json.gz", kineto_trace(with_distributed=False))
    write_trace(tmp_path / "j" / "b.json.gz", kineto_trace(with_distributed=False))
    result_err = None
    try:
        ingest([tmp_path / "j"], db=tmp_path / "o.duckdb")
    except NothingIngestedError as exc:
        result_err = str(exc)
    assert result_err and "nothing ingested" in result_err
    r = ingest([tmp_path / "j", SAMPLES / "ddp" / "rank0.json.gz"], db=tmp_path / "p.duckdb")
    problems = dict(r.failures)
    assert "rename it like rank3.json.gz" in problems[str(tmp_path / "j" / "a.json.gz")]


def test_duplicate_rank_names_both_files(tmp_path: Path) -> None:
    write_trace(tmp_path / "a" / "rank0.json.gz", kineto_trace(rank=0))
    write_trace(tmp_path / "b" / "rank0.json.gz", kineto_trace(rank=0))
    r = ingest([tmp_path / "a", tmp_path / "b"], db=tmp_path / "d.duckdb", run="dup")
    assert r.exit_code == 3 and r.ranks == [0]
    (file, problem), = r.failures
    assert file == str(tmp_path / "b" / "rank0.json.gz")
    assert f"rank 0 is also claimed by {tmp_path / 'a' / 'rank0.json.gz'}" in problem


def test_archives(tmp_path: Path) -> None:
    traces = [json.dumps(kineto_trace(rank=r, world_size=2)).encode() for r in range(2)]
    zpath = tmp_path / "job.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        for r, data in enumerate(traces):
            zf.writestr(f"job/rank{r}.json", data)
        zf.writestr("../evil.json", b"{}")
    tpath = tmp_path / "job2.tar.gz"
    with tarfile.open(tpath, "w:gz") as tf:
        for r, data in enumerate(traces):
            info = tarfile.TarInfo(f"traces/rank{r}.json")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    db = tmp_path / "a.duckdb"
    assert ingest([zpath], db=db).ranks == [0, 1]
    assert ingest([tpath], db=db).ranks == [0, 1]
    assert q(db, "SELECT run, n_ranks FROM runs ORDER BY run") == [("job", 2), ("job2", 2)]
    files = q(db, "SELECT source_file FROM ranks WHERE run = 'job' ORDER BY rank")
    assert files == [(f"{zpath}!job/rank0.json",), (f"{zpath}!job/rank1.json",)]


def test_an_archive_skips_the_json_that_is_no_trace_as_a_folder_does(tmp_path: Path) -> None:
    """A tar.gz of a job folder with its ground_truth.json and model.json beside the
    traces ingests complete, as the folder does (it was partial, exit 3, 'not a Kineto
    trace' for each)."""
    job = SAMPLES.parent / "simulated" / "healthy"
    tpath = tmp_path / "healthy.tar.gz"
    with tarfile.open(tpath, "w:gz") as tf:
        tf.add(job, arcname="healthy")
    result = ingest([tpath], db=tmp_path / "a.duckdb")
    assert result.status == "complete" and result.failures == []
    assert result.ranks == list(range(8))
    assert sorted(result.skipped) == [f"{tpath}!healthy/ground_truth.json",
                                      f"{tpath}!healthy/model.json"]


def test_unreadable_archive_is_a_file_failure(tmp_path: Path) -> None:
    (tmp_path / "j").mkdir()
    _write(tmp_path / "j" / "broken.zip", b"PK\x03\x04 not really")
    write_trace(tmp_path / "j" / "rank0.json.gz", kineto_trace(rank=0))
    r = ingest([tmp_path / "j"], db=tmp_path / "z.duckdb")
    assert r.exit_code == 3
    assert r.failures[0][0].endswith("broken.zip")
    assert "unreadable archive" in r.failures[0][1]


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ingest", str(tmp_path / "nope")]) == 2
    assert f"error: {tmp_path / 'nope'}: no such file or directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["ingest", str(tmp_path / "empty")]) == 2
    assert "no trace files" in capsys.readouterr().err
    assert main(["frobnicate"]) == 2
    assert "invalid choice" in capsys.readouterr().err
    assert main(["summary", "--db", str(tmp_path / "none.duckdb")]) == 2
    assert "no stepscope database here; run `stepscope ingest` first" in capsys.readouterr().err
    with pytest.raises(UsageError):
        ingest([], db=tmp_path / "x.duckdb")


def test_summary_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.duckdb"
    ingest([SAMPLES / "pipeline"], db=db)
    assert main(["summary", "--db", str(db), "--format", "json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["run"] == "pipeline" and row["n_ranks"] == 4 and row["steps"] == 3
    assert row["collective_types"] == "all_reduce, recv, send"
    assert row["devices"] == "CPU only" and row["hosts"] == 1
    assert main(["summary", "missing", "--db", str(db)]) == 2
    assert "no run named 'missing' (runs: pipeline)" in capsys.readouterr().err
    assert main(["summary", "--db", str(db)]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0].split()[:3] == ["run", "status", "ranks"]
    assert "pipeline" in text


def test_python_api(tmp_path: Path) -> None:
    import stepscope

    db = tmp_path / "api.duckdb"
    result = stepscope.ingest_run(SAMPLES / "straggler", db=db, run="s")
    assert result.status == "complete"
    with stepscope.open(db) as store:
        assert store.runs() == ["s"]
        ranks = store.table("ranks", run="s")
        assert ranks["rank"].sort().to_list() == [0, 1, 2, 3]
        n = store.sql("SELECT count(*) AS n FROM steps WHERE run = $r", {"r": "s"})["n"][0]
        assert n == 12
        with pytest.raises(UsageError):
            store.table("nope")


def test_reader_open_does_not_block_other_readers(tmp_path: Path) -> None:
    import stepscope

    db = tmp_path / "ro.duckdb"
    stepscope.ingest_run(SAMPLES / "ddp", db=db)
    with stepscope.open(db) as a, stepscope.open(db) as b:
        assert a.runs() == b.runs() == ["ddp"]


def test_run_per_dir_names_collisions_by_parent(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    for parent in ("cpu", "sim"):
        write_trace(tmp_path / parent / "straggler" / "rank0.json.gz", kineto_trace(rank=0))
    write_trace(tmp_path / "sim" / "healthy" / "rank0.json.gz", kineto_trace(rank=0))
    db = tmp_path / "c.duckdb"
    assert main(["ingest", str(tmp_path / "cpu"), str(tmp_path / "sim"), "--run-per-dir",
                 "--db", str(db), "--quiet"]) == 0
    assert q(db, "SELECT run FROM runs ORDER BY run") == [
        ("cpu-straggler",), ("healthy",), ("sim-straggler",)]
    # the new names are said, even with --quiet (they changed in silence)
    err = capsys.readouterr().err
    assert (f"note: 2 folders are named 'straggler': ingested as runs 'cpu-straggler' "
            f"({tmp_path / 'cpu' / 'straggler'}) and 'sim-straggler' "
            f"({tmp_path / 'sim' / 'straggler'})") in err
    assert "healthy" not in err


def _child_processes() -> list[int]:
    """This process's children (Linux: /proc/self/task/*/children)."""
    found: list[int] = []
    for task in Path("/proc/self/task").iterdir():
        found += [int(pid) for pid in (task / "children").read_text().split()]
    return found


def test_workers_started_before_the_database_opens_stop_when_it_cannot(
        tmp_path: Path) -> None:
    """The worker processes start while the writer opens the database; when it cannot
    (not a DuckDB file), the ingest fails with its one line and no worker is left."""
    db = tmp_path / "notes.duckdb"
    db.write_text("not a database")
    before = _child_processes()
    with pytest.raises(UsageError, match="not a DuckDB file"):
        ingest([SAMPLES / "ddp"], db=db, run="ddp", executor="process", jobs=2)
    assert _child_processes() == before
    assert db.read_text() == "not a database"
