"""Check that this checkout stores the same rows as a baseline checkout, table by table.

A change meant to make the ingest cheaper must not change what it stores. This ingests
each input (a trace file, a folder of ranks or a tarball: one run each) once with this
checkout and once with the baseline (`git -C /work/main archive HEAD | tar -x -C DIR`),
each version in its own interpreter, into one new database per input and version, then
compares every table of the two databases with EXCEPT ALL both ways (row multisets), and
the storage order of `cpu_ops` and `gpu_ops` (their ids in one scan: a note, not a
failure). Prints one line per input: the tables compared, their rows, and any table whose
rows differ.

    python benchmarks/check_rows_identical.py --baseline DIR --work DIR [--reuse-baseline]
        INPUT [INPUT ...]

Exits 1 when any table differs or is missing on one side.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import duckdb

REPO = Path(__file__).resolve().parent.parent
INGEST = (
    "import sys, stepscope\n"
    "for i, path in enumerate(sys.argv[2:]):\n"
    "    try:\n"
    "        stepscope.ingest_run([path], db=f'{sys.argv[1]}/{i}.duckdb', run='check',"
    " executor='inline')\n"
    "    except Exception as exc:\n"
    "        print(f'{path}: not ingested ({type(exc).__name__})', file=sys.stderr)\n"
)
# Tables whose storage order is compared too (by their id column, in one scan).
ORDERED = (("cpu_ops", "op_id"), ("gpu_ops", "gpu_op_id"))
# Columns that say when or where a run was ingested, not what its traces hold.
VOLATILE = {"ingested_at", "created_at", "ingest_seconds", "stage_dir", "db_path",
            "started_at", "finished_at", "wall_s", "cpu_s"}


def ingest_all(checkout: Path, out: Path, inputs: list[str]) -> None:
    """Ingest every input with `checkout`'s stepscope into out/<index>.duckdb."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.duckdb*"):
        old.unlink()
    env_path = f"PYTHONPATH={checkout}"
    subprocess.run(["env", env_path, sys.executable, "-P", "-c", INGEST, str(out), *inputs],
                   check=True, cwd="/")


def tables(con: duckdb.DuckDBPyConnection, db: str) -> dict[str, list[str]]:
    """Every table of attached database `db`: name -> its columns."""
    rows = con.execute("SELECT table_name, column_name FROM duckdb_columns() "
                       "WHERE database_name = ? AND NOT internal ORDER BY column_index",
                       [db]).fetchall()
    found: dict[str, list[str]] = {}
    for table, column in rows:
        found.setdefault(table, []).append(column)
    return found


def compare(base: Path, new: Path) -> tuple[int, int, list[str], list[str]]:
    """(tables compared, rows compared, the problems, notes on the storage order) of two
    databases. The order is a note, not a problem: `main` itself stores gpu_ops in
    another order from one run of a file to the next."""
    con = duckdb.connect(config={"threads": 1})  # one thread: list() in storage order
    con.execute(f"ATTACH '{base}' AS b (READ_ONLY)")
    con.execute(f"ATTACH '{new}' AS n (READ_ONLY)")
    tb, tn = tables(con, "b"), tables(con, "n")
    problems = [f"{t}: only in baseline" for t in sorted(set(tb) - set(tn))]
    problems += [f"{t}: only in this checkout" for t in sorted(set(tn) - set(tb))]
    notes: list[str] = []
    n_rows = 0
    for table in sorted(set(tb) & set(tn)):
        if tb[table] != tn[table]:
            problems.append(f"{table}: columns differ")
            continue
        cols = ", ".join(f'"{c}"' for c in tb[table] if c not in VOLATILE)
        if not cols:
            continue
        rows = con.execute(f'SELECT count(*) FROM b."{table}"').fetchone()
        count_new = con.execute(f'SELECT count(*) FROM n."{table}"').fetchone()
        extra = con.execute(f'SELECT count(*) FROM (SELECT {cols} FROM n."{table}" EXCEPT ALL '
                            f'SELECT {cols} FROM b."{table}")').fetchone()
        lost = con.execute(f'SELECT count(*) FROM (SELECT {cols} FROM b."{table}" EXCEPT ALL '
                           f'SELECT {cols} FROM n."{table}")').fetchone()
        assert rows and count_new and extra and lost
        n_rows += rows[0]
        if rows[0] != count_new[0] or extra[0] or lost[0]:
            problems.append(f"{table}: {rows[0]} rows against {count_new[0]}, "
                            f"{lost[0]} lost, {extra[0]} new")
    for table, column in ORDERED:
        if table in tb and table in tn:
            same = con.execute(f'SELECT (SELECT list({column}) FROM b."{table}") = '
                               f'(SELECT list({column}) FROM n."{table}")').fetchone()
            if not (same and same[0]):
                notes.append(f"{table} in another order")
    con.close()
    return len(set(tb) & set(tn)), n_rows, problems, notes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--reuse-baseline", action="store_true",
                        help="keep the baseline's databases of an earlier check of the same inputs")
    parser.add_argument("inputs", nargs="+")
    args = parser.parse_args()
    inputs = [str(Path(p).resolve()) for p in args.inputs]
    if not args.reuse_baseline:
        ingest_all(args.baseline, args.work / "baseline", inputs)
    ingest_all(REPO, args.work / "this", inputs)
    failed = 0
    for i, path in enumerate(inputs):
        pair = [args.work / side / f"{i}.duckdb" for side in ("baseline", "this")]
        if not all(p.exists() for p in pair):
            same = not any(p.exists() for p in pair)
            print(f"{path}: not ingested by {'either' if same else 'one side'}", flush=True)
            failed += not same
            continue
        n_tables, n_rows, problems, notes = compare(*pair)
        status = "identical" if not problems else "DIFFERS: " + "; ".join(problems)
        status += f" ({', '.join(notes)})" if notes else ""
        print(f"{path}: {n_tables} tables, {n_rows} rows: {status}", flush=True)
        failed += bool(problems)
    print(f"{len(inputs) - failed} of {len(inputs)} inputs identical")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
