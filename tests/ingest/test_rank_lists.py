"""`ranks.distributed_info` without the job-sized rank lists (issue 44, ingest/rank_lists.py):
every rank's trace lists the default group's every rank, so the column grew with the square
of the ranks (12 KB per rank at 2,048 ranks) and the writer held it all at the commit
(+51 MB at 2,048 ranks, benchmarks/README.md "The writer's growth in ranks"). Scaled
down: two ranks of a 4,096-rank job, measured in bytes stored per rank; the export still
gives each rank's `distributedInfo` as its trace wrote it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import kineto_trace, q, write_trace

from stepscope.cli import main
from stepscope.ingest.rank_lists import MIN_RANGE_RANKS, RANGE_KEY, stored_text

WORLD = 4096
TP = 8


def _info(rank: int) -> dict[str, Any]:
    """A TP8 job's distributedInfo for `rank` of WORLD: the default group (every rank), its
    data-parallel group (every 8th rank, 512), its tensor-parallel group (8 ranks) and a
    group of 100 ranks that does not step evenly (stored as written)."""
    uneven = [r * r % WORLD for r in range(100)]
    return {"backend": "nccl", "rank": rank, "world_size": WORLD, "pg_count": 4,
            "pg_config": [
                {"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl",
                 "pg_size": WORLD, "ranks": list(range(WORLD))},
                {"pg_name": "1", "pg_desc": "DATA_PARALLEL_GROUP",
                 "backend_config": "cuda:nccl", "pg_size": WORLD // TP,
                 "ranks": list(range(rank % TP, WORLD, TP))},
                {"pg_name": "2", "pg_desc": "TENSOR_MODEL_PARALLEL_GROUP",
                 "backend_config": "cuda:nccl", "pg_size": TP,
                 "ranks": list(range(rank // TP * TP, rank // TP * TP + TP))},
                {"pg_name": "3", "pg_desc": "undefined", "backend_config": "cuda:nccl",
                 "pg_size": 100, "ranks": uneven}],
            "nccl_version": "2.21.5"}


@pytest.fixture(scope="module")
def big_job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ranks 0 and 9 of the 4,096-rank job ingested into a new database."""
    tmp = tmp_path_factory.mktemp("bigjob")
    for rank in (0, 9):
        trace = kineto_trace(rank=rank, world_size=2)
        trace["distributedInfo"] = _info(rank)
        write_trace(tmp / "traces" / f"rank{rank}.json", trace)
    db = tmp / "big.duckdb"
    assert main(["ingest", str(tmp / "traces"), "--db", str(db), "--run", "big",
                 "--executor", "inline", "--quiet"]) == 0
    return db


def test_stored_bytes_do_not_grow_with_the_job(big_job: Path) -> None:
    """Each rank's stored object is under 2 KB, not the 27 KB of its lists as written
    (the default group's 4,096 ranks, 22.5 KB as JSON; the data-parallel group's 512);
    the 100-rank group that does not step evenly is kept as written."""
    rows = q(big_job, "SELECT rank, strlen(CAST(distributed_info AS VARCHAR)), "
                      "CAST(distributed_info AS VARCHAR) FROM ranks ORDER BY rank")
    assert [r for r, _, _ in rows] == [0, 9]
    for rank, stored, text in rows:
        written = len(json.dumps(_info(rank)))
        assert written > 27_000
        assert stored < 2_000, (rank, stored)
        groups = json.loads(text)["pg_config"]
        assert groups[0]["ranks"] == {RANGE_KEY: [0, 1, WORLD]}
        assert groups[1]["ranks"] == {RANGE_KEY: [rank % TP, TP, WORLD // TP]}
        assert groups[2]["ranks"] == _info(rank)["pg_config"][2]["ranks"]  # 8: short
        assert groups[3]["ranks"] == _info(rank)["pg_config"][3]["ranks"]  # uneven


def test_process_groups_keep_every_rank(big_job: Path) -> None:
    """The groups' own table is read from the trace, not from the stored object."""
    (ranks,), = q(big_job, "SELECT ranks FROM process_groups WHERE run = 'big' "
                           "AND pg_name = '0'")
    assert ranks == list(range(WORLD))


def test_export_gives_the_traces_own_object(big_job: Path, tmp_path: Path) -> None:
    """The export's distributedInfo of each rank is its trace's, key order included."""
    out = tmp_path / "x.json"
    assert main(["export", "big", "--db", str(big_job), "--out", str(out)]) == 0
    ranks = json.loads(out.read_text())["otherData"]["stepscope"]["ranks"]
    for rank in (0, 9):
        exported = ranks[str(rank)]["distributedInfo"]
        assert json.dumps(exported) == json.dumps(_info(rank))


@pytest.mark.parametrize("ranks", [
    list(range(MIN_RANGE_RANKS - 1)),                 # too short
    [0] * MIN_RANGE_RANKS,                            # step 0
    list(range(MIN_RANGE_RANKS)) + [MIN_RANGE_RANKS + 1],  # one step off at the end
    [True] + list(range(1, MIN_RANGE_RANKS)),         # a bool is not a rank
    [float(r) for r in range(MIN_RANGE_RANKS)],       # nor a float
    "0-4095",                                         # not a list
    list(range(2**31 - MIN_RANGE_RANKS + 1, 2**31 + 1)),  # past a 32-bit rank
])
def test_what_is_kept_as_written(ranks: Any) -> None:
    info = {"pg_config": [{"pg_name": "0", "ranks": ranks}]}
    assert stored_text(info) == json.dumps(info)


def test_ranges_stepping_down_and_from_any_rank() -> None:
    info = {"rank": 3, "pg_config": [{"ranks": list(range(200, 200 - 3 * 70, -3))},
                                     "not a group", {"pg_name": "x"}]}
    assert json.loads(stored_text(info) or "") == {
        "rank": 3, "pg_config": [{"ranks": {RANGE_KEY: [200, -3, 70]}}, "not a group",
                                 {"pg_name": "x"}]}


def test_an_object_that_names_the_key_is_never_expanded(tmp_path: Path) -> None:
    """A trace whose object already holds the key is stored without spaces (and its long
    lists as written), which the export's pattern does not match: what the export
    expands was always written by the ingest."""
    info = {"rank": 0, "world_size": 1, "note": {RANGE_KEY: [0, 1, 3]},
            "pg_config": [{"pg_name": "0", "ranks": list(range(MIN_RANGE_RANKS))}]}
    text = stored_text(info)
    assert text == json.dumps(info, separators=(",", ":"))
    trace = kineto_trace(rank=0, world_size=1)
    trace["distributedInfo"] = info
    write_trace(tmp_path / "t" / "rank0.json", trace)
    db, out = tmp_path / "k.duckdb", tmp_path / "k.json"
    assert main(["ingest", str(tmp_path / "t"), "--db", str(db), "--run", "k",
                 "--executor", "inline", "--quiet"]) == 0
    assert main(["export", "k", "--db", str(db), "--out", str(out)]) == 0
    exported = json.loads(out.read_text())["otherData"]["stepscope"]["ranks"]["0"]
    assert exported["distributedInfo"] == info


def test_not_json_is_none() -> None:
    assert stored_text({"x": float("nan")}) is None
