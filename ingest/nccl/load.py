"""Write the NCCL evidence of one run into the database (inside the ingest transaction).

Each file is parsed on its own; a file that cannot be read becomes one failure line and
the others still go in (the same contract as the Kineto traces). Two files claiming the
same rank for the same kind are a conflict: the second is reported, never merged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa

from stepscope.ingest.db import insert_by_name
from stepscope.ingest.errors import TraceFileError, as_file_error
from stepscope.ingest.nccl.debug_log import read_nccl_log
from stepscope.ingest.nccl.flight_recorder import read_flight_recorder
from stepscope.ingest.nccl.inspector import read_inspector
from stepscope.ingest.nccl.profiler_plugin import DTYPE_BYTES, read_profiler_dump
from stepscope.ingest.nccl.sniff import FLIGHT_RECORDER, NCCL_INSPECTOR, NCCL_LOG, NCCL_PROFILER
from stepscope.ingest.queries import run_script, sql
from stepscope.ingest.sources import NcclFile

NCCL_TABLES = ("nccl_sources", "fr_groups", "fr_entries", "nccl_processes", "nccl_comms",
               "nccl_channels", "nccl_rings", "nccl_warnings", "nccl_ops")


def ingest_nccl_files(con: duckdb.DuckDBPyConnection, run: str, files: Sequence[NcclFile],
                      failures: list[tuple[str, str]]) -> list[str]:
    """Parse and insert every NCCL file; returns the files ingested, appends failures."""
    claimed: dict[tuple[str, int], str] = {}
    done: list[str] = []
    for nf in files:
        try:
            READERS[nf.kind](con, run, nf, claimed)
            done.append(nf.display)
        except duckdb.Error:
            raise  # the transaction is aborted: the ingest stops (ingest/loader.py)
        except Exception as exc:  # noqa: BLE001 - any reader problem fails this file only
            failure = as_file_error(nf.display, exc)
            failures.append((failure.file, failure.problem))
    if any(nf.kind == FLIGHT_RECORDER for nf in files):
        con.execute(sql("nccl/fr_groups.sql"), {"run": run})
    if any(nf.kind == NCCL_LOG for nf in files):
        run_script(con, "nccl/link_log_rows.sql", {"run": run})
    if any(nf.kind == NCCL_PROFILER for nf in files):
        con.execute(sql("nccl/profiler_bandwidth.sql"), {"run": run})
    if any(nf.kind in (NCCL_INSPECTOR, NCCL_PROFILER) for nf in files):
        run_script(con, "nccl/resolve_op_ranks.sql", {"run": run})
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
        con.execute(sql("nccl/source_insert.sql"))
    finally:
        con.unregister("staged_source")


def insert_rank_rows(con: duckdb.DuckDBPyConnection, table: str, run: str, rank: int | None,
                     rows: pa.Table) -> None:
    """Append one rank's rows to `table` (one of NCCL_TABLES) under the run and rank."""
    insert_by_name(con, table, con.from_arrow(rows), {"run": run, "rank": rank})


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


def _insert_log(con: duckdb.DuckDBPyConnection, run: str, nf: NcclFile,
                claimed: dict[tuple[str, int], str]) -> None:
    log = read_nccl_log(nf.path, nf.display)
    procs = log.processes
    world = log.comms.sort("nranks", descending=True).unique(["host", "pid"], keep="first")
    single = procs.height == 1
    rank = world["rank"][0] if single and world.height == 1 else None
    insert_source(con, {
        "run": run, "source_file": nf.display, "kind": NCCL_LOG, "format": "text",
        "rank": rank, "rank_source": "world_comm" if rank is not None else None,
        "version": None, "nccl_version": ", ".join(log.nccl_versions) or None,
        "host": procs["host"][0] if single else None,
        "n_records": log.comms.height + log.channels.height + log.warnings.height,
        "note": None,
    })
    frames = {
        "nccl_processes": procs.with_columns(pl.lit(None, pl.Int32).alias("global_rank"),
                                             pl.lit(nf.display).alias("source_file")),
        "nccl_comms": log.comms, "nccl_channels": log.channels, "nccl_rings": log.rings,
        "nccl_warnings": log.warnings,
    }
    for table, frame in frames.items():
        insert_run_rows(con, table, run, frame.to_arrow())


def insert_run_rows(con: duckdb.DuckDBPyConnection, table: str, run: str,
                    rows: pa.Table) -> None:
    """Append rows to `table` (one of NCCL_TABLES) under the run."""
    insert_by_name(con, table, con.from_arrow(rows), {"run": run})


def _insert_inspector(con: duckdb.DuckDBPyConnection, run: str, nf: NcclFile,
                      claimed: dict[tuple[str, int], str]) -> None:
    ops = pl.from_arrow(read_inspector(nf.path, nf.display))
    assert isinstance(ops, pl.DataFrame)
    ops = ops.with_columns(
        pl.col("nccl_op").str.to_lowercase().replace(CANONICAL_OPS).alias("collective"),
        pl.lit(None, pl.Int32).alias("rank"), pl.lit(NCCL_INSPECTOR).alias("source"),
        pl.lit(nf.display).alias("source_file"))
    hosts = ops["host"].unique().drop_nulls().to_list()
    versions = ops["format_version"].unique().drop_nulls().to_list()
    insert_source(con, {
        "run": run, "source_file": nf.display, "kind": NCCL_INSPECTOR, "format": "jsonl",
        "rank": None, "rank_source": None, "version": ", ".join(sorted(versions)) or None,
        "nccl_version": None, "host": hosts[0] if len(hosts) == 1 else None,
        "n_records": ops.height, "note": None,
    })
    insert_run_rows(con, "nccl_ops", run, ops.to_arrow())


def _insert_profiler(con: duckdb.DuckDBPyConnection, run: str, nf: NcclFile,
                     claimed: dict[tuple[str, int], str]) -> None:
    events = pl.from_arrow(read_profiler_dump(nf.path, nf.display))
    assert isinstance(events, pl.DataFrame)
    ops = events.select(
        pl.col("rank").alias("comm_rank"), pl.col("comm_hash").alias("comm_id"),
        pl.col("pid"), pl.col("cat").str.to_lowercase().alias("kind"), "nccl_op",
        pl.col("nccl_op").str.to_lowercase().replace(CANONICAL_OPS).alias("collective"),
        "seq", pl.col("peer").alias("peer_comm_rank"),
        (pl.col("count") * pl.col("datatype").replace_strict(
            DTYPE_BYTES, default=None, return_dtype=pl.Int64)).alias("msg_bytes"),
        "exec_time_us", pl.lit("plugin_cpu").alias("timing_source"),
        pl.lit(None, pl.Int32).alias("rank"), pl.lit(NCCL_PROFILER).alias("source"),
        pl.lit(nf.display).alias("source_file"))
    insert_source(con, {
        "run": run, "source_file": nf.display, "kind": NCCL_PROFILER, "format": "json",
        "rank": None, "rank_source": None, "version": None, "nccl_version": None,
        "host": None, "n_records": ops.height, "note": None,
    })
    insert_run_rows(con, "nccl_ops", run, ops.to_arrow())


CANONICAL_OPS = {"allreduce": "all_reduce", "allgather": "all_gather",
                 "reducescatter": "reduce_scatter", "alltoall": "all_to_all",
                 "broadcast": "broadcast", "reduce": "reduce", "send": "send", "recv": "recv",
                 "gather": "gather", "scatter": "scatter"}



Reader = Callable[[duckdb.DuckDBPyConnection, str, NcclFile, dict[tuple[str, int], str]], None]
READERS: dict[str, Reader] = {FLIGHT_RECORDER: _insert_fr, NCCL_LOG: _insert_log,
                              NCCL_INSPECTOR: _insert_inspector,
                              NCCL_PROFILER: _insert_profiler}
