"""Cost of the roofline, memory and all_to_all analyses (issue 22 §2-§4) at 1,024 ranks.

Generates (once, into benchmarks/data/) two simulated 1,024-rank sets: `scale1024` (the
TP8 x PP2 job of bench_scale.py, with shapes but no memory events nor all_to_all) and
`roofline1024` (sample_traces/sim_roofline.py's MoE layer with EP 8 per node: shapes,
uneven all_to_allv, profile_memory events), ingests each once, then in a fresh
interpreter per set times each analysis on the run's context (best of --repeat) and the
whole report, and reports the rows each one reads.

    python benchmarks/bench_analyses.py [--sets scale1024,roofline1024] [--repeat 3] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
from _measure import run_measured  # noqa: E402

DATA = HERE / "data"

CHILD = """
import json, sys, time
sys.path.insert(0, {repo!r})
import duckdb
import stepscope
from stepscope.analyzers.comm.alltoall import alltoall_section
from stepscope.analyzers.context import run_context
from stepscope.analyzers.device_memory import memory_section
from stepscope.analyzers.flops.mfu import mfu_section
from stepscope.analyzers.report import build_report
from stepscope.analyzers.flops.roofline import roofline_section
name, db, out, repeat = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
timings = {{}}
with stepscope.open(db) as store:
    con = store.con
    run_is = duckdb.ColumnExpression("run") == duckdb.ConstantExpression(name)
    rows = {{t: con.table(t).filter(run_is).count("*").fetchall()[0][0]
             for t in ("gpu_ops", "cpu_ops", "memory_events", "collectives")}}
    ctx = run_context(con, name)
    mfu = mfu_section(ctx)
    for label, work in (("roofline", lambda: roofline_section(ctx, mfu)),
                        ("memory", lambda: memory_section(ctx)),
                        ("all_to_all", lambda: alltoall_section(ctx)),
                        ("whole report", lambda: build_report(con, name))):
        best = None
        for _ in range(repeat):
            t0 = time.perf_counter()
            result = work()
            dt = time.perf_counter() - t0
            best = dt if best is None else min(best, dt)
        timings[label] = best
    rf = roofline_section(ctx, mfu)
    facts = {{"roofline_kinds": len(rf.kinds), "parts": len(rf.kernel_efficiency)}}
json.dump({{"rows": rows, "seconds": timings, **facts}}, open(out, "w"))
"""


def ensure_set(name: str) -> Path:
    target = DATA / name
    if not (target / "rank1023.json.gz").exists():
        subprocess.run([sys.executable, str(REPO / "sample_traces" / "simulate_gpu.py"),
                        "--sets", name, "--no-truth", "--out", str(DATA)], check=True)
    return target


def ensure_db(name: str) -> Path:
    db = DATA / f"{name}.duckdb"
    if not db.exists():
        sys.path.insert(0, str(REPO))
        import stepscope

        stepscope.ingest_run([ensure_set(name)], db=db, run=name)
    return db


def measure(name: str, repeat: int) -> dict[str, object]:
    db = ensure_db(name)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        m = run_measured([sys.executable, "-c", CHILD.format(repo=str(REPO)), name, str(db),
                          str(out), str(repeat)])
        facts = json.loads(out.read_text())
    return {"set": name, **facts, "wall_s": m.wall_s, "peak_tree_mb": m.peak_tree_mb}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="scale1024,roofline1024")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    results = [measure(name, args.repeat) for name in args.sets.split(",") if name]
    for r in results:
        secs = r["seconds"]
        assert isinstance(secs, dict)
        print(f"{r['set']}: " + ", ".join(f"{k} {v:.2f} s" for k, v in secs.items())
              + f"; rows {r['rows']}; peak {r['peak_tree_mb']:.0f} MB")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
