"""The rank tables are stored in rank order whatever the files' names sort as (issue 44).

A folder's sorted listing puts `rank10` before `rank2`; appended in that order, every
stored row group of a large job mixes ranks from across it, and each batch of the
attribution (`rank BETWEEN lo AND hi`) reads blocks of most of the run. The writer takes
the traces in the order of the rank their names say (ingest.writer.in_rank_order).
"""

from __future__ import annotations

from pathlib import Path

from conftest import kineto_trace, q, write_trace

from stepscope.ingest import ingest
from stepscope.ingest.sources import TraceFile
from stepscope.ingest.writer import in_rank_order

RANK_TABLES = ("ranks", "cpu_ops", "gpu_ops", "collectives", "steps")


def test_traces_are_taken_in_the_order_of_their_ranks() -> None:
    listed = ["j/a/rank1.json", "j/a/rank10.json", "j/a/rank2.json", "j/b/rank0.json",
              "j/notes.json", "j/z/worker3.json", "j.zip!rank11.json", "j/a.json"]
    ordered = [t.display for t in in_rank_order([TraceFile(Path(n), n) for n in listed])]
    assert ordered == ["j/b/rank0.json", "j/a/rank1.json", "j/a/rank2.json",
                       "j/z/worker3.json", "j/a/rank10.json", "j.zip!rank11.json",
                       "j/notes.json", "j/a.json"]  # no rank in the name: last, as listed


def test_twelve_ranks_are_stored_in_rank_order(tmp_path: Path) -> None:
    world = 12  # sorted as text: rank0, rank1, rank10, rank11, rank2, ...
    for rank in range(world):
        write_trace(tmp_path / "job" / f"rank{rank}.json.gz",
                    kineto_trace(rank=rank, world_size=world))
    db = tmp_path / "o.duckdb"
    result = ingest([tmp_path / "job"], db=db, jobs=1)
    assert result.ranks == list(range(world)) and not result.failures
    for table in RANK_TABLES:
        stored = [r for r, in q(db, f"SELECT rank FROM {table} ORDER BY rowid")]
        assert len(set(stored)) == world, table
        assert stored == sorted(stored), f"{table} holds ranks out of order"
