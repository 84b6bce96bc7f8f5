"""Bus bandwidth against the peak of the link it ran on (docs/report.md, `collectives`).

The bundled sets `diff_base` and `fp32_v100` hold collectives whose bus bandwidth, as the
traces give it, is above the peak of their link: the simulator times `diff_base`'s DP
all-reduce at 100 GB/s bus bandwidth (config `dp_bw_gbs`) across nodes, against the 50 GB/s
per-GPU network the report assumes, and writes `fp32_v100`'s messages as Float elements
(4 bytes) while it timed them as bf16 (2 bytes) at link speeds above a V100's 150 GB/s
NVLink. The bandwidth is right given the trace; the report must say it is above the peak.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import stepscope
from stepscope.analyzers.comm.collectives import over_peak_warning
from stepscope.analyzers.report import build_report
from stepscope.analyzers.results import CollectiveStat
from stepscope.dashboard.render.report import collective_lines

SIM = Path(__file__).resolve().parents[3] / "sample_traces" / "simulated"
SETS = ("diff_base", "fp32_v100")


@pytest.fixture(scope="module")
def links_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("links") / "l.duckdb"
    for name in SETS:
        stepscope.ingest_run(SIM / name, db=db, run=name)
    return db


def stats(db: Path, run: str) -> dict[str, CollectiveStat]:
    with stepscope.open(db) as store:
        return {c.group_label: c for c in build_report(store.con, run).collectives}


def config(run: str) -> dict[str, Any]:
    cfg: dict[str, Any] = json.loads((SIM / run / "ground_truth.json").read_text())["config"]
    return cfg


def test_bus_bandwidth_is_the_simulated_one(links_db: Path) -> None:
    """bytes x 2(N-1)/N / kernel time gives back the bandwidth the simulator timed the
    collectives at: the computation is right; fp32_v100's Float elements double it."""
    base, cfg = stats(links_db, "diff_base"), config("diff_base")
    assert base["DATA_PARALLEL_GROUP"].bus_bw_gbs == pytest.approx(cfg["dp_bw_gbs"], rel=1e-3)
    assert base["TENSOR_MODEL_PARALLEL_GROUP"].bus_bw_gbs == pytest.approx(cfg["tp_bw_gbs"],
                                                                          rel=1e-3)
    v100, cfg = stats(links_db, "fp32_v100"), config("fp32_v100")
    assert v100["TENSOR_MODEL_PARALLEL_GROUP"].bus_bw_gbs == pytest.approx(
        2 * cfg["tp_bw_gbs"], rel=1e-3)
    assert v100["DATA_PARALLEL_GROUP"].bus_bw_gbs == pytest.approx(2 * cfg["dp_bw_gbs"],
                                                                  rel=1e-3)


def test_the_link_is_the_one_the_group_spans(links_db: Path) -> None:
    """diff_base's DP groups (4 per node, TP 2) span two nodes: the network; its TP pairs
    and all of fp32_v100 (8 GPUs per node) sit on one node: NVLink."""
    base = stats(links_db, "diff_base")
    assert (base["DATA_PARALLEL_GROUP"].link, base["DATA_PARALLEL_GROUP"].crosses_nodes) == (
        "network", True)
    assert base["TENSOR_MODEL_PARALLEL_GROUP"].link == "nvlink"
    assert {c.link for c in stats(links_db, "fp32_v100").values()} == {"nvlink"}


@pytest.mark.parametrize(("run", "group", "ratio"), [
    ("fp32_v100", "TENSOR_MODEL_PARALLEL_GROUP", "4.00x"),
    ("fp32_v100", "DATA_PARALLEL_GROUP", "2.67x"),
])
def test_above_the_peak_is_a_warning(links_db: Path, run: str, group: str, ratio: str) -> None:
    """Above its link's peak a collective carries a warning naming it and the ratio, and the
    Markdown report prints it under the table; within the peak there is none."""
    by_group = stats(links_db, run)
    c = by_group[group]
    assert c.link_utilization is not None and c.link_utilization > 1.01
    assert isinstance(c.warning, str)
    assert c.warning.startswith(f"all_reduce on {group}: ") and f" {ratio} the " in c.warning
    lines = collective_lines(tuple(by_group.values()))
    assert f"- warning: {c.warning}" in lines
    within = stats(links_db, "diff_base")["TENSOR_MODEL_PARALLEL_GROUP"]
    assert within.link_utilization is not None and within.link_utilization <= 1.0
    assert not within.warning


def test_the_threshold_is_one_percent() -> None:
    row: Any = {"collective": "all_gather", "group_label": "g"}
    assert over_peak_warning(row, 50.5, 50.0, "network", "assumed") is None
    assert over_peak_warning(row, None, 50.0, "network", "assumed") is None
    assert over_peak_warning(row, 80.0, None, "network", "assumed") is None
    text = over_peak_warning(row, 51.0, 50.0, "ib", "nccl_log")
    assert text is not None and "1.02x the 50 GB/s peak of its link (ib, from NCCL's log)" in text


def test_across_nodes_every_nic_of_the_group_on_a_node_carries_it(links_db: Path) -> None:
    """diff_base's DP all_reduce crosses two 4-GPU nodes at 100 GB/s of bus bandwidth: 2x
    the 50 GB/s per-GPU network peak, but its 4 members on a node each drive their own NIC
    (NCCL's rings cross the network on all of them), so up to 200 GB/s is healthy and no
    warning is given; its utilization is still the share of one NIC, as before."""
    dp = stats(links_db, "diff_base")["DATA_PARALLEL_GROUP"]
    assert dp.bus_bw_gbs == pytest.approx(100.0, rel=1e-3)
    assert dp.link_utilization == pytest.approx(2.0, rel=1e-3)
    assert not dp.warning


def test_the_bound_across_nodes_is_the_group_s_nics_on_a_node() -> None:
    row: Any = {"collective": "all_reduce", "group_label": "dp"}
    assert over_peak_warning(row, 200.0, 50.0, "network", "assumed", nics=4) is None
    text = over_peak_warning(row, 250.0, 50.0, "network", "assumed", nics=4)
    assert text is not None and ("1.25x the 200 GB/s its link can carry (network, assumed: "
                                 "50 GB/s per GPU x the 4 NICs of the group's GPUs on a node)"
                                 ) in text
