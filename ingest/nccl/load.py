"""Write the NCCL evidence of one run into the database (inside the ingest transaction).

Each file was parsed by its own task (ingest/nccl/task.py) into Parquet files; here they
are appended in task order, so the rows do not depend on which executor ran the tasks. A
file that could not be read is one failure line and the others still go in (the same
contract as the Kineto traces). Two dumps claiming the same rank are a conflict: the
second is reported, never merged. Every value was typed by its task, so an append cannot
fail on one; should the database refuse one anyway, the error names the file (the
transaction is then aborted and the run not ingested).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import TYPE_CHECKING

import duckdb

from stepscope.ingest.db import insert_by_name, is_out_of_memory
from stepscope.ingest.errors import (
    MachineFailure,
    StepscopeError,
    TraceFileError,
    machine_problem,
)
from stepscope.ingest.nccl.sniff import FLIGHT_RECORDER, NCCL_INSPECTOR, NCCL_LOG, NCCL_PROFILER
from stepscope.ingest.sql_files import run_script, sql
from stepscope.ingest.tasks import NcclParsed

NCCL_TABLES = ("nccl_sources", "fr_groups", "fr_entries", "nccl_processes", "nccl_comms",
               "nccl_channels", "nccl_rings", "nccl_warnings", "nccl_ops", "nccl_bench",
               "nccl_bench_summary")

if TYPE_CHECKING:
    import pyarrow as pa


@cache
def source_schema() -> pa.Schema:
    """The Arrow layout of an nccl_sources row (Arrow loads with the first NCCL file: a
    run of Kineto traces alone never needs it)."""
    import pyarrow as pa

    return pa.schema([
        ("run", pa.string()), ("source_file", pa.string()), ("kind", pa.string()),
        ("format", pa.string()), ("rank", pa.int32()), ("rank_source", pa.string()),
        ("version", pa.string()), ("nccl_version", pa.string()), ("host", pa.string()),
        ("n_records", pa.int64()), ("note", pa.string()),
    ])


def claim(claimed: dict[tuple[str, int], str], kind: str, rank: int, display: str) -> None:
    """Refuse a second file of the same kind for the same rank."""
    other = claimed.get((kind, rank))
    if other is not None:
        raise TraceFileError(display, f"rank {rank} is also claimed by {other} ({kind}); put "
                             "each run's files in its own --run")
    claimed[(kind, rank)] = display


def accept_nccl(con: duckdb.DuckDBPyConnection, run: str, parsed: NcclParsed,
                claimed: dict[tuple[str, int], str]) -> None:
    """Append one parsed file's rows. TraceFileError (nothing written) when a dump's rank
    is claimed by an earlier dump; StepscopeError when the database refuses a row. Its
    memory limit reached is re-raised as it came (a 4 MB dump of one 2-million-long shape
    failed the ingest "could not be stored … please report this file" at the 32 MiB room,
    where a trace's append is tried again in a larger one), the machine's failure is
    MachineFailure."""
    if parsed.kind == FLIGHT_RECORDER:
        for rank in parsed.ranks:
            claim(claimed, parsed.kind, rank, parsed.file)
    import pyarrow as pa

    try:
        source = pa.Table.from_pylist([{"run": run, **parsed.source}], schema=source_schema())
        insert_by_name(con, "nccl_sources", con.from_arrow(source))
        for table, path in parsed.tables:
            insert_by_name(con, table, con.read_parquet(path), {"run": run})
    except duckdb.InterruptException:
        raise
    except (duckdb.Error, pa.ArrowException) as exc:
        if is_out_of_memory(exc):
            raise  # the room's, not the file's: the writer tries again in a larger room
        if (what := machine_problem(exc)) is not None:  # e.g. no file handle left
            raise MachineFailure(
                f"{what} (the machine's failure, not the files'): run '{run}' was not "
                "ingested, the database is unchanged", what=what) from None
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StepscopeError(
            f"{parsed.file}: could not be stored ({text[:300]}); run '{run}' was not "
            "ingested, the database is unchanged (please report this file)") from None


def finish_nccl(con: duckdb.DuckDBPyConnection, run: str, kinds: Iterable[str]) -> None:
    """What needs every file of the run: Flight Recorder process groups, the logs' links
    between tables and global ranks, plugin bandwidths, and the ops' global ranks."""
    present = set(kinds)
    if FLIGHT_RECORDER in present:
        con.execute(sql("nccl/fr_groups.sql"), {"run": run})
    if NCCL_LOG in present:
        run_script(con, "nccl/link_log_rows.sql", {"run": run})
    if NCCL_PROFILER in present:
        con.execute(sql("nccl/profiler_bandwidth.sql"), {"run": run})
    if present & {NCCL_INSPECTOR, NCCL_PROFILER}:
        run_script(con, "nccl/resolve_op_ranks.sql", {"run": run})
