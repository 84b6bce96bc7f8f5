"""`stepscope export` (issue 46; docs/timeline.md, "Export"): one Chrome trace-event file
of every rank on the aligned clock. Checked on a simulated 4-node job whose clocks lead
by 0 / +400 / -250 / +1300 µs and drift by 0 / 150 / -200 / 80 ppm: the exported ends of
every matched collective and send/recv pair agree within 10 µs; the file is valid JSON
with the processes, threads and overlay tracks the docs name; its stated size is its
size; --ranks and --steps cut it."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

import duckdb
import pytest
from test_clocks import OFFSETS_US, simulate

from stepscope.cli import main


@pytest.fixture(scope="module")
def drifting(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db, _ = simulate(tmp_path_factory.mktemp("xdrift"), "xdrift", clock_offsets_us=OFFSETS_US,
                     clock_drift_ppm=(0.0, 150.0, -200.0, 80.0), slow_rank=6,
                     slow_factor=1.3)
    return db


@pytest.fixture(scope="module")
def exported(drifting: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("out") / "trace.json"
    assert main(["export", "xdrift", "--db", str(drifting), "--out", str(out)]) == 0
    return json.loads(out.read_text())


def _comm_instances(db: Path) -> dict[tuple[int, int], str]:
    """(rank, correlation) of each collective's kernel -> its instance (matched ones) or
    its send/recv pair."""
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("""
            WITH k AS (
                SELECT c.rank, g.correlation, w.instance_key, w.n_ranks, c.is_p2p,
                    c.collective, c.peer_rank,
                    row_number() OVER (PARTITION BY c.rank, c.peer_rank, c.collective
                                       ORDER BY c.work_start_ns) AS n
                FROM collectives c
                JOIN collective_waits w USING (run, rank, coll_id)
                JOIN gpu_ops g ON g.run = c.run AND g.rank = c.rank
                    AND g.start_ns = c.kernel_start_ns AND g.kind = 'comm'
                    AND g.stream = c.stream)
            SELECT rank, correlation,
                CASE WHEN is_p2p THEN 'p2p ' || least(rank, peer_rank) || '-'
                         || greatest(rank, peer_rank) || ' '
                         || CASE WHEN collective = 'send' THEN rank ELSE peer_rank END
                         || ' #' || n
                     WHEN n_ranks > 1 THEN instance_key END
            FROM k""").fetchall()
    return {(r, c): key for r, c, key in rows if key is not None}


def test_exported_ends_agree_within_10us(drifting: Path, exported: dict[str, Any]) -> None:
    keys = _comm_instances(drifting)
    ends: dict[str, list[float]] = collections.defaultdict(list)
    for ev in exported["traceEvents"]:
        if ev.get("ph") == "X" and ev.get("cat") == "kernel":
            key = keys.get((ev["pid"], ev["args"].get("correlation")))
            if key is not None:
                ends[key].append(ev["ts"] + ev["dur"])
    groups = [v for v in ends.values() if len(v) > 1]
    p2p = [k for k, v in ends.items() if k.startswith("p2p") and len(v) == 2]
    assert len(groups) > 300 and len(p2p) > 20
    spread = max(max(v) - min(v) for v in groups)
    assert spread < 10.0  # µs; the raw ends differ by up to 1.55 ms


def test_processes_threads_and_tracks(exported: dict[str, Any]) -> None:
    events = exported["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert names[0] == "rank 0 (node000)" and names[13] == "rank 13 (node003)"
    assert len(names) == 16
    threads = {e["args"]["name"] for e in events if e["ph"] == "M"
               and e["name"] == "thread_name" and e["pid"] == 6}
    assert {"breakdown (stepscope)", "critical path (stepscope)",
            "stream 7 (GPU 2)", "thread 1006 (python)"} <= threads
    cats = collections.Counter(e.get("cat") for e in events)
    assert cats["stepscope breakdown"] > 0 and cats["stepscope critical path"] > 0
    assert cats["waits for the last"] > 0 and cats["critical path jump"] > 0
    # every flow start has its finish, and the waits point at the slow rank 6 mostly
    flows = collections.Counter((e["ph"], e["id"]) for e in events if e["ph"] in "sf")
    starts = {i for ph, i in flows if ph == "s"}
    assert starts == {i for ph, i in flows if ph == "f"}
    last = collections.Counter(e["pid"] for e in events
                               if e["ph"] == "f" and e["cat"] == "waits for the last")
    assert last.most_common(1)[0][0] == 6
    # the original args travel: a record_param_comms op keeps its collective's args
    comms = [e for e in events if e.get("name") == "record_param_comms"]
    assert comms and all("Collective name" in e["args"] for e in comms)


def test_breakdown_slices_add_up_to_the_attribution(drifting: Path,
                                                    exported: dict[str, Any]) -> None:
    """Per rank and step the breakdown track's slices sum to the step window and per
    category to step_attribution's (µs, 3 decimals)."""
    got: dict[tuple[int, int, str], float] = collections.defaultdict(float)
    for e in exported["traceEvents"]:
        if e.get("cat") == "stepscope breakdown":
            got[(e["pid"], e["args"]["step"], e["name"])] += e["dur"]
    with duckdb.connect(str(drifting), read_only=True) as con:
        rows = con.execute("SELECT rank, step, exposed_comm_ns, straggler_wait_ns, idle_ns, "
                           "compute_ns FROM step_attribution").fetchall()
    for rank, step, exposed, wait, idle, compute in rows:
        for name, ns in (("exposed communication", exposed), ("straggler wait", wait),
                         ("idle", idle), ("compute", compute)):
            assert got[(rank, step, name)] == pytest.approx(ns / 1e3, abs=1.0)


def test_stated_size_and_cuts(drifting: Path, tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cut.json"
    assert main(["export", "xdrift", "--db", str(drifting), "--out", str(out),
                 "--ranks", "0-3,6", "--steps", "2"]) == 0
    err = capsys.readouterr().err
    data = json.loads(out.read_text())
    events = data["traceEvents"]
    assert {e["pid"] for e in events} == {0, 1, 2, 3, 6}
    assert {e["args"]["step"] for e in events if e.get("cat") == "kernel"} == {2}
    stated = err.split("export: ")[1]
    assert stated.startswith(f"{len(events):,} events")
    header = out.read_text().index("[\n") + 2
    mb = float(stated.split("), ")[1].split(" MB")[0])
    assert mb == pytest.approx((out.stat().st_size - header) / 1e6, abs=0.1)
    assert main(["export", "xdrift", "--db", str(drifting), "--out", str(out),
                 "--ranks", "99"]) == 2
    assert "none of the ranks" in capsys.readouterr().err


BREAKDOWN = ("SELECT rank, step, step_ns, compute_ns, recompute_ns, exposed_comm_ns, "
             "straggler_wait_ns, bubble_ns, memory_ns, idle_ns FROM step_attribution "
             "ORDER BY rank, step")


def _round_trip(db: Path, run: str, tmp: Path) -> tuple[list[Any], list[Any]]:
    """(breakdown before, after): the run exported, split back into one Kineto trace per
    rank (tests/export_split.py) and ingested again by the project's reader."""
    from export_split import split

    from stepscope import ingest_run

    out = tmp / "export.json"
    assert main(["export", run, "--db", str(db), "--out", str(out)]) == 0
    split(out, tmp / "ranks")
    ingest_run(tmp / "ranks", db=tmp / "again.duckdb", run="again", jobs=1)
    with duckdb.connect(str(db), read_only=True) as con:
        before = con.execute(BREAKDOWN).fetchall()  # the database holds this run only
    with duckdb.connect(str(tmp / "again.duckdb"), read_only=True) as con:
        after = con.execute(BREAKDOWN).fetchall()
    return before, after


def test_round_trip_simulated(drifting: Path, tmp_path: Path) -> None:
    """The simulated job's export, ingested again, gives the same breakdown: within 20 µs
    per category and step (the aligned clock runs up to 200 ppm off each rank's own, so
    a step's starts move by a few µs against each other)."""
    before, after = _round_trip(drifting, "xdrift", tmp_path)
    assert len(before) == len(after) == 48
    for a, b in zip(before, after, strict=True):
        assert a[:2] == b[:2]
        assert all(abs(x - y) <= 20_000 for x, y in zip(a[2:], b[2:], strict=True)), (a, b)


def test_round_trip_real(real_traces: Path, tmp_path: Path) -> None:
    """Two ranks of a real 128-rank job (HTA's trace_filter samples, tests/data/traces):
    the same breakdown to the nanosecond."""
    from stepscope import ingest_run

    folder = real_traces / "HolisticTraceAnalysis" / "tests" / "data" / "trace_filter"
    db = tmp_path / "real.duckdb"
    ingest_run(sorted(folder.glob("sampled_rank-*.json.gz")), db=db, run="real", jobs=1)
    before, after = _round_trip(db, "real", tmp_path)
    assert len(before) == 4 and before == after


def test_step_paths_are_the_reports(drifting: Path) -> None:
    """The export's path-only entry point (critical_path/steps_only.py) gives the
    report's critical path of every step — the same runs on the same ranks at the same
    times — and, with steps chosen, those steps only; it builds no what-if graph and no
    other section (benchmarks/README.md, "bench_export.py": its memory)."""
    from stepscope.analyzers.critical_path.steps_only import step_paths
    from stepscope.analyzers.report import build_report

    with duckdb.connect(str(drifting), read_only=True) as con:
        report = build_report(con, "xdrift").critical_path
        alone = step_paths(con, "xdrift")
        cut = step_paths(con, "xdrift", [2])
    assert report.steps and len(alone.steps) == len(report.steps)
    for a, r in zip(alone.steps, report.steps, strict=True):
        assert (a.step, a.reference_rank, a.runs, a.ranks, a.jumps) == (
            r.step, r.reference_rank, r.runs, r.ranks, r.jumps)
        assert a.path_ms == pytest.approx(r.path_ms, abs=1e-9)
    assert [s.step for s in cut.steps] == [2]
    assert cut.steps[0].runs == next(r.runs for r in report.steps if r.step == 2)


def test_perfetto_format_holds_the_json_events(drifting: Path, exported: dict[str, Any],
                                                tmp_path: Path) -> None:
    """`--format perfetto` (analyzers/export_perfetto.py), read back with the perfetto
    package's own generated messages: a track per rank and per thread named as in the
    JSON, every complete event a begin and an end at its JSON times (ns), every flow
    end an instant carrying an id that pairs an outgoing with a terminating one."""
    pytest.importorskip("perfetto")
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TrackEvent

    out = tmp_path / "trace.pftrace"
    assert main(["export", "xdrift", "--db", str(drifting), "--out", str(out),
                 "--format", "perfetto"]) == 0
    trace = Trace.FromString(out.read_bytes())
    names = {p.track_descriptor.process.process_name for p in trace.packet
             if p.HasField("track_descriptor") and p.track_descriptor.HasField("process")}
    events = exported["traceEvents"]
    want = {e["args"]["name"] for e in events
            if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == want and len(names) == 16
    slices = [e for e in events if e["ph"] == "X"]
    kinds = collections.Counter(p.track_event.type for p in trace.packet
                                if p.HasField("track_event"))
    assert kinds[TrackEvent.TYPE_SLICE_BEGIN] == kinds[TrackEvent.TYPE_SLICE_END] == len(slices)
    origin = exported["otherData"]["stepscope"]["origin_ns"]
    begins = sorted((p.timestamp - origin, p.track_event.name) for p in trace.packet
                    if p.track_event.type == TrackEvent.TYPE_SLICE_BEGIN)
    assert begins == sorted((round(e["ts"] * 1000), e["name"]) for e in slices)
    ends = sorted(p.timestamp - origin for p in trace.packet
                  if p.track_event.type == TrackEvent.TYPE_SLICE_END)
    assert ends == sorted(round((e["ts"] + e["dur"]) * 1000) for e in slices)
    flows = [p.track_event for p in trace.packet
             if p.track_event.type == TrackEvent.TYPE_INSTANT]
    out_ids = collections.Counter(i for t in flows for i in t.flow_ids)
    in_ids = collections.Counter(i for t in flows for i in t.terminating_flow_ids)
    assert len(flows) == sum(e["ph"] in ("s", "f") for e in events) > 0
    assert set(out_ids) == set(in_ids)


def test_perfetto_without_the_package_is_a_usage_error(
        drifting: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Without the perfetto package, one line saying how to get it, exit 2, no file."""
    from stepscope.commands import export_cmd

    monkeypatch.setattr(export_cmd, "available", lambda: False)
    out = tmp_path / "t.pftrace"
    assert main(["export", "xdrift", "--db", str(drifting), "--out", str(out),
                 "--format", "perfetto"]) == 2
    assert "stepscope[perfetto]" in capsys.readouterr().err and not out.exists()


def test_two_exports_are_byte_identical(drifting: Path, tmp_path: Path) -> None:
    """Two exports of one run are the same bytes (the rule: two identical runs give
    identical results). Before, the sections had no ORDER BY and DuckDB's threads
    interleaved the GPU events differently from one run to the next (1 export in 3 of
    sample_traces/cpu/straggler differed)."""
    outs = [tmp_path / f"e{i}.json" for i in range(4)]
    for out in outs:
        assert main(["export", "xdrift", "--db", str(drifting), "--out", str(out)]) == 0
    first = outs[0].read_bytes()
    assert all(out.read_bytes() == first for out in outs[1:])
    events = json.loads(first)["traceEvents"]
    gpu = [(e["pid"], e["ts"]) for e in events if e.get("ph") == "X"
           and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")]
    assert gpu and gpu == sorted(gpu)  # the GPU section by rank, then start
