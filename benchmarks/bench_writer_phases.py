"""The ingest writer's memory by phase (benchmarks/README.md, "The writer's growth in ranks").

Ingests SET into a new DB at the defaults, as `stepscope.ingest_run` does, in this one
process (the writer; the parse runs on the usual workers), sampling its RSS
(`/proc/self/status`) every 20 ms and keeping the peak of each phase: the appends, the
attribution (with --subphases, each of its SQL scripts and the clock alignment, and
each SQL file of the clock alignment as `clocks:NAME`), the commit. DuckDB's
`duckdb_memory()` and memory limit are recorded when the appends end and when the
attribution ends (just before the COMMIT). Prints one JSON object.

    python benchmarks/bench_writer_phases.py SET DB [--subphases] [--no-distributed-info]

--no-distributed-info stores `ranks.distributed_info` as NULL: the hypothesis test that
found the commit's allocation (issue 44). Run it under `/usr/bin/time -v` for the
process's maximum RSS as the other tables of the README give it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import threading
import time
from pathlib import Path
from typing import Any

import duckdb

from stepscope.analyzers.breakdown import attribution
from stepscope.ingest import ingest, writer
from stepscope.ingest.comm_kernels import comm_patterns

SAMPLE_S = 0.02


class Phases:
    """The current phase and the peak RSS seen in each, from a sampling thread."""

    def __init__(self) -> None:
        self.phase = "start"
        self.peaks: dict[str, int] = {}
        self.marks: dict[str, Any] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> Phases:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        time.sleep(2 * SAMPLE_S)
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.is_set():
            rss, phase = rss_bytes(), self.phase
            self.peaks[phase] = max(self.peaks.get(phase, 0), rss)
            time.sleep(SAMPLE_S)

    def mark(self, con: duckdb.DuckDBPyConnection, name: str) -> None:
        """DuckDB's accounting (MB in memory, MB spilled per tag) and limit now."""
        rows = con.execute("SELECT tag, memory_usage_bytes, temporary_storage_bytes "
                           "FROM duckdb_memory() WHERE memory_usage_bytes > 0 "
                           "OR temporary_storage_bytes > 0").fetchall()
        (limit,), = con.execute("SELECT current_setting('memory_limit')").fetchall()
        self.marks[name] = {"rss_mb": round(rss_bytes() / 1e6, 1), "limit": limit,
                            "duckdb_mb": {t: [round(m / 1e6, 1), round(s / 1e6, 1)]
                                          for t, m, s in rows}}


def rss_bytes() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def instrument(phases: Phases, subphases: bool, no_distributed_info: bool) -> None:
    """Mark the phases where the writer enters them (the module functions it calls)."""
    finish_run = writer._finish_run

    def finish(con: duckdb.DuckDBPyConnection, *args: Any, **kwargs: Any) -> None:
        phases.mark(con, "appends_end")
        phases.phase = "finish"
        finish_run(con, *args, **kwargs)

    writer._finish_run = finish  # type: ignore[assignment]
    if subphases:
        run_script = attribution.run_script

        def script(con: duckdb.DuckDBPyConnection, name: str, params: Any) -> None:
            phases.phase = "attribution:" + name.rsplit("/", 1)[-1]
            run_script(con, name, params)

        attribution.run_script = script  # type: ignore[assignment]
        align = attribution.clocks.materialize

        def clocks(con: duckdb.DuckDBPyConnection, run: str, *args: Any) -> None:
            phases.phase = "attribution:clocks"
            align(con, run, *args)

        attribution.clocks.materialize = clocks  # type: ignore[assignment]
        clock_script, clock_sql = attribution.clocks.run_script, attribution.clocks.sql

        def clock_step(con: duckdb.DuckDBPyConnection, name: str, params: Any) -> None:
            phases.phase = "clocks:" + name.rsplit("/", 1)[-1]
            clock_script(con, name, params)

        def clock_query(name: str) -> str:  # read just before the query runs
            phases.phase = "clocks:" + name.rsplit("/", 1)[-1]
            return clock_sql(name)

        attribution.clocks.run_script = clock_step  # type: ignore[assignment]
        attribution.clocks.sql = clock_query  # type: ignore[assignment]
    if no_distributed_info:
        rank_row = writer._rank_row

        def row(*args: Any, **kwargs: Any) -> dict[str, Any]:
            return {**rank_row(*args, **kwargs), "distributed_info": None}

        writer._rank_row = row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("set", type=Path)
    parser.add_argument("db", type=Path)
    parser.add_argument("--subphases", action="store_true")
    parser.add_argument("--no-distributed-info", action="store_true")
    args = parser.parse_args()
    for path in (args.db, Path(f"{args.db}.wal")):
        path.unlink(missing_ok=True)
    start = time.monotonic()
    with Phases() as phases:
        instrument(phases, args.subphases, args.no_distributed_info)

        def after_load(con: duckdb.DuckDBPyConnection, run: str) -> None:
            phases.phase = "attribution"
            attribution.materialize(con, run)
            phases.mark(con, "attribution_end")
            phases.phase = "commit"

        phases.phase = "appends"
        result = ingest([args.set], db=args.db, after_load=after_load,
                        comm_kernels=comm_patterns(None))
        phases.phase = "after"
    print(json.dumps({
        "ranks": len(result.ranks), "warnings": result.warnings,
        "seconds": round(time.monotonic() - start, 1),
        "peak_mb": {k: round(v / 1e6, 1) for k, v in phases.peaks.items()},
        "ru_maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "db_mb": round(os.path.getsize(args.db) / 1e6, 1), **phases.marks}, indent=1))


if __name__ == "__main__":
    main()
