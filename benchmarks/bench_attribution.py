"""Per-statement profile of the step-time attribution on an ingested database.

Re-runs `stepscope.analyzers.breakdown.attribution.materialize` on a copy of DB inside a
transaction that is rolled back, REPEAT times, and prints per SQL statement the median
wall time and the median CPU time of this process (time.process_time: DuckDB's threads
included, so it does not move with the load of a shared machine the way wall time
does). Also prints a fingerprint of the tables it writes, so two versions of the SQL can
be checked to give the same rows.

    python benchmarks/bench_attribution.py DB RUN [--repeat 5] [--top 25]
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import stepscope.ingest.sql_files as queries  # noqa: E402
from stepscope.analyzers.breakdown.attribution import materialize  # noqa: E402
from stepscope.ingest.db import connect_write  # noqa: E402

TABLES = ("recompute_ops", "collective_waits", "step_attribution", "collective_exposure",
          "idle_gaps", "host_activity")
_CREATE = re.compile(r"(CREATE OR REPLACE TEMP TABLE|INSERT INTO|UPDATE|DELETE FROM)\s+(\w+)")


def _label(stmt: str, seen: dict[str, int]) -> str:
    body = re.sub(r"--[^\n]*", "", stmt).strip()
    m = _CREATE.search(body)
    label = f"{m.group(1).split()[0].lower()} {m.group(2)}" if m else body[:40]
    seen[label] += 1
    return label if seen[label] == 1 else f"{label} #{seen[label]}"


def _fingerprint(con, run: str) -> str:
    digest = hashlib.sha256()
    for table in TABLES:
        rows = con.execute(f"SELECT * FROM {table} WHERE run = ? ORDER BY ALL", [run]).fetchall()
        digest.update(f"{table}:{len(rows)}:{rows!r}".encode())
    return digest.hexdigest()[:16]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db", type=Path)
    parser.add_argument("run")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    wall: dict[str, list[float]] = defaultdict(list)
    cpu: dict[str, list[float]] = defaultdict(list)
    totals: list[tuple[float, float]] = []
    original = queries.execute_statements

    def timed(con, stmts, params):
        for stmt in stmts:
            label = _label(stmt, seen)
            w, c = time.perf_counter(), time.process_time()
            original(con, (stmt,), params)
            wall[label].append(time.perf_counter() - w)
            cpu[label].append(time.process_time() - c)

    queries.execute_statements = timed
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "copy.duckdb"
        shutil.copy(args.db, copy)
        con = connect_write(copy)
        prints = set()
        for _ in range(args.repeat):
            seen: dict[str, int] = defaultdict(int)
            con.execute("BEGIN")
            w, c = time.perf_counter(), time.process_time()
            materialize(con, args.run)
            totals.append((time.perf_counter() - w, time.process_time() - c))
            prints.add(_fingerprint(con, args.run))
            con.execute("ROLLBACK")
        con.close()
    rows = sorted(((statistics.median(cpu[k]), statistics.median(wall[k]), k) for k in wall),
                  reverse=True)
    for c, w, k in rows[: args.top]:
        print(f"{c * 1000:8.1f} ms cpu {w * 1000:8.1f} ms wall  {k}")
    print(f"statements: {len(rows)}; sum of medians: cpu {sum(r[0] for r in rows):.3f} s, "
          f"wall {sum(r[1] for r in rows):.3f} s")
    print(f"materialize median: wall {statistics.median(t[0] for t in totals):.3f} s, "
          f"cpu {statistics.median(t[1] for t in totals):.3f} s")
    print("fingerprint", " ".join(sorted(prints)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
