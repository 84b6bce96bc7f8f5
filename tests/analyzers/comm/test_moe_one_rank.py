"""Rank 0 of DeepSeek-V3's 64-GPU training job (deepseek-ai/profile-data train.json,
tests/data/deepseek-ai_profile-data/PROVENANCE.md): what a report may say when one rank
of many was traced (issue 41 §8)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import msgspec
import pytest
from conftest import REPO

from stepscope.analyzers.results import Report, from_json
from stepscope.cli import main
from stepscope.dashboard.app.views.overview import straggler_value
from stepscope.dashboard.render.html_report import report_html
from stepscope.dashboard.render.stragglers import no_straggler_line, untraced_ranks

TRACE = REPO / "tests" / "data" / "deepseek-ai_profile-data" / "train.json.gz"
UNKNOWN = "unknown: 1 of 64 ranks traced"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("deepseek") / "s.duckdb"
    assert main(["ingest", str(TRACE), "--db", str(path), "--run", "train"]) == 0
    yield path


def _report(db: Path, capsys: pytest.CaptureFixture[str], fmt: str) -> str:
    assert main(["report", "train", "--db", str(db), "--format", fmt]) == 0
    return capsys.readouterr().out


def test_stragglers_are_unknown_with_one_rank_of_64(db: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """No straggler can be named or ruled out from 1 of 64 ranks: Markdown, HTML, the
    Overview's headline cell and the Ranks page say 'unknown', never 'none'."""
    report = from_json(_report(db, capsys, "json"), Report)
    assert (report.run.ranks, report.run.world_size, report.stragglers) == (1, 64, ())
    assert untraced_ranks(report) == UNKNOWN
    assert straggler_value(report) == "unknown"  # with "1 of 64 ranks traced" beneath
    assert no_straggler_line(report).startswith(UNKNOWN + ": ")
    md = _report(db, capsys, "md")
    section = md.split("## Stragglers\n\n", 1)[1].split("\n", 1)[0]
    assert section.startswith(f"- {UNKNOWN}:") and "- none" not in section
    html = report_html(report)
    body = html.split('id="stragglers"', 1)[1].split("</section>", 1)[0]
    assert "Unknown: 1 of 64 ranks traced" in body and "None:" not in body
    # the same report with every rank traced: "none" as before
    whole = msgspec.structs.replace(report, run=msgspec.structs.replace(report.run, ranks=64))
    assert untraced_ranks(whole) is None and straggler_value(whole) == "none"
    assert no_straggler_line(whole) == "none: no rank is consistently the last to arrive"


def test_json_report_keeps_its_shape(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(_report(db, capsys, "json"))
    assert data["stragglers"] == [] and data["run"]["world_size"] == 64


def test_db_holds_one_rank(db: Path) -> None:
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM ranks").fetchone() == (1,)


def test_deepep_internode_kernels_cross_nodes_with_unknown_bytes(
        db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 41 §10. Before: crosses_nodes false, link nvlink (200), 0.0 MB/step. DeepEP's
    internode kernels move tokens between nodes over RDMA, and none records its bytes."""
    report = from_json(_report(db, capsys, "json"), Report)
    rows = {c.group_label: c for c in report.collectives if c.op != "layout"}
    assert sorted(rows) == ["deepep combine", "deepep dispatch", "deepep notify"]
    assert {(c.crosses_nodes, c.link, c.link_source, c.bytes_per_step, c.bus_bw_gbs)
            for c in rows.values()} == {(True, "network", "assumed", None, None)}
    # calls per step as counted in the trace: 8 dispatch, 8 combine, 16 notify
    # (4 notify_dispatch + 12 cached_notify) in its one complete step
    assert [rows[k].calls_per_step for k in ("deepep dispatch", "deepep combine",
                                             "deepep notify")] == [8.0, 8.0, 16.0]
    md = _report(db, capsys, "md")
    assert "| all_to_all | deepep dispatch | 8.0 | - | " in md
    assert "network (50, assumed)" in md and "nvlink (200" not in md


def test_ep_inferred_from_deepep_internode_kernels(
        db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 41 §9. Before: EP 1. `dpsk::ep::internode::notify_dispatch<false, 8>` is
    compiled for 8 RDMA ranks (nodes) of DeepEP's 8 NVLink peers: EP 64, the upstream
    README's "EP64, TP1"."""
    report = from_json(_report(db, capsys, "json"), Report)
    lay = report.layout
    assert lay is not None
    assert (lay.tp, lay.pp, lay.dp, lay.cp, lay.ep, lay.source) == (1, 1, 64, 1, 64,
                                                                     "inferred")
    assert any(n.startswith("EP 64 inferred from DeepEP's internode kernels")
               and "8 nodes x 8 NVLink peers" in n for n in lay.notes)


def test_dispatch_layout_is_part_of_the_token_exchange(
        db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 41 §11. Before: `dpsk::ep::cuda::get_dispatch_layout` was compute (no
    collectives row). It counts the tokens per rank and expert that the dispatch then
    sends: the expert exchange's time, on no link (it moves no bytes between GPUs). Its
    four kernels in the complete step, by hand from the raw events: 74 + 116 + 78 + 142 us
    = 0.410 ms."""
    report = from_json(_report(db, capsys, "json"), Report)
    layout = [c for c in report.collectives if c.op == "layout"]
    assert len(layout) == 1
    row = layout[0]
    assert (row.group_label, row.library, row.role, row.calls_per_step) == (
        "deepep layout", "deepep", "expert_exchange", 4.0)
    assert row.time_ms == pytest.approx(0.410, abs=1e-3)
    assert row.exposed_ms + row.overlapped_ms == pytest.approx(row.time_ms, abs=2e-3)
    assert (row.link, row.link_source, row.link_peak_gbs, row.crosses_nodes,
            row.bytes_per_step, row.bus_bw_gbs) == ("none", "kernel_table", None, False,
                                                    None, None)
    assert "| all_to_all | deepep layout | 4.0 | - | 0.41 | " in _report(db, capsys, "md")


def test_a_collective_of_no_process_group_reads_its_name(
        db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """DeepEP's token exchange has no process group: the critical path's top ops name it
    'all_to_all', never 'all_to_all (?)' (issue 45, point 9), in JSON and Markdown."""
    report = from_json(_report(db, capsys, "json"), Report)
    cp = report.critical_path
    assert cp is not None
    names = [o.op for o in cp.top_ops if o.category in ("collective", "p2p")]
    assert "all_to_all" in names and not any("(?)" in n for n in names), names
    assert "(?)" not in _report(db, capsys, "md")
