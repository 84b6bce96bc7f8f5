"""Critical path and what-if cost at 64, 256 and 1,024 ranks (docs/critical_path.md).

Uses the simulated TP8 x PP2 sets of bench_scale.py (generated once into
benchmarks/data/scale<N>), ingests each once into benchmarks/data/scale<N>-cp.duckdb,
then, in a fresh interpreter per size, times each stage on a read-only connection: the
graph in DuckDB (critical_path/graph.sql) and its read into arrays, the path of every
complete step, the what-if graph of the profiled steps, one evaluation as observed (it
must reproduce every window exactly), one what-if (the middle rank at the median speed),
and the report's whole section (paths plus its own what-ifs). Memory is the peak RSS of
the whole process tree (benchmarks/_measure.py).

    python benchmarks/bench_critical_path.py [--sizes 64,256,1024] [--json OUT]
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
from bench_scale import DATA, ensure_set  # noqa: E402

CHILD = """
import json, sys, time
sys.path.insert(0, {repo!r})
import stepscope
from stepscope.analyzers.context import run_context
from stepscope.analyzers.critical_path.whatif import WhatIf
from stepscope.analyzers.critical_path.analysis import Analysis, _mean_step, critical_path_section
db, run, out = sys.argv[1], sys.argv[2], sys.argv[3]
facts = {{}}
with stepscope.open(db) as store:
    t = time.perf_counter()
    a = Analysis(store.con, run)
    facts["graph_s"] = time.perf_counter() - t
    facts["nodes"], facts["edges"] = a.g.n, a.g.n_edges
    t = time.perf_counter()
    paths = [a.path(k) for k in a.steps]
    facts["paths_s"] = time.perf_counter() - t
    facts["path_vs_window"] = max(abs(p.length_ns / (p.we - p.ws) - 1) for p in paths)
    facts["ranks_on_path"] = sorted({{int(r) for p in paths for r in p.rank}})
    t = time.perf_counter()
    sg = a.graph()
    facts["whatif_graph_s"] = time.perf_counter() - t
    facts["items"], facts["item_edges"] = int(sg.c.size), int(sg.esrc.size)
    t = time.perf_counter()
    observed = a.windows(None)
    facts["evaluate_s"] = time.perf_counter() - t
    sel = {{(int(k), int(r)): int(e - s) for k, r, s, e in
           zip(a.g.w_step, a.g.w_rank, a.g.w_ws, a.g.w_we)}}
    facts["exact"] = all(sel[(k, r)] == ns for k, w in observed.items() for r, ns in w.items())
    ctx = run_context(store.con, run)
    rank = int(a.g.rank.max()) // 2
    t = time.perf_counter()
    w = a.whatif(WhatIf(ranks=(rank,)), ctx.attribution.step_time_ms)
    facts["whatif_s"] = time.perf_counter() - t
    facts["whatif"] = w.sentence
    t = time.perf_counter()
    section = critical_path_section(ctx, (), ctx.topology)
    facts["section_s"] = time.perf_counter() - t
    facts["section_whatifs"] = len(section.whatifs)
    facts["step_ms"] = ctx.attribution.step_time_ms
json.dump(facts, open(out, "w"))
"""


def ensure_db(n: int) -> Path:
    """The set ingested once (its own database next to the traces)."""
    db = DATA / f"scale{n}-cp.duckdb"
    if not db.exists():
        subprocess.run([sys.executable, "-m", "stepscope", "ingest", str(ensure_set(n)),
                        "--db", str(db), "--run", f"scale{n}", "--quiet"], check=True,
                       cwd=REPO)
    return db


def measure(n: int) -> dict[str, object]:
    db = ensure_db(n)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        m = run_measured([sys.executable, "-c", CHILD.format(repo=str(REPO)), str(db),
                          f"scale{n}", str(out)])
        facts = json.loads(out.read_text())
    return {"ranks": n, **facts, "wall_s": m.wall_s, "peak_tree_mb": m.peak_tree_mb}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64,256,1024")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    print(f"{'ranks':>6s} {'nodes':>8s} {'edges':>8s} {'graph s':>8s} {'paths s':>8s} "
          f"{'wi graph s':>10s} {'eval s':>7s} {'what-if s':>9s} {'section s':>9s} "
          f"{'peak MB':>8s} exact")
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        row = measure(n)
        rows.append(row)
        print(f"{n:6d} {row['nodes']:8d} {row['edges']:8d} {row['graph_s']:8.2f} "
              f"{row['paths_s']:8.3f} {row['whatif_graph_s']:10.2f} {row['evaluate_s']:7.2f} "
              f"{row['whatif_s']:9.2f} {row['section_s']:9.2f} {row['peak_tree_mb']:8.0f} "
              f"{row['exact']}", flush=True)
        print(f"       {row['whatif']}; path vs window {row['path_vs_window']:.2e}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
