"""Write the NCCL evidence of one run into the database (inside the ingest transaction).

Each file is parsed on its own; a file that cannot be read becomes one failure line and
the others still go in (the same contract as the Kineto traces). Two files claiming the
same rank for the same kind are a conflict: the second is reported, never merged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import duckdb
import pyarrow as pa

from ingest.errors import TraceFileError
from ingest.nccl.flight_recorder import read_flight_recorder
from ingest.nccl.sniff import FLIGHT_RECORDER
from ingest.sources import NcclFile

NCCL_TABLES = ("nccl_sources", "fr_groups", "fr_entries")
INSERT_SOURCE = "INSERT INTO nccl_sources BY NAME SELECT * FROM staged_source"
INSERT_RANK_ROWS = "INSERT INTO {table} BY NAME SELECT $run AS run, $rank AS rank, * FROM staged"
INSERT_FR_GROUPS = """
INSERT INTO process_groups BY NAME
SELECT $run AS run, pg_name, any_value(pg_desc) AS pg_desc, any_value(ranks) AS ranks,
       CAST(len(any_value(ranks)) AS INTEGER) AS size, 'nccl' AS backend,
       false AS ranks_truncated, 'flight_recorder' AS source
FROM fr_groups
WHERE run = $run AND pg_name NOT IN (SELECT pg_name FROM process_groups WHERE run = $run)
GROUP BY pg_name
"""


def ingest_nccl_files(con: duckdb.DuckDBPyConnection, run: str, files: Sequence[NcclFile],
                      failures: list[tuple[str, str]]) -> list[str]:
    """Parse and insert every NCCL file; returns the files ingested, appends failures."""
    claimed: dict[tuple[str, int], str] = {}
    done: list[str] = []
    for nf in files:
        try:
            READERS[nf.kind](con, run, nf, claimed)
            done.append(nf.display)
        except TraceFileError as exc:
            failures.append((exc.file, exc.problem))
    if any(nf.kind == FLIGHT_RECORDER for nf in files):
        con.execute(INSERT_FR_GROUPS, {"run": run})
    return done


def claim(claimed: dict[tuple[str, int], str], kind: str, rank: int, display: str) -> None:
    """Refuse a second file of the same kind for the same rank."""
    other = claimed.get((kind, rank))
    if other is not None:
        raise TraceFileError(display, f"rank {rank} is also claimed by {other} ({kind}); put "
                             "each run's files in its own --run")
    claimed[(kind, rank)] = display


def insert_source(con: duckdb.DuckDBPyConnection, row: dict[str, Any]) -> None:
    con.register("staged_source", pa.Table.from_pylist([row]))
    try:
        con.execute(INSERT_SOURCE)
    finally:
        con.unregister("staged_source")


def insert_rank_rows(con: duckdb.DuckDBPyConnection, table: str, run: str, rank: int | None,
                     rows: pa.Table) -> None:
    con.register("staged", rows)
    try:
        con.execute(INSERT_RANK_ROWS.format(table=table), {"run": run, "rank": rank})
    finally:
        con.unregister("staged")


def _insert_fr(con: duckdb.DuckDBPyConnection, run: str, nf: NcclFile,
               claimed: dict[tuple[str, int], str]) -> None:
    dump = read_flight_recorder(nf.path, nf.display)
    claim(claimed, FLIGHT_RECORDER, dump.rank, dump.file)
    insert_source(con, {
        "run": run, "source_file": dump.file, "kind": FLIGHT_RECORDER, "format": dump.format,
        "rank": dump.rank, "rank_source": dump.rank_source, "version": dump.version,
        "nccl_version": dump.comm_lib_version, "host": None, "n_records": dump.n_entries,
        "note": dump.rank_conflict,
    })
    insert_rank_rows(con, "fr_groups", run, dump.rank, dump.groups)
    insert_rank_rows(con, "fr_entries", run, dump.rank, dump.entries)


Reader = Callable[[duckdb.DuckDBPyConnection, str, NcclFile, dict[tuple[str, int], str]], None]
READERS: dict[str, Reader] = {FLIGHT_RECORDER: _insert_fr}
