"""Several launches in one NCCL log (issue 41 §6): two runs pasted into one file, whose
processes (different pids, different communicators) claim the same global ranks.

The file is hand-written from NCCL 2.27's line shapes (tests/data/nccl/README.md: the
`ncclCommInitRank … Init START / COMPLETE` and `comm … nRanks … nNodes … localRanks …`
lines), in the shape of a public notes file that pasted two launches of a 16-GPU, 2-node
inference job (devopsrustem/slurmv4, no licence, so not copied): launch 1 is 16 ranks on
gpu-a (ranks 0-7, pids 177787-177794) and gpu-b (ranks 8-15, pids 181411-181418) in
communicator 0x6c1f0e2d3b4a5968; then a retry, launch 2, of which only gpu-a's part was
pasted (ranks 0-7, pids 185302-185309, communicator 0x221dee7fa4558566, nranks 16).
Before: 'gpu-a: ranks 0, 0, 1, 1, …' with nothing saying two launches were mixed."""

from __future__ import annotations

from pathlib import Path

import duckdb
import msgspec
import pytest
from conftest import REPO

import stepscope
from stepscope.analyzers.comm.nccl import build_nccl_section
from stepscope.analyzers.results import NcclSection
from stepscope.dashboard.render.html_nccl import nccl_section
from stepscope.dashboard.render.nccl import nccl_lines, spans

BUS = ("18000", "2a000", "3a000", "5d000", "9a000", "ab000", "ba000", "db000")
LAUNCH_1, LAUNCH_2 = "0x6c1f0e2d3b4a5968", "0x221dee7fa4558566"


def _process(host: str, pid: int, rank: int, dev: int, comm_id: str, ptr: str) -> list[str]:
    pre = f"{host}:{pid}:{pid} [{dev}] NCCL INFO "
    init = (f"ncclCommInitRank comm {ptr} rank {rank} nranks 16 cudaDev {dev} nvmlDev {dev} "
            f"busId {BUS[dev]} commId {comm_id} - Init")
    return [pre + "NCCL version 2.27.5+cuda12.9", pre + "Using network IB",
            pre + init + " START",
            pre + f"comm {ptr} rank {rank} nRanks 16 nNodes 2 localRanks 8 localRank {dev} "
                  "MNNVL 0",
            pre + init + " COMPLETE"]


def two_launches() -> str:
    lines: list[str] = []
    for dev in range(8):
        lines += _process("gpu-a", 177787 + dev, dev, dev, LAUNCH_1, f"0x55{dev}a00")
    for dev in range(8):
        lines += _process("gpu-b", 181411 + dev, 8 + dev, dev, LAUNCH_1, f"0x56{dev}b00")
    lines += ["", "hangs here; retry with NCCL_ALGO=Ring NCCL_PROTO=Simple", ""]
    for dev in range(8):
        lines += _process("gpu-a", 185302 + dev, dev, dev, LAUNCH_2, f"0x57{dev}c00")
    return "\n".join(lines) + "\n"


def _section(tmp_path: Path, root: Path) -> NcclSection:
    db = tmp_path / "s.duckdb"
    assert stepscope.ingest_run([root], db=db, run="job").exit_code == 0
    section = build_nccl_section(duckdb.connect(str(db), read_only=True), "job")
    assert section is not None
    return section


@pytest.fixture(scope="module")
def pasted(tmp_path_factory: pytest.TempPathFactory) -> NcclSection:
    tmp = tmp_path_factory.mktemp("launches")
    (tmp / "job").mkdir()
    (tmp / "job" / "notes.txt").write_text(two_launches())
    return _section(tmp, tmp / "job")


def test_launches_are_told_apart(pasted: NcclSection) -> None:
    assert isinstance(pasted.launches, list)
    got = [(lau.launch, lau.comm_id, lau.nranks, lau.communicators, lau.hosts, lau.pids)
           for lau in pasted.launches]
    assert got == [
        (1, LAUNCH_1, 16, 1, {"gpu-a": list(range(8)), "gpu-b": list(range(8, 16))},
         {"gpu-a": list(range(177787, 177795)), "gpu-b": list(range(181411, 181419))}),
        (2, LAUNCH_2, 16, 1, {"gpu-a": list(range(8))},
         {"gpu-a": list(range(185302, 185310))})]
    launch_of = {r.pid: r.launch for r in pasted.ranks}
    assert launch_of[177787] == 1 and launch_of[181418] == 1 and launch_of[185302] == 2
    assert len(pasted.ranks) == 24


def test_markdown_and_html_say_so(pasted: NcclSection) -> None:
    md = "\n".join(nccl_lines(pasted))
    assert ("- 2 launches in the NCCL logs: their processes share no communicator, and 8 "
            "rank(s) are claimed by processes of more than one launch (different pids); "
            "each launch is listed on its own:") in md
    assert (f"  - launch 1: communicator {LAUNCH_1} of 16 ranks (16 logged, 1 "
            "communicator(s)); gpu-a: ranks 0-7 (pid(s) 177787-177794); gpu-b: ranks 8-15 "
            "(pid(s) 181411-181418)") in md
    assert (f"  - launch 2: communicator {LAUNCH_2} of 16 ranks (8 logged, 1 "
            "communicator(s)); gpu-a: ranks 0-7 (pid(s) 185302-185309)") in md
    assert "ranks 0, 0, 1" not in md
    html = nccl_section(pasted)
    assert "2 launches in the NCCL logs" in html and "launch 2: communicator" in html


def test_one_launch_reads_as_before(tmp_path: Path) -> None:
    """Every process of the tp_across_nodes logs joins the world communicator: one
    launch, no `launches` and no `launch` in the JSON, the hosts line as before."""
    section = _section(tmp_path, REPO / "tests" / "data" / "nccl" / "tp_across_nodes"
                       / "nccl-logs")
    assert isinstance(section.launches, msgspec.UnsetType)
    raw = msgspec.json.encode(section)
    assert b'"launch' not in raw
    assert ("- 4 host(s) in the NCCL logs: node000: ranks 0, 1; node001: ranks 2, 3; "
            "node002: ranks 4, 5; node003: ranks 6, 7") in nccl_lines(section)


def test_spans() -> None:
    assert spans([7, 0, 1, 2, 3, 3, 9, 10]) == "0-3, 7, 9-10"
    assert spans([]) == "-"


def test_layout_takes_the_launch_most_members_logged(tmp_path: Path) -> None:
    """Both launches' communicators have 16 ranks; the nodes come from launch 1's, which
    16 processes on 2 hosts logged (launch 2: 8 on 1)."""
    from stepscope.analyzers.report import build_report

    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "notes.txt").write_text(two_launches())
    db = tmp_path / "s.duckdb"
    assert stepscope.ingest_run([tmp_path / "job"], db=db, run="job").exit_code == 0
    lay = build_report(duckdb.connect(str(db), read_only=True), "job").layout
    assert (lay.nodes, lay.gpus_per_node) == (2, 8)
    assert lay.notes[0].startswith(f"nodes from the NCCL logs: communicator {LAUNCH_1} (16 "
                                   "ranks) logged nNodes 2, localRanks 8 on 2 logging host(s)")
