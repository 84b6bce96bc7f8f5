"""A run of NCCL_DEBUG logs without profiler traces (issue 41 §3, rest): its header,
summary and layout come from the logs. Truth: tests/data/nccl/make_logs.py wrote the
logs of an 8-rank job on 4 hosts (node000..node003) with 2 GPUs each (cudaDev 0, 1; bus
ids 18000, 2a000); communicators: the world (8 ranks), TP [0-3] and [4-7], four DP
pairs. Before: device None, 'nodes unknown (inferred)', summary world 0 and hosts '?',
stragglers 'none'."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from conftest import REPO

import stepscope
from stepscope.analyzers.report import build_report
from stepscope.analyzers.results import Report
from stepscope.analyzers.summary import summary_records
from stepscope.dashboard.render.report import report_markdown

LOGS = REPO / "tests" / "data" / "nccl" / "tp_across_nodes" / "nccl-logs"
ISSUE_331 = REPO / "tests" / "data" / "NVIDIA_nccl-tests" / "issues" / "331" / "sendrecv_perf.log"


@pytest.fixture(scope="module")
def logs_only(tmp_path_factory: pytest.TempPathFactory) -> tuple[Report, duckdb.DuckDBPyConnection]:
    db = tmp_path_factory.mktemp("nccl_only") / "s.duckdb"
    assert stepscope.ingest_run([LOGS], db=db, run="job").exit_code == 0
    con = duckdb.connect(str(db), read_only=True)
    return build_report(con, "job"), con


def test_header_from_the_logs(logs_only: tuple[Report, duckdb.DuckDBPyConnection]) -> None:
    run = logs_only[0].run
    assert (run.ranks, run.world_size, len(run.hosts)) == (0, 8, 4)
    assert run.device == "GPU (not named in the NCCL logs)"


def test_layout_nodes_from_the_logs(logs_only: tuple[Report, duckdb.DuckDBPyConnection]) -> None:
    """nNodes 4 x localRanks 2 of the world communicator = the world size 8."""
    lay = logs_only[0].layout
    assert (lay.nodes, lay.gpus_per_node, lay.node_source, lay.host_source) == (
        4, 2, "nccl_logs", "nccl_logs")
    assert (lay.tp, lay.pp, lay.dp, lay.source) == (1, 1, 8, "inferred")
    assert lay.notes == (
        "nodes from the NCCL logs: communicator 0x5ae77eb5ea4ec1ee (8 ranks) logged nNodes 4, "
        "localRanks 2 on 4 logging host(s); CUDA devices 0, 1; bus ids 18000, 2a000",
        "no profiler traces: the NCCL logs name no parallel dimension (a communicator has a "
        "size, not a purpose), so TP, PP, CP and EP are 1 and DP the world size by default; "
        "the logs hold communicators: 1 of 8 ranks, 2 of 4 ranks, 4 of 2 ranks")


def test_markdown_says_what_is_unknown(
        logs_only: tuple[Report, duckdb.DuckDBPyConnection]) -> None:
    md = report_markdown(logs_only[0])
    assert ("- 0 of 8 ranks on 4 host(s); device: GPU (not named in the NCCL logs);" in md)
    assert "2 per node, 4 node(s) (inferred; nodes: nccl_logs)" in md
    assert "- unknown: 0 of 8 ranks traced" in md
    assert "no profiler traces (only NCCL evidence): no GPU kernels" in md
    assert "MFU needs profiler traces" in md


def test_summary_from_the_logs(logs_only: tuple[Report, duckdb.DuckDBPyConnection]) -> None:
    (row,) = summary_records(logs_only[1], ["job"])
    assert (row.n_ranks, row.world_size, row.hosts, row.devices) == (
        0, 8, 4, "GPU (not named in the NCCL logs)")


def test_one_process_two_gpus_real_log(tmp_path: Path) -> None:
    """NVIDIA/nccl-tests issue #331: one process, 2 GPUs on lrdn2296 (nRanks 2 nNodes 1
    localRanks 2 in the log); nccl-tests names the GPU, which still wins."""
    root = tmp_path / "job"
    root.mkdir()
    (root / "sendrecv_perf.log").write_bytes(ISSUE_331.read_bytes())
    db = tmp_path / "s.duckdb"
    assert stepscope.ingest_run([root], db=db, run="job").exit_code == 0
    con = duckdb.connect(str(db), read_only=True)
    report = build_report(con, "job")
    assert report.run.device == "NVIDIA A100-SXM-64GB"
    assert (report.layout.nodes, report.layout.gpus_per_node) == (1, 2)
    (row,) = summary_records(con, ["job"])
    assert (row.world_size, row.hosts, row.devices) == (2, 1, "NVIDIA A100-SXM-64GB")
