"""nccl-tests result tables and `# Avg bus bandwidth` read from the logs and held against
the link's peak (issue 41 §7). Real: NVIDIA/nccl-tests issue #331 (tests/data/NVIDIA_nccl-
tests/PROVENANCE.md), `sendrecv_perf -t 2 -g 1` on two A100-SXM-64GB with NCCL_DEBUG=INFO,
nccl-tests 2.16 (root and #wrong columns). Hand-written from nccl-tests' older format
strings (no root column, `%5.0le` relative errors, `#   Rank  0 Pid ...` without Group;
the shape of public outputs of nccl-tests < 2.10) and without any NCCL line. Expected
values are the log's own numbers, read by hand (the table rows, the printed average)."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest
from conftest import REPO

import stepscope
from stepscope.analyzers.comm.nccl import build_nccl_section
from stepscope.analyzers.results import NcclBench
from stepscope.ingest.nccl.debug_log import read_nccl_log
from stepscope.ingest.nccl.sniff import NCCL_LOG, sniff_bytes

ISSUE_331 = REPO / "tests" / "data" / "NVIDIA_nccl-tests" / "issues" / "331" / "sendrecv_perf.log"

# hand-written in nccl-tests' format before 2.10 (tests/data/nccl/README.md)
OLD_FORMAT = (REPO / "tests" / "data" / "nccl" / "nccl_tests" / "all_reduce_perf.old_format.out"
              ).read_text()


def _bench(tmp_path: Path, name: str, body: str | Path) -> list[NcclBench]:
    root = tmp_path / "job"
    root.mkdir(parents=True)
    if isinstance(body, Path):
        shutil.copy(body, root / name)
    else:
        (root / name).write_text(body)
    db = tmp_path / "s.duckdb"
    assert stepscope.ingest_run([root], db=db, run="job").exit_code == 0
    con = duckdb.connect(str(db), read_only=True)
    section = build_nccl_section(con, "job")
    assert section is not None and isinstance(section.bench, list)
    return section.bench


def test_real_sendrecv_table(tmp_path: Path) -> None:
    """Before: nothing of the table was read (`measured` empty). Now its 29 sizes x 2
    placements, the printed average and the best value against NVLink's peak."""
    (tmp_path / "r").mkdir()
    log = read_nccl_log(ISSUE_331, "sendrecv_perf.log", tmp_path / "r")
    rows = log.frame("nccl_bench")
    assert rows.height == 58 and rows["size_bytes"].n_unique() == 29
    last = rows.filter(rows["size_bytes"] == 2147483648).sort("in_place").to_dicts()
    assert [(r["count"], r["dtype"], r["redop"], r["root"], r["time_us"], r["algbw_gbs"],
             r["busbw_gbs"], r["n_wrong"]) for r in last] == [
        (536870912, "float", "sum", -1, 29935.0, 71.74, 71.74, 0),
        (536870912, "float", "sum", -1, 29466.0, 72.88, 72.88, None)]  # in-place: N/A
    summary = log.frame("nccl_bench_summary").to_dicts()
    assert [(s["bench"], s["test"], s["test_source"], s["n_rows"], s["avg_busbw_gbs"],
             s["n_ranks"], s["hosts"], s["pids"], s["devices"]) for s in summary] == [
        (1, "sendrecv_perf", "file_name", 58, 24.3607, 2, ["lrdn2296"], [4063850],
         ["NVIDIA A100-SXM-64GB"])]
    (b,) = _bench(tmp_path / "s", "sendrecv_perf.log", ISSUE_331)
    # nccl-tests' average is the mean of every busbw value it printed (util.cu: bw/bw_count)
    assert b.mean_bus_bw_gbs == pytest.approx(24.3607, abs=5e-4)
    assert (b.best_bus_bw_gbs, b.best_size_bytes, b.best_in_place) == (73.83, 268435456, True)
    # the communicator's 16 connection lines are P2P: NVLink, the A100's 600 GB/s both ways
    assert (b.link, b.link_source, b.link_peak_gbs) == ("nvlink", "nccl_log", 300.0)
    assert b.best_of_peak == pytest.approx(73.83 / 300)
    assert len(b.rows) == 58 and b.rows[0].size_bytes == 8 and b.rows[-1].in_place


def test_old_format_without_nccl_lines(tmp_path: Path) -> None:
    """nccl-tests < 2.10 (no root column, relative errors) and no NCCL_DEBUG line: sniffed
    as a log, read; the numeric line before the table header is not a row."""
    assert sniff_bytes(OLD_FORMAT.encode()) == NCCL_LOG
    (tmp_path / "r").mkdir()
    log = read_nccl_log(_write(tmp_path, OLD_FORMAT), "all_reduce_perf.out", tmp_path / "r")
    rows = log.frame("nccl_bench")
    assert rows["size_bytes"].to_list() == [33554432] * 2 + [67108864] * 2 + [134217728] * 2
    assert rows["root"].null_count() == 6 and rows["n_wrong"].null_count() == 6
    assert rows["busbw_gbs"].to_list() == [14.32, 14.35, 15.07, 15.07, 15.67, 15.70]
    (b,) = _bench(tmp_path / "s", "all_reduce_perf.out", OLD_FORMAT)
    assert (b.test, b.test_source, b.ranks, b.hosts) == ("all_reduce_perf", "file_name", 2,
                                                          ["Orlando"])
    assert b.avg_bus_bw_gbs == 15.03
    assert b.mean_bus_bw_gbs == pytest.approx(90.18 / 6)
    # no connection line: one host, so NVLink is assumed; H100 SXM 900 GB/s both ways
    assert (b.link, b.link_source, b.link_peak_gbs) == ("nvlink", "assumed", 450.0)
    assert b.best_of_peak == pytest.approx(15.70 / 450)


def _write(tmp_path: Path, body: str) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "all_reduce_perf.out"
    path.write_text(body)
    return path


def test_logs_alone_say_mfu_needs_profiler_traces(tmp_path: Path) -> None:
    """Issue 41 §3 (part): a run of NCCL logs alone said MFU "unknown device 'CPU only'";
    it now says MFU needs profiler traces."""
    import stepscope.analyzers.report as report_mod

    _bench(tmp_path, "sendrecv_perf.log", ISSUE_331)
    con = duckdb.connect(str(tmp_path / "s.duckdb"), read_only=True)
    report = report_mod.build_report(con, "job")
    assert report.mfu.mfu is None and report.mfu.message is not None
    assert report.mfu.message.startswith("MFU needs profiler traces")


def test_logs_alone_give_the_run_header(tmp_path: Path) -> None:
    """Issue 41 §3 (part): the header said '0 of 0 ranks on ? host(s); device: None'; the
    logs give the world size (nranks 2), the host and nccl-tests' GPU name."""
    import stepscope.analyzers.report as report_mod

    _bench(tmp_path, "sendrecv_perf.log", ISSUE_331)
    con = duckdb.connect(str(tmp_path / "s.duckdb"), read_only=True)
    run = report_mod.build_report(con, "job").run
    assert (run.ranks, run.world_size, run.hosts, run.device) == (
        0, 2, ("lrdn2296",), "NVIDIA A100-SXM-64GB")
