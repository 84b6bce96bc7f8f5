"""CPU seconds of each SQL statement of an ingest (benchmarks/README.md, "Faster than parsing").

Ingests SET into a new DB in this one process (`executor='inline'`: the per-file parse and
the writer both run here) and charges the process's CPU time (user + sys, every DuckDB
thread included: `time.process_time`) of each statement to its label: the per-file
statements (ingest/sql/read/, and each `out_*` table's Parquet write) and the writer's
(appends, attribution, commit). CPU time, not wall time: on a shared machine it moves
far less with the load. Prints the statements costing most, summed over the files, and
the whole run's CPU.

    python benchmarks/bench_statements.py SET DB [--top 30] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import duckdb

import stepscope
from stepscope.ingest import read_pool, reader, sql_files

COSTS: dict[str, float] = defaultdict(float)
CALLS: dict[str, int] = defaultdict(int)
_HEAD = re.compile(r"^\s*(?:--[^\n]*\n\s*)*", re.S)


def label(stmt: str) -> str:
    """The statement's first line that is not a comment, shortened."""
    first = _HEAD.sub("", stmt).splitlines()[0] if stmt.strip() else ""
    return re.sub(r"\s+", " ", first)[:90]


def charge(name: str, start: float) -> None:
    COSTS[name] += time.process_time() - start
    CALLS[name] += 1


class TimedRelation:
    """A relation whose Parquet write is charged to `write <table>`."""

    def __init__(self, rel: duckdb.DuckDBPyRelation, name: str) -> None:
        self._rel, self._name = rel, name

    def write_parquet(self, *args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            return self._rel.write_parquet(*args, **kwargs)
        finally:
            charge(f"read: write_parquet {self._name}", start)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._rel, attr)


class TimedConnection:
    """A per-file read connection whose statements are charged to their labels."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._con = con

    def execute(self, query: str, params: Any = None) -> Any:
        stmts = sql_files.split_statements(query)
        if len(stmts) > 1 and not params:  # a whole script (collectives.sql): each statement
            for stmt in stmts[:-1]:
                self.execute(stmt)
            return self.execute(stmts[-1])
        start = time.process_time()
        try:
            return self._con.execute(query, params) if params else self._con.execute(query)
        finally:
            charge("read: " + label(query), start)

    def table(self, name: str) -> Any:
        return TimedRelation(self._con.table(name), name)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._con, attr)


def instrument() -> None:
    """Time the per-file connection's statements and every script's statements."""
    connect = read_pool.connection

    def timed_connection(threads: int) -> Any:
        return TimedConnection(connect(threads))

    reader.connection = timed_connection  # type: ignore[assignment]
    execute = sql_files.execute_statements

    def timed_statements(con: Any, stmts: tuple[str, ...], params: Any) -> None:
        if isinstance(con, TimedConnection):
            execute(con, stmts, params)
            return
        for stmt in stmts:
            start = time.process_time()
            execute(con, (stmt,), params)
            charge("write: " + label(stmt), start)

    sql_files.execute_statements = timed_statements  # type: ignore[assignment]
    build_cpu_depth = getattr(reader, "build_cpu_depth", None)
    if build_cpu_depth is None:  # a checkout that nests in SQL (before 2026-12-06)
        return

    def timed_nesting(con: Any) -> None:
        """The CPU ops' nesting, its two statements and its NumPy work as one label."""
        start = time.process_time()
        try:
            build_cpu_depth(con._con if isinstance(con, TimedConnection) else con)
        finally:
            charge("read: cpu_depth (ingest/nesting.py: fetch, NumPy, store)", start)

    reader.build_cpu_depth = timed_nesting  # type: ignore[assignment]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("set", type=Path)
    parser.add_argument("db", type=Path)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    for path in (args.db, Path(f"{args.db}.wal")):
        path.unlink(missing_ok=True)
    instrument()
    start = time.process_time()
    stepscope.ingest_run([str(args.set)], db=str(args.db), run="bench", executor="inline")
    total = time.process_time() - start
    rows = sorted(COSTS.items(), key=lambda kv: -kv[1])
    timed = sum(COSTS.values())
    print(f"whole ingest CPU {total:.2f} s; timed statements {timed:.2f} s")
    for name, cost in rows[:args.top]:
        print(f"{cost:7.3f} s  {CALLS[name]:4d}x  {name}")
    if args.json is not None:
        args.json.write_text(json.dumps({"cpu_s": total, "statements": {
            name: {"cpu_s": cost, "calls": CALLS[name]} for name, cost in rows}}, indent=1))


if __name__ == "__main__":
    main()
