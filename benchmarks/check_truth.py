"""Check a large simulated run in a database against the simulator's ground truth.

The scale benchmarks (bench_scale.py, the issue-44 sets of sample_traces/simulate_gpu.py)
ingest jobs of up to 5,000 ranks; "it ingested" is not enough: this compares every rank's
and step's breakdown in `step_attribution` with the `ground_truth.json` the simulator wrote
for the same set (`simulate_gpu.py --sets NAME` writes it beside the traces), in DuckDB:

    python benchmarks/check_truth.py DB RUN GROUND_TRUTH_JSON [--tolerance 0.01]

Prints the rows compared, the rows missing on either side, the step windows that differ,
and per category the largest error as a share of its step; exits 1 when any row is
missing, a window differs, or an error passes the tolerance (the test suite's: 1% of the
step, tests/analyzers/breakdown/test_attribution.py).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import duckdb

CATEGORIES = ("compute", "recompute", "exposed_comm", "straggler_wait", "bubble", "memory",
              "idle")


def truth_rows(path: Path) -> list[tuple[int, int, int, int, list[int]]]:
    """(rank, step, window start, window end, the categories' ns) of the ground truth."""
    truth = json.loads(path.read_text())
    return [(int(rank), t["step"], t["window_start_ns"], t["window_end_ns"],
             [t[f"{c}_ns"] for c in CATEGORIES])
            for rank, steps in truth["per_rank"].items() for t in steps]


def compare(con: duckdb.DuckDBPyConnection, run: str, truth: Path) -> dict[str, object]:
    rows = truth_rows(truth)
    con.execute("CREATE TEMP TABLE truth (rank INTEGER, step INTEGER, step_ns BIGINT, "
                + ", ".join(f"{c}_ns BIGINT" for c in CATEGORIES) + ")")
    con.executemany(f"INSERT INTO truth VALUES ({', '.join(['?'] * (3 + len(CATEGORIES)))})",
                    [(r, s, end - start, *cats) for r, s, start, end, cats in rows])
    errors = ", ".join(f"max(abs(g.{c}_ns - t.{c}_ns) / t.step_ns) AS {c}" for c in CATEGORIES)
    (compared, windows, *worst), = con.execute(f"""
        SELECT count(*), count(*) FILTER (WHERE g.step_ns <> t.step_ns), {errors}
        FROM truth t JOIN step_attribution g
          ON g.run = ? AND g.rank = t.rank AND g.step = t.step""", [run]).fetchall()
    (only_truth,), = con.execute("""
        SELECT count(*) FROM truth t WHERE NOT EXISTS (SELECT 1 FROM step_attribution g
          WHERE g.run = ? AND g.rank = t.rank AND g.step = t.step)""", [run]).fetchall()
    (only_db,), = con.execute("""
        SELECT count(*) FROM step_attribution g WHERE g.run = ? AND NOT EXISTS (
          SELECT 1 FROM truth t WHERE g.rank = t.rank AND g.step = t.step)""",
                              [run]).fetchall()
    return {"compared": compared, "windows_differ": windows, "only_in_truth": only_truth,
            "only_in_db": only_db,
            "worst_share_of_step": dict(zip(CATEGORIES, worst, strict=True))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db", type=Path)
    parser.add_argument("run")
    parser.add_argument("truth", type=Path)
    parser.add_argument("--tolerance", type=float, default=0.01)
    args = parser.parse_args(argv)
    con = duckdb.connect(str(args.db), read_only=True)
    try:
        got = compare(con, args.run, args.truth)
    finally:
        con.close()
    print(json.dumps(got, indent=2))
    worst = got["worst_share_of_step"]
    assert isinstance(worst, dict)
    ok = (got["only_in_truth"] == got["only_in_db"] == got["windows_differ"] == 0
          and all(v is not None and v <= args.tolerance for v in worst.values()))
    print("exact within tolerance" if ok else "DIFFERS from the ground truth")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
