"""NCCL_DEBUG=INFO logs: reader, nccl_* tables, the report's nccl section and findings,
identity checks, fuzzing (tests/data/nccl/README.md cites every line shape)."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from conftest import REPO

from stepscope.analyzers.comm.nccl import build_nccl_section
from stepscope.analyzers.results import Report, from_json
from stepscope.cli import main
from stepscope.dashboard.render.html_report import report_html
from stepscope.ingest import TraceFileError, ingest
from stepscope.ingest.nccl.debug_log import read_nccl_log
from stepscope.ingest.nccl.inspector import read_inspector
from stepscope.ingest.nccl.profiler_plugin import read_profiler_ops
from stepscope.ingest.nccl.sniff import NCCL_LOG, sniff

pytestmark = pytest.mark.slow  # ingests NCCL logs with the bundled Kineto sets

LOGS = REPO / "tests" / "data" / "nccl" / "tp_across_nodes" / "nccl-logs"
INSPECTOR = LOGS.parent / "nccl-inspector-unknown-jobid"
TRACES = REPO / "sample_traces" / "simulated" / "tp_across_nodes"


def job(tmp_path: Path) -> Path:
    """A job folder as a cluster leaves it: traces/ and nccl-logs/ side by side."""
    root = tmp_path / "job"
    shutil.copytree(TRACES, root / "traces")
    shutil.copytree(LOGS, root / "nccl-logs")
    shutil.copytree(INSPECTOR, root / "nccl-inspector")
    return root


@pytest.fixture(scope="module")
def con(tmp_path_factory: pytest.TempPathFactory) -> Iterator[duckdb.DuckDBPyConnection]:
    """The job ingested once for the tests that only read its tables."""
    tmp = tmp_path_factory.mktemp("nccl_job")
    db = tmp / "s.duckdb"
    result = ingest([job(tmp)], db=db)
    assert result.exit_code == 0 and len(result.nccl_files) == 16 and len(result.ranks) == 8
    connection = duckdb.connect(str(db), read_only=True)
    yield connection
    connection.close()


def test_reader_on_one_process_log(tmp_path: Path) -> None:
    log = read_nccl_log(LOGS / "nccl.node002.1005.log", "x.log", tmp_path)
    assert log.nccl_versions == ["2.21.5+cuda12.4"]
    proc = log.frame("nccl_processes").row(0, named=True)
    assert (proc["host"], proc["pid"], proc["cuda_dev"], proc["network"]) == (
        "node002", 1005, 1, "IB")
    comms = {r["comm_id"]: r for r in log.frame("nccl_comms").iter_rows(named=True)}
    world = comms["0x5ae77eb5ea4ec1ee"]
    assert (world["rank"], world["nranks"], world["nnodes"], world["local_ranks"],
            world["local_rank"], world["bus_id"]) == (5, 8, 4, 2, 1, "2a000")
    assert len(comms) == 3  # world, TP [4-7], DP [1, 5]
    channels, warnings = log.frame("nccl_channels"), log.frame("nccl_warnings")
    assert set(channels["tier"]) == {"p2p", "ib", "socket"}
    assert not channels.filter(channels["tier"] == "ib")["gdr"].any()
    assert warnings.height == 1
    warn = warnings.row(0, named=True)
    assert warn["logged_at"] == "2025-09-23 06:58:05"
    assert warn["source_location"] == "transport/net_ib.cc:1696"
    assert log.frame("nccl_rings").height == 4  # two rings of the world comm, one each else


def test_tables_and_identity(con: duckdb.DuckDBPyConnection) -> None:
    ranks = con.execute("SELECT list(global_rank ORDER BY global_rank), count(DISTINCT host) "
                        "FROM nccl_processes").fetchone()
    assert ranks == (list(range(8)), 4)
    assert con.execute("SELECT count(DISTINCT comm_id), count(*) FROM nccl_comms"
                       ).fetchone() == (7, 8 + 2 * 4 + 4 * 2)
    assert con.execute("SELECT count(*) FROM nccl_channels WHERE comm_id IS NULL"
                       ).fetchone() == (0,)
    # every Kineto rank's (host, pid) is the NCCL log's process of the same global rank
    assert con.execute("""SELECT count(*) FROM ranks k JOIN nccl_processes p
                          ON p.host = k.host AND p.pid = k.pid AND p.global_rank = k.rank"""
                       ).fetchone() == (8,)


def test_nccl_section_groups_and_findings(con: duckdb.DuckDBPyConnection) -> None:
    section = build_nccl_section(con, "job")
    assert section is not None
    assert section.versions == ["2.21.5+cuda12.4"]
    assert section.hosts == {"node000": [0, 1], "node001": [2, 3], "node002": [4, 5],
                             "node003": [6, 7]}
    links = {tuple(g.pg_names): (g.link, g.gdr) for g in section.groups}
    assert links == {("0",): ("socket", False), ("100",): ("ib", True),
                     ("104",): ("socket", None), ("200",): ("ib", False),
                     ("201",): ("ib", False), ("202",): ("socket", None),
                     ("203",): ("socket", None)}
    kinds = {f.kind: f for f in section.findings}
    assert set(kinds) == {"socket_where_ib", "gdr_disabled", "nccl_warnings",
                          "ring_crosses_nodes", "slow_link"}
    slow = sorted(f.ranks for f in section.findings if f.kind == "slow_link")
    assert slow == [[2, 6], [3, 7], [4, 5, 6, 7]]  # every slow group touches node003
    measured = {tuple(m.pg_names): (m.n_ops, m.bus_bw_gbs) for m in section.measured}
    assert measured == {("100",): (80, 40.0), ("104",): (80, 9.0), ("200",): (8, 30.0),
                        ("201",): (8, 30.0), ("202",): (8, 6.0), ("203",): (8, 6.0)}
    assert [len(m.over_time) for m in section.measured] == [10, 10, 2, 2, 2, 2]
    assert kinds["socket_where_ib"].ranks == [6, 7] and kinds["socket_where_ib"].hosts == [
        "node003"]
    assert kinds["gdr_disabled"].hosts == ["node002"] and kinds["gdr_disabled"].ranks == [4, 5]
    assert kinds["nccl_warnings"].ranks == [5]
    assert "8 times where 4" in kinds["ring_crosses_nodes"].message


def test_report_has_nccl_section_and_measured_links(tmp_path: Path, sample_db: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    root = job(tmp_path)
    assert main(["report", str(root), "--format", "json"]) == 0
    text = capsys.readouterr().out
    report = json.loads(text)
    _check_nccl_html(report_html(from_json(text, Report)), report["nccl"])
    assert report["nccl"]["hosts"]["node003"] == [6, 7]
    coll = {c["group_label"]: c for c in report["collectives"]}
    assert coll["TENSOR_MODEL_PARALLEL_GROUP"]["link"] == "socket"
    assert coll["TENSOR_MODEL_PARALLEL_GROUP"]["link_source"] == "nccl_log"
    assert coll["DATA_PARALLEL_GROUP"]["link_peak_gbs"] == pytest.approx(12.5)
    # NCCL's own measurement: median over the ops of every TP / DP communicator
    assert coll["TENSOR_MODEL_PARALLEL_GROUP"]["measured_bus_bw_gbs"] == pytest.approx(24.5)
    assert coll["DATA_PARALLEL_GROUP"]["measured_bus_bw_gbs"] == pytest.approx(18.0)
    assert main(["report", str(root)]) == 0
    md = capsys.readouterr().out
    assert "## NCCL" in md and "**socket_where_ib** (high)" in md
    # the same traces without the logs: the session's run of that folder
    assert main(["report", TRACES.name, "--db", str(sample_db), "--format", "json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert "nccl" not in plain
    assert 'id="nccl"' not in report_html(from_json(json.dumps(plain), Report))
    assert {c["link_source"] for c in plain["collectives"]} == {"assumed"}
    assert {c["measured_bus_bw_gbs"] for c in plain["collectives"]} == {None}


def _check_nccl_html(html: str, nccl: dict[str, Any]) -> None:
    """The HTML report's NCCL section shows the typed section's groups, measurements and
    findings (the renderer reads the model; the numbers are the JSON's)."""
    section = re.search(r'<section id="nccl">(.*?)</section>', html)
    assert section is not None, "no NCCL section in the HTML report"
    body = section.group(1)
    assert "NCCL 2.21.5+cuda12.4" in body and "4 host(s) in the NCCL logs" in body
    tables = re.findall(r"<table>.*?</table>", body)
    assert len(tables) == 2  # communicators, Inspector measurements (few: nothing folded)
    assert tables[0].count("<tr>") - 1 == len(nccl["groups"])
    assert tables[1].count("<tr>") - 1 == len(nccl["measured"])
    for m in nccl["measured"]:
        assert f"<td class=\"n\">{m['bus_bw_gbs']:.1f}</td>" in tables[1]
    findings = re.findall(r'<div class="rec (\w+)"><b>\[\w+\] (\w+)</b>', body)
    assert findings == [(f["severity"], f["kind"]) for f in nccl["findings"]]
    assert ("high", "socket_where_ib") in findings
    assert '<b class="bad">no</b>' in tables[0]  # node002's IB without GPUDirect RDMA


def test_identity_conflict_is_reported_not_merged(tmp_path: Path) -> None:
    """Swap the logs of ranks 0 and 1: the Kineto rank at (node000, 1000) is 0, the log of
    that process now says 1."""
    root = job(tmp_path)
    for name in ("nccl.node000.1000.log", "nccl.node000.1001.log"):
        (root / "nccl-logs" / name).unlink()
    for src, dst in ((1000, 1001), (1001, 1000)):
        text = (LOGS / f"nccl.node000.{src}.log").read_text()
        (root / "nccl-logs" / f"nccl.node000.{dst}.log").write_text(
            text.replace(f"node000:{src}:", f"node000:{dst}:"))
    db = tmp_path / "s.duckdb"
    ingest([root], db=db)
    section = build_nccl_section(duckdb.connect(str(db), read_only=True), "job")
    assert section is not None
    conflicts = [f for f in section.findings if f.kind == "rank_identity_conflict"]
    assert sorted(tuple(f.ranks) for f in conflicts) == [(0, 1), (0, 1)]


def test_old_and_mixed_line_shapes(tmp_path: Path) -> None:
    """stdout with NCCL lines mixed in; NCCL <= 2.10 Init COMPLETE without commId;
    P2P/direct pointer and SHM transports; bare version line; gzip."""
    text = "\n".join([
        "Epoch 1: loss 2.31",
        "NCCL version 2.10.3+cuda11.4",
        "A03-R28:58077:58136 [1] NCCL INFO Channel 00 : 1[2b000] -> 0[25000] via "
        "P2P/direct pointer",
        "A03-R28:58077:58136 [1] NCCL INFO Channel 01/0 : 1[1] -> 2[2] via SHM/direct/direct",
        "A03-R28:58077:58136 [1] NCCL INFO comm 0x7fdf1c000d00 rank 9 nranks 16 cudaDev 1 "
        "busId 2b000 - Init COMPLETE",
        "Traceback (most recent call last): not ours",
    ]) + "\n"
    path = tmp_path / "stdout.txt.gz"
    path.write_bytes(gzip.compress(text.encode()))
    assert sniff(path) == NCCL_LOG
    out = tmp_path / "out"
    out.mkdir()
    log = read_nccl_log(path, str(path), out)
    assert log.nccl_versions == ["2.10.3+cuda11.4"]
    comms, channels = log.frame("nccl_comms"), log.frame("nccl_channels")
    assert comms.row(0, named=True)["comm_id"] is None
    assert comms.row(0, named=True)["rank"] == 9
    assert sorted(channels["tier"].to_list()) == ["p2p", "shm"]
    assert channels["transport"].to_list()[0] == "P2P/direct pointer"


@pytest.mark.parametrize("content", [
    b"", b"\x00\x01\x02" * 100, b"just some stdout\nwith NCCL mentioned but no lines\n",
    "h\u00e9:1:2 [x] NCCL INFO broken prefix\n".encode(),
])
def test_fuzzed_logs_fail_with_one_line(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "nccl.bad.log"
    path.write_bytes(content)
    with pytest.raises(TraceFileError) as exc:
        read_nccl_log(path, str(path), tmp_path)
    assert "\n" not in str(exc.value) and str(path) in str(exc.value)


def test_bad_log_in_job_folder_fails_alone(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    root = job(tmp_path)
    bad = root / "nccl-logs" / "nccl.node000.1000.log"
    bad.write_bytes(b"node000:1000:1000 [0] NCCL INFO " + b"\xff\xfe" * 10 + b"\n")
    code = main(["ingest", str(root), "--db", str(tmp_path / "s.duckdb")])
    err = capsys.readouterr().err
    assert code == 0, err  # a garbled but prefixed line is still an NCCL log: read, no rows
    con = duckdb.connect(str(tmp_path / "s.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM nccl_processes").fetchone() == (8,)


def test_logs_fill_hosts_kineto_lacks(tmp_path: Path) -> None:
    """Traces without host_name: the hosts come from the NCCL logs (host_source
    nccl_log, ahead of the guess from deviceProperties), as the logs place them."""
    root = job(tmp_path)
    for trace in (root / "traces").glob("rank*.json.gz"):
        data = json.loads(gzip.decompress(trace.read_bytes()))
        del data["host_name"]
        trace.write_bytes(gzip.compress(json.dumps(data).encode()))
    db = tmp_path / "s.duckdb"
    ingest([root], db=db)
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute("SELECT rank, host, host_source FROM ranks ORDER BY rank").fetchall()
    assert rows == [(r, f"node{r // 2:03d}", "nccl_log") for r in range(8)]


def test_inspector_reader_and_rank_resolution(tmp_path: Path) -> None:
    """Without logs or traces, global ranks come from the world-spanning communicator;
    here no communicator spans all 8 ranks, so ranks resolve from the Kineto traces."""
    path = INSPECTOR / "node003-pid1007.log"
    assert sniff(path) == "nccl_inspector"
    table = read_inspector(path, str(path))
    assert table.num_rows == 20 + 4  # TP [4-7] all_reduce x 20, DP [3, 7] x 4
    row = table.slice(0, 1).to_pylist()[0]
    assert (row["comm_id"], row["comm_rank"], row["n_ranks"], row["host"], row["pid"]) == (
        "0x7d1e0c3a9b2f4410", 3, 4, "node003", 1007)
    assert row["bus_bw_gbs"] == 9.0 and row["timing_source"] == "kernel_gpu"
    root = tmp_path / "job"
    shutil.copytree(TRACES, root / "traces")
    shutil.copytree(INSPECTOR, root / "inspector")
    db = tmp_path / "s.duckdb"
    assert ingest([root], db=db).exit_code == 0
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*), count(rank), count(DISTINCT rank) FROM nccl_ops"
                       ).fetchone() == (192, 192, 8)


P2P_LINE = ('{"header": {"id": "0x1", "comm_name": "", "rank": 0, "n_ranks": 2, "nnodes": 1}, '
            '"metadata": {"inspector_output_format_version": "v4.0", "dump_timestamp_us": 1, '
            '"hostname": "h", "pid": 7}, "p2p_perf": {"p2p": "Send", "p2p_sn": 3, '
            '"p2p_peer": 1, "p2p_msg_size_bytes": 1048576, "p2p_exec_time_us": 50.0, '
            '"p2p_timing_source": "kernel_gpu", "p2p_algobw_gbs": 20.97, '
            '"p2p_busbw_gbs": 20.97}}')


def test_inspector_p2p_and_gzip(tmp_path: Path) -> None:
    path = tmp_path / "insp.jsonl.gz"
    path.write_bytes(gzip.compress((P2P_LINE + "\n").encode()))
    assert sniff(path) == "nccl_inspector"
    row = read_inspector(path, str(path)).to_pylist()[0]
    assert (row["kind"], row["nccl_op"], row["seq"], row["peer_comm_rank"], row["msg_bytes"]) \
        == ("p2p", "Send", 3, 1, 1048576)


@pytest.mark.parametrize("content", [
    P2P_LINE + "\n{not json\n",
    P2P_LINE.replace('"id": "0x1", ', "") + "\n",
    P2P_LINE.replace('"p2p_exec_time_us": 50.0', '"p2p_exec_time_us": "slow"') + "\n",
])
def test_fuzzed_inspector_fails_alone(tmp_path: Path, content: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    good = tmp_path / "good.jsonl"
    good.write_text(P2P_LINE + "\n")
    with pytest.raises(TraceFileError) as exc:
        read_inspector(bad, str(bad))
    assert "\n" not in str(exc.value) and str(bad) in str(exc.value)
    code = main(["ingest", str(bad), str(good), "--db", str(tmp_path / "s.duckdb"),
                 "--run", "r"])
    err = capsys.readouterr().err
    assert code == 3 and len([ln for ln in err.splitlines() if "bad.jsonl" in ln]) == 1


def profiler_dump(rank: int, n_ops: int = 5, dur_us: float = 52.4288) -> list[dict[str, object]]:
    """The NCCL example profiler plugin's JSON (NCCL >= 2.27): b/e pairs of COLL events with
    the args of the example record in trace-formats.md §3c."""
    events: list[dict[str, object]] = []
    for i in range(n_ops):
        args = {"SeqNum": i, "CommHash": 1493613951195738943, "Rank": rank, "Count": 262144,
                "Datatype": "ncclFloat32", "Algorithm": "RING", "Protocol": "SIMPLE",
                "nChannels": 2}
        ts = 111994.478 + 1000 * i
        events.append({"name": "AllReduce", "cat": "COLL", "ph": "b", "id": i,
                       "pid": 225798 + rank, "tid": 1, "ts": ts, "args": args})
        events.append({"name": "AllReduce", "cat": "COLL", "ph": "e", "id": i,
                       "pid": 225798 + rank, "tid": 1, "ts": ts + dur_us, "args": {}})
    return events


def test_profiler_plugin_dump(tmp_path: Path) -> None:
    """1 MiB all_reduce over 2 ranks in 52.4288 us: algbw 20 GB/s, bus factor 2(n-1)/n = 1."""
    root = tmp_path / "prof"
    root.mkdir()
    for rank in range(2):
        path = root / f"profile_1493613951195738943_{rank}.json"
        path.write_text(json.dumps(profiler_dump(rank)))
        assert sniff(path) == "nccl_profiler"
    db = tmp_path / "s.duckdb"
    result = ingest([root], db=db)
    assert result.exit_code == 0 and len(result.nccl_files) == 2
    con = duckdb.connect(str(db), read_only=True)
    rows = con.execute("SELECT rank, n_ranks, collective, msg_bytes, bus_bw_gbs FROM nccl_ops "
                       "ORDER BY rank, seq").fetchall()
    assert len(rows) == 10 and {r[:4] for r in rows} == {(0, 2, "all_reduce", 1048576),
                                                         (1, 2, "all_reduce", 1048576)}
    assert all(r[4] == pytest.approx(20.0, rel=1e-6) for r in rows)


@pytest.mark.parametrize("events", [
    [{"name": "AllReduce", "cat": "COLL", "ph": "b", "id": 0, "pid": 1, "ts": 1.0,
      "args": {"CommHash": 1, "Rank": 0}}],            # never ended
    [{"name": "AllReduce", "cat": "COLL", "ph": "b", "id": "x", "pid": 1, "ts": 1.0}],
])
def test_fuzzed_profiler_dump(tmp_path: Path, events: list[dict[str, object]]) -> None:
    path = tmp_path / "profile_1_0.json"
    path.write_text(json.dumps(events))
    with pytest.raises(TraceFileError) as exc:
        read_profiler_ops(path, str(path))
    assert "\n" not in str(exc.value) and str(path) in str(exc.value)
