"""Launches in the NCCL logs: the processes that the communicators they share join into
one job. One launch writes every process into its world communicator; two launches
pasted into one file (a job started twice, two jobs' logs in one folder) share none, and
their different pids claim the same global ranks. Each launch is then listed on its own,
so that "ranks 0, 0, 1, 1" on one host reads as two runs, not as one broken one."""

from __future__ import annotations

import duckdb
import polars as pl

from stepscope.analyzers._sql import sql
from stepscope.analyzers.results import NcclLaunch

PROCESS = ["host", "pid"]


def process_launches(con: duckdb.DuckDBPyConnection, run: str) -> pl.DataFrame:
    """(host, pid, launch) of every process that joined a communicator, launch 1, 2, ...
    in the order the logs show them (first file, then first `Init COMPLETE` line); an
    empty frame when the logs hold one launch or none."""
    joined = con.sql(sql("nccl/launch_comms.sql"), params={"run": run}).pl()
    if joined.is_empty():
        return pl.DataFrame(schema={"host": pl.Utf8, "pid": pl.Int64, "launch": pl.Int64})
    labels = _components(joined.select(PROCESS + ["comm_id"]))
    if labels["label"].n_unique() < 2:
        return pl.DataFrame(schema={"host": pl.Utf8, "pid": pl.Int64, "launch": pl.Int64})
    first = (joined.join(labels, on=PROCESS)
             .group_by("label").agg(pl.col("source_file").min(), pl.col("init_line").min())
             .sort("source_file", "init_line", "label")
             .with_row_index("launch", offset=1)
             .select("label", pl.col("launch").cast(pl.Int64)))
    return labels.join(first, on="label").select(PROCESS + ["launch"]).sort(PROCESS)


def _components(joined: pl.DataFrame) -> pl.DataFrame:
    """(host, pid, label): the connected components of processes and communicators, by
    min-label propagation (each round a process takes the least label of its
    communicators and a communicator that of its processes; rounds: the graph's depth,
    one or two for a job whose processes share a world communicator)."""
    comms = joined.select("comm_id").unique().with_columns(pl.col("comm_id").alias("label"))
    while True:
        procs = (joined.join(comms, on="comm_id")
                 .group_by(PROCESS).agg(pl.col("label").min()))
        again = (joined.join(procs, on=PROCESS)
                 .group_by("comm_id").agg(pl.col("label").min()))
        if again.sort("comm_id").equals(comms.sort("comm_id")):
            return procs
        comms = again


def nccl_launches(con: duckdb.DuckDBPyConnection, run: str,
                  launches: pl.DataFrame) -> list[NcclLaunch]:
    """Each launch of `launches` (process_launches) with its largest communicator, its
    number of communicators, and its global ranks and pids per host."""
    joined = (con.sql(sql("nccl/launch_comms.sql"), params={"run": run}).pl()
              .join(launches, on=PROCESS))
    ranks = (con.sql(sql("nccl/launch_ranks.sql"), params={"run": run}).pl()
             .join(launches, on=PROCESS))
    out = []
    for launch in sorted(launches["launch"].unique().to_list()):
        comms = joined.filter(pl.col("launch") == launch)
        largest = comms.sort(["nranks", "comm_id"], descending=[True, False]).row(0, named=True)
        mine = ranks.filter(pl.col("launch") == launch)
        procs = launches.filter(pl.col("launch") == launch)
        out.append(NcclLaunch(
            launch=int(launch), comm_id=str(largest["comm_id"]), nranks=int(largest["nranks"]),
            communicators=comms["comm_id"].n_unique(),
            hosts=_per_host(mine, "global_rank"), pids=_per_host(procs, "pid")))
    return out


def _per_host(frame: pl.DataFrame, column: str) -> dict[str, list[int]]:
    """host -> the sorted distinct values of `column` on it."""
    grouped = frame.group_by("host").agg(pl.col(column).unique().sort()).sort("host")
    return {str(h): [int(v) for v in vals] for h, vals in grouped.iter_rows()}
