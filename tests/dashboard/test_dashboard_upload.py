"""The dashboard's way in: Upload (good, partial, bad files; archives; size limit; server
folder), the Runs page, deleting a run, and the staged single-writer ingest."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from conftest import kineto_trace
from dashboard_helpers import app_test, button, no_exception, tar_gz, texts, upload

from stepscope.dashboard.app.uploads import (
    default_run_name,
    ingest_staged,
    resolve_under,
    safe_file_name,
    trace_folders,
)
from stepscope.ingest import DatabaseBusyError, UsageError
from stepscope.ingest.merge import delete_run, retry_busy

pytestmark = pytest.mark.slow  # uploads and ingests through the page


def rank_file(rank: int, world: int = 2) -> bytes:
    return gzip.compress(json.dumps(kineto_trace(rank=rank, world_size=world)).encode(),
                         mtime=0)


def runs_in(db: Path) -> dict[str, tuple[str, int, str]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute("SELECT run, status, n_ranks, CAST(failed_files AS VARCHAR) "
                           "FROM runs").fetchall()
    finally:
        con.close()
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


def test_empty_database_opens_on_upload_with_samples(monkeypatch, tmp_path):
    at = app_test(monkeypatch, tmp_path / "new.duckdb")
    at.run()
    no_exception(at)
    assert at.query_params["page"] == ["upload"] or at.query_params["page"] == "upload"
    assert "The database is empty" in texts(at)
    assert any(b.key == "load_sample" for b in at.button)
    assert at.selectbox(key="sample_set").value == "simulated/straggler"


def test_upload_good_files(monkeypatch, tmp_path):
    db = tmp_path / "db.duckdb"
    at = app_test(monkeypatch, db, page="upload")
    at.run()
    upload(at, [("rank0.json.gz", rank_file(0)), ("rank1.json.gz", rank_file(1))], "job42")
    no_exception(at)
    assert "Run 'job42' ingested: 2 rank(s) from 2 file(s)" in texts(at)
    assert runs_in(db)["job42"][:2] == ("complete", 2)
    assert any(b.key == "open_new_run" for b in at.button)
    # the uploaded bytes are gone; stored names are upload:NAME, not a temp path
    con = duckdb.connect(str(db), read_only=True)
    sources = [r[0] for r in con.execute("SELECT source_file FROM ranks").fetchall()]
    con.close()
    assert sorted(sources) == ["upload:rank0.json.gz", "upload:rank1.json.gz"]
    assert not list(tmp_path.glob(".stepscope-staging-*"))


@pytest.mark.slow
def test_upload_partial_names_each_failed_file(monkeypatch, tmp_path):
    db = tmp_path / "db.duckdb"
    at = app_test(monkeypatch, db, page="upload")
    at.run()
    upload(at, [("rank0.json.gz", rank_file(0, 3)), ("rank1.json.gz", rank_file(1, 3)),
                ("rank2.json", b"{not json")], "partial")
    no_exception(at)
    shown = texts(at)
    assert "Run 'partial' ingested PARTIALLY: 2 rank(s); 1 of 3 file(s) failed" in shown
    assert "upload:rank2.json" in shown
    status, ranks, failed = runs_in(db)["partial"]
    assert (status, ranks) == ("partial", 2)
    assert json.loads(failed)[0]["file"] == "upload:rank2.json"
    # the Runs page lists the failed file with its reason
    at.query_params.clear()
    at2 = app_test(monkeypatch, db, page="runs", run="partial")
    at2.run()
    no_exception(at2)
    assert "Run 'partial' is partial: 1 file(s) failed" in texts(at2)
    # as a list (a reason is a sentence a table cell would cut): file, then its reason
    (line,) = [m.value for m in at2.markdown if "upload:rank2.json" in m.value]
    assert line.startswith("- `upload:rank2.json`: ") and len(line) > 25


def test_upload_bad_files_only(monkeypatch, tmp_path):
    db = tmp_path / "db.duckdb"
    at = app_test(monkeypatch, db, page="upload")
    at.run()
    upload(at, [("rank0.json", b"[1, 2"), ("rank1.json.gz", b"not gzip")], "bad")
    no_exception(at)
    assert at.error, "a one-line error is shown"
    assert "nothing ingested" in at.error[0].value
    assert not db.exists() or "bad" not in runs_in(db)


def test_upload_errors_name_the_uploaded_files_below_the_message(monkeypatch, tmp_path):
    """Every file failed: the message and each file's line name the file as uploaded
    (they named it by its temporary path on the server), the message points below (it
    said "see the errors above"), and a 0-byte zip is said to be empty (it got
    "unreadable archive (file could not be opened successfully:)")."""
    db = tmp_path / "db.duckdb"
    at = app_test(monkeypatch, db, page="upload")
    at.run()
    upload(at, [("rank0.json", b"[1, 2"), ("job.zip", b"")], "bad")
    no_exception(at)
    shown = texts(at)
    assert "stepscope-upload-" not in shown and "/tmp" not in shown, shown
    assert "see the errors above" not in shown
    assert "(each file's error is listed below)" in at.error[0].value
    assert "`upload:job.zip`: an empty file (0 bytes), not an archive" in shown
    assert "upload:rank0.json" in shown


@pytest.mark.slow
def test_upload_archive_and_size_limit(monkeypatch, tmp_path):
    db = tmp_path / "db.duckdb"
    archive = tar_gz({f"job/rank{r}.json.gz": rank_file(r, 4) for r in range(4)})
    at = app_test(monkeypatch, db, page="upload")
    at.run()
    upload(at, [("job7.tar.gz", archive)])
    no_exception(at)
    assert "Run 'job7' ingested: 4 rank(s) from 4 file(s)" in texts(at)
    big = app_test(monkeypatch, db, page="upload", STEPSCOPE_MAX_UPLOAD_MB="1")
    big.run()
    upload(big, [("rank0.json", b" " * (2 << 20))], "toobig")
    assert "over the 1 MB limit" in big.error[0].value
    assert "toobig" not in runs_in(db)


def test_server_folder_stays_under_root(monkeypatch, tmp_path):
    root = tmp_path / "traces"
    for r in range(2):
        (root / "jobA").mkdir(parents=True, exist_ok=True)
        (root / "jobA" / f"rank{r}.json.gz").write_bytes(rank_file(r))
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "rank0.json").write_bytes(b"{}")
    (root / "escape").symlink_to(outside)
    assert trace_folders(root) == ["jobA"]
    with pytest.raises(UsageError, match="outside the traces root"):
        resolve_under(root, "../secret")
    with pytest.raises(UsageError, match="outside the traces root"):
        resolve_under(root, "escape")
    db = tmp_path / "db.duckdb"
    at = app_test(monkeypatch, db, page="upload", STEPSCOPE_TRACES_ROOT=str(root))
    at.run()
    assert at.selectbox(key="server_folder").options == ["jobA"]
    button(at, "ingest_folder").click()
    at.run()
    no_exception(at)
    assert "Run 'jobA' ingested: 2 rank(s)" in texts(at)


@pytest.mark.slow
def test_delete_run_from_runs_page(monkeypatch, tmp_path, make_run):
    db = tmp_path / "db.duckdb"
    ingest_staged([make_run(2)], db, "keep")
    ingest_staged([make_run(2)], db, "drop")
    at = app_test(monkeypatch, db, page="runs", run="drop")
    at.run()
    no_exception(at)
    assert set(at.dataframe[0].value["run"]) == {"keep", "drop"}
    at.checkbox(key="confirm_delete").check()
    at.run()
    next(b for b in at.button if b.label == "Delete run").click()
    at.run()
    no_exception(at)
    assert set(runs_in(db)) == {"keep"}
    assert list(at.dataframe[0].value["run"]) == ["keep"]
    assert at.query_params["run"] in (["keep"], "keep")


def test_names_and_defaults():
    assert safe_file_name("C:\\x\\rank0.json") == "rank0.json"
    assert safe_file_name("../../etc/passwd") == "passwd"
    assert safe_file_name("..") == "upload"
    assert default_run_name(["job42.tar.gz"]) == "job42"
    assert default_run_name(["rank0.json", "rank1.json"]) == "upload"


@pytest.mark.slow
def test_staged_ingest_waits_for_a_writer_and_readers_see_old_state(tmp_path, make_run):
    """While another process holds the write lock (a nightly CLI job on the same file),
    the merge retries and says so; once released, the run lands whole."""
    db = tmp_path / "db.duckdb"
    ingest_staged([make_run(2)], db, "first")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys; c = duckdb.connect(sys.argv[1]); "
         "print('locked', flush=True); sys.stdin.read()", str(db)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdin is not None
    assert holder.stdout.readline().strip() == "locked"
    busy: list[int] = []

    def release_when_busy(attempt: int) -> None:
        busy.append(attempt)
        if holder.stdin is not None and not holder.stdin.closed:
            holder.stdin.close()
            holder.wait(timeout=30)

    try:
        result = ingest_staged([make_run(2)], db, "second", on_busy=release_when_busy)
    finally:
        holder.kill()
    assert busy, "the merge saw the database busy and retried"
    assert result.ranks == [0, 1]
    assert set(runs_in(db)) == {"first", "second"}


def test_retry_busy_gives_up_after_timeout():
    calls = []

    def always_busy() -> None:
        calls.append(1)
        raise DatabaseBusyError("db: busy")

    with pytest.raises(DatabaseBusyError):
        retry_busy(always_busy, timeout_s=0.3, interval_s=0.1)
    assert 2 <= len(calls) <= 5


def test_delete_unknown_run(tmp_path, make_run):
    db = tmp_path / "db.duckdb"
    ingest_staged([make_run(2)], db, "a")
    with pytest.raises(UsageError, match="no run named 'b'"):
        delete_run(db, "b")


@pytest.mark.slow
def test_cache_follows_a_reingested_run(monkeypatch, tmp_path, make_run):
    """Pages are cached per (database, run, ingest time): re-ingesting the run shows the
    new data, while an untouched run keeps its cached model."""
    db = tmp_path / "db.duckdb"
    ingest_staged([make_run(2)], db, "job")
    at = app_test(monkeypatch, db, page="overview", run="job")
    at.run()
    no_exception(at)
    assert "Ranks: 2 of 2" in texts(at)
    ingest_staged([make_run(4)], db, "job")
    again = app_test(monkeypatch, db, page="overview", run="job")
    again.run()
    no_exception(again)
    assert "Ranks: 4 of 4" in texts(again)
