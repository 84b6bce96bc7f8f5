"""Issue 25: NCCL files at scale. Flight Recorder dumps, NCCL_DEBUG logs, Inspector and
profiler-plugin files are per-file tasks on the ingest's executor like the Kineto traces:
the same rows whichever executor runs them, and `--ranks` skips the dumps and logs of
other ranks, saying so in the summary."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest
from conftest import REAL_TRACES, REPO, start_local_ray

import stepscope
from stepscope.cli import main
from stepscope.ingest.nccl.task import run_nccl_task
from stepscope.ingest.ranksets import parse_ranks
from stepscope.ingest.tasks import NcclParsed, NcclTask, RankSkipped

pytestmark = pytest.mark.slow  # ingests a job of every NCCL source

NCCL = REPO / "tests" / "data" / "nccl"
TRACES = REPO / "sample_traces" / "simulated" / "tp_across_nodes"
FR = REAL_TRACES / "nvidia-resiliency-ext" / "tests" / "attribution" / "unit" / "fr_traces"
TABLES = ("nccl_sources", "fr_groups", "fr_entries", "nccl_processes", "nccl_comms",
          "nccl_channels", "nccl_rings", "nccl_warnings", "nccl_ops", "ranks",
          "process_groups")


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """8 Kineto ranks, their 8 NCCL logs and 8 Inspector files, the 2x2 nccl-tests
    stdout, and 16 real Flight Recorder dumps (when tests/data/traces is there)."""
    root = tmp_path_factory.mktemp("nccl-scale") / "job"
    shutil.copytree(TRACES, root / "traces")
    shutil.copytree(NCCL / "tp_across_nodes" / "nccl-logs", root / "logs")
    shutil.copytree(NCCL / "tp_across_nodes" / "nccl-inspector-unknown-jobid", root / "insp")
    shutil.copy(NCCL / "nccl_tests" / "all_reduce_perf.2x2.log", root / "logs")
    if (FR / "lock_gil_1st").is_dir():
        shutil.copytree(FR / "lock_gil_1st", root / "fr")
    return root


def tables(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the NCCL tables in stored order (NCCL files are appended in task
    order), and of ranks and process groups sorted (the Kineto batches' order is not
    part of the contract)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        out = {t: con.table(t).fetchall() for t in TABLES}
        for t in ("ranks", "process_groups"):
            out[t] = sorted(out[t], key=repr)
        return out
    finally:
        con.close()


def test_process_executor_stores_exactly_what_inline_stores(job: Path, tmp_path: Path) -> None:
    dbs = {}
    for executor in ("inline", "process"):
        dbs[executor] = tmp_path / f"{executor}.duckdb"
        result = stepscope.ingest_run([job], db=dbs[executor], run="job", executor=executor,
                                      jobs=2)
        assert result.exit_code == 0, result.failures
    inline, process = tables(dbs["inline"]), tables(dbs["process"])
    assert inline["nccl_sources"] and inline["nccl_channels"] and inline["nccl_ops"]
    assert process == inline


def test_ranks_skip_dumps_and_logs_of_other_ranks(job: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """--ranks 0-3: Kineto ranks 4-7, the logs of ranks 4-7 and (with the real dumps) the
    dumps of ranks 4-15 are skipped and counted; the 2x2 stdout (ranks 0-3) and the
    Inspector files (communicator-local ranks only) are kept."""
    db = tmp_path / "s.duckdb"
    assert main(["ingest", str(job), "--db", str(db), "--ranks", "0-3"]) == 0
    out = capsys.readouterr().out
    n_dumps = 16 if (job / "fr").is_dir() else 0
    skipped_nccl = 4 + max(0, n_dumps - 4)
    assert (f"(--ranks 0-3: {4 + skipped_nccl} other file(s) skipped, {skipped_nccl} of them "
            "NCCL dumps or logs)") in out
    con = duckdb.connect(str(db), read_only=True)
    kinds = dict(con.execute("SELECT kind, count(*) FROM nccl_sources GROUP BY kind"
                             ).fetchall())
    assert kinds.get("nccl_log") == 4 + 1 and kinds.get("nccl_inspector") == 8
    assert kinds.get("flight_recorder", 0) == min(n_dumps, 4)
    ranks = con.execute("SELECT DISTINCT rank FROM nccl_sources WHERE rank IS NOT NULL "
                        "ORDER BY 1").fetchall()
    assert [r for (r,) in ranks] == [0, 1, 2, 3]


def test_a_dump_of_another_rank_is_skipped_before_it_is_read(tmp_path: Path) -> None:
    """`_dump_9` with --ranks 0-3 is skipped by its name: even garbage is never opened."""
    dump = tmp_path / "_dump_9"
    dump.write_bytes(b"\x80\x04garbage")
    task = NcclTask(0, str(dump), str(dump), "flight_recorder", str(tmp_path / "w"),
                    ranks=parse_ranks("0-3"))
    assert isinstance(run_nccl_task(task), RankSkipped)
    log = NCCL / "nccl_tests" / "all_reduce_perf.2x2.log"
    kept = NcclTask(1, str(log), "2x2.log", "nccl_log", str(tmp_path / "l"),
                    ranks=parse_ranks("3"))
    parsed = run_nccl_task(kept)
    assert isinstance(parsed, NcclParsed) and parsed.ranks == (0, 1, 2, 3)
    other = NcclTask(2, str(log), "2x2.log", "nccl_log", str(tmp_path / "o"),
                     ranks=parse_ranks("4-7"))
    assert isinstance(run_nccl_task(other), RankSkipped)


@pytest.fixture(scope="module")
def local_ray() -> Any:
    ray = start_local_ray()
    yield ray
    ray.shutdown()


def test_ray_stores_exactly_what_inline_stores(job: Path, tmp_path: Path,
                                                local_ray: Any) -> None:
    inline, ray = tmp_path / "i.duckdb", tmp_path / "r.duckdb"
    assert stepscope.ingest_run([job], db=inline, run="job", executor="inline").exit_code == 0
    assert stepscope.ingest_run([job], db=ray, run="job", executor="ray").exit_code == 0
    assert tables(ray) == tables(inline)
