"""Hosts' clocks aligned from the matched collectives (issue 46; docs/timeline.md).

Simulated jobs whose nodes' clocks lead the true time by hundreds of µs, with and without
drift (sample_traces/simulate_gpu.py, ground truth "clocks"): the estimated offsets and
drifts against the truth, the residual against the truth's, the ends of every matched
collective and send/recv pair on the aligned clock, straggler detection with and without
the skew, and the cases where nothing should be aligned (a broken match, one host)."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from stepscope import ingest_run
from stepscope.analyzers import clocks
from stepscope.analyzers.report import build_report

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "sample_traces"))
import simulate_gpu  # noqa: E402

OFFSETS_US = (0.0, 400.0, -250.0, 1300.0)


def simulate(root: Path, name: str, **kw: Any) -> tuple[Path, dict[str, Any]]:
    """A TP2 x PP2 x DP4 job on four 4-GPU nodes, ingested; (database, ground truth)."""
    base = dict(tp=2, pp=2, dp=4, gpus_per_node=4, steps=3, microbatches=4)
    cfg = dataclasses.replace(simulate_gpu.SETS["healthy"], name=name, **{**base, **kw})
    folder = simulate_gpu.write_set(cfg, root)
    db = root / f"{name}.duckdb"
    ingest_run(folder, db=db, run=name, jobs=1)
    return db, json.loads((folder / "ground_truth.json").read_text())


@pytest.fixture(scope="module")
def skewed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    return simulate(tmp_path_factory.mktemp("skew"), "skew", clock_offsets_us=OFFSETS_US)


@pytest.fixture(scope="module")
def drifting(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    return simulate(tmp_path_factory.mktemp("drift"), "drift", clock_offsets_us=OFFSETS_US,
                    clock_drift_ppm=(0.0, 150.0, -200.0, 80.0))


def rows(db: Path, query: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(query, params or {}).fetchall()


def expected_lead_ns(truth: dict[str, Any], host: str, ref_ns: int) -> float:
    """The truth's lead of `host` over node000 at ref_ns (node000's clock)."""
    hosts, base = truth["clocks"]["hosts"], truth["clocks"]["base_ns"]

    def lead(h: str, t: float) -> float:
        return hosts[h]["offset_ns"] + hosts[h]["drift_ppm"] * 1e-6 * t

    t_true = ref_ns - base - lead("node000", 0)  # node000 has no drift in these sets
    return lead(host, t_true) - lead("node000", t_true)


@pytest.mark.parametrize("which", ["skewed", "drifting"])
def test_offsets_match_the_truth(which: str, request: pytest.FixtureRequest) -> None:
    db, truth = request.getfixturevalue(which)
    got = rows(db, "SELECT host, offset_ns, drift_ppm, ref_ns, residual_ns, aligned "
                   "FROM clock_offsets WHERE rank IS NULL ORDER BY host")
    assert [r[0] for r in got] == sorted(truth["clocks"]["hosts"])
    for host, offset, drift, ref, residual, aligned in got:
        assert aligned, host
        assert offset == pytest.approx(expected_lead_ns(truth, host, ref), abs=100)
        want_drift = truth["clocks"]["hosts"][host]["drift_ppm"]
        assert drift == pytest.approx(want_drift, abs=0.5)  # 15 ns over the 30 ms
        # the truth's ends coincide: the residual is the truth's (0 µs) within 0.1 µs
        assert residual / 1e3 == pytest.approx(truth["clocks"]["end_residual_us"], abs=0.1)


def test_aligned_ends_agree_within_10us(drifting: tuple[Path, dict[str, Any]]) -> None:
    """Every matched collective instance and send/recv pair ends within 10 µs on the
    aligned clock (rank_clocks), where the raw ends differ by up to 1.55 ms."""
    db, _ = drifting
    aligned = """
        SELECT w.instance_key,
            max(c.work_end_ns) - min(c.work_end_ns) AS raw,
            max(c.work_end_ns - k.offset_ns - k.drift_ppm * 1e-6 * (c.work_end_ns - k.ref_ns))
            - min(c.work_end_ns - k.offset_ns - k.drift_ppm * 1e-6 * (c.work_end_ns - k.ref_ns))
                AS spread
        FROM collective_waits w JOIN collectives c USING (run, rank, coll_id)
        JOIN rank_clocks k USING (run, rank)
        WHERE w.n_ranks > 1 AND NOT c.is_p2p GROUP BY w.instance_key"""
    got = rows(db, aligned)
    assert len(got) > 300
    assert max(r[1] for r in got) > 1_000_000
    assert max(r[2] for r in got) < 10_000
    pairs = rows(db, """
        WITH p AS (
            SELECT c.rank, c.peer_rank, c.collective,
                c.work_end_ns - k.offset_ns - k.drift_ppm * 1e-6 * (c.work_end_ns - k.ref_ns)
                    AS e,
                row_number() OVER (PARTITION BY c.rank, c.peer_rank, c.collective
                                   ORDER BY c.work_start_ns) AS n
            FROM collectives c JOIN rank_clocks k USING (run, rank) WHERE c.is_p2p)
        SELECT count(*), max(abs(s.e - r.e)) FROM p s JOIN p r
        ON r.rank = s.peer_rank AND r.peer_rank = s.rank AND r.n = s.n
        AND s.collective = 'send' AND r.collective = 'recv'""")
    assert pairs[0][0] > 20 and pairs[0][1] < 10_000


def test_stragglers_same_with_and_without_skew(tmp_path: Path) -> None:
    """A slow rank is found the same whatever the nodes' clocks (offsets and drift), and
    the critical path (the dependency graph's chain, durations on each rank's clock) is
    the same under offsets. (Under drift a rank's durations stretch by its ppm — 2 ns of a
    14 ms window at 150 ppm — which may break an exact tie between equal windows
    differently: the path's reference rank then changes between equivalent ranks.)"""
    found, paths = [], []
    for name, kw in (("even", {"clock_offsets_us": (0.0, 0.0, 0.0, 0.0)}),
                     ("skew", {"clock_offsets_us": OFFSETS_US}),
                     ("drift", {"clock_offsets_us": OFFSETS_US,
                                "clock_drift_ppm": (0.0, 150.0, -200.0, 80.0)})):
        db, _ = simulate(tmp_path, name, slow_rank=6, slow_factor=1.4, **kw)
        with duckdb.connect(str(db), read_only=True) as con:
            report = build_report(con, name)
        found.append([(s.rank, round(s.waited_on_ms, 3)) for s in report.stragglers])
        assert report.critical_path is not None
        paths.append([(p.step, [(r.rank, r.category, round(r.start_ms, 3), round(r.ms, 3))
                                for r in p.runs]) for p in report.critical_path.steps])
    assert found[0] and found[0][0][0] == 6
    assert found[0] == found[1]
    # under drift the same rank, its wait within 10 us: the wait passed on through the
    # pipeline weighs bubbles, which drift stretches (5.347 vs 5.350 ms at 150 ppm)
    assert [r for r, _ in found[2]] == [r for r, _ in found[0]]
    assert [w for _, w in found[2]] == pytest.approx([w for _, w in found[0]], abs=0.01)
    assert paths[0] and paths[0] == paths[1]


def test_report_states_the_clocks(drifting: tuple[Path, dict[str, Any]]) -> None:
    db, _ = drifting
    with duckdb.connect(str(db), read_only=True) as con:
        section = build_report(con, "drift").clocks
    assert section is not None and section.aligned
    assert [round(c.offset_us) for c in section.hosts] == [0, 402, -252, 1301]
    assert section.summary.startswith("clocks: 4 hosts, offsets 0 / +402 / -252 / +1,301 µs")


def test_a_broken_match_is_not_aligned(skewed: tuple[Path, dict[str, Any]],
                                       tmp_path: Path) -> None:
    """Ends of node002 scrambled by up to 2 ms: its residual is large, it is not aligned
    and says so; the other hosts still are."""
    db, _ = skewed
    copy = tmp_path / "broken.duckdb"
    copy.write_bytes(db.read_bytes())
    with duckdb.connect(str(copy)) as con:
        con.execute("UPDATE collectives SET work_end_ns = work_end_ns + "
                    "(hash(coll_id * 7 + rank) % 2000000) WHERE rank BETWEEN 8 AND 11")
        clocks.materialize(con, "skew")
        got = dict(con.execute("SELECT host, aligned FROM clock_offsets WHERE rank IS NULL"
                               ).fetchall())
        (note,), = con.execute("SELECT note FROM clock_offsets WHERE host = 'node002'"
                               " AND rank IS NULL").fetchall()
        (applied,), = con.execute("SELECT max(abs(offset_ns)) FROM rank_clocks "
                                  "WHERE rank BETWEEN 8 AND 11").fetchall()
    assert got == {"node000": True, "node001": True, "node002": False, "node003": True}
    assert "not aligned on noise" in note and applied == 0


def test_host_note_and_graph() -> None:
    fit = clocks.PairFit(a=0, b=1, n=5, const=1.0, slope=0.0, intercept=1.0,
                         const_res=0.0, line_res=0.0, span=1.0)
    assert clocks.connected(3, [fit]) == {0, 1}
    assert clocks.host_note(2, 0, None, False).startswith("meets the other hosts in 0")
    assert clocks.host_note(1, 10, 1_000, True) is None
    offsets, slopes = clocks.solve(3, [fit, dataclasses.replace(fit, a=1, b=2, const=2.0,
                                                                intercept=2.0)])
    assert list(offsets) == pytest.approx([0.0, 1.0, 3.0]) and not slopes.any()

