"""Scale benchmark: ingest + report time and peak memory at 64, 256 and 1,024 ranks.

Generates (once, into benchmarks/data/scale<N>) the same simulated TP8 x PP2 job at each
size (sample_traces/simulate_gpu.py, sets scale64/256/1024: ~300 GPU ops and ~800 CPU
ops per step per rank, 3 steps, 17 KB gzipped per rank), then, in a fresh interpreter
per measurement, ingests it (parse, Parquet hand-off, append, attribution, commit) and
builds the report. Memory is the peak of the summed RSS of the whole process tree
(benchmarks/_measure.py), workers included.

    python benchmarks/bench_scale.py [--sizes 64,256,1024] [--executors process,inline,ray]
                                     [--shape scale|tp8pp4|tp8pp8]
                                     [--baseline DIR] [--split] [--db-dir DIR] [--json OUT]

`--split` runs the ingest and the report as two commands (two fresh interpreters on the
same database, as a user runs `stepscope ingest` then `stepscope report`) and gives each
one's peaks besides the larger of the two.
`--baseline DIR` measures every size a second time with another stepscope source
checkout (the previous release), right after this one's, for side-by-side figures.
`--db-dir DIR` (with `--split`) keeps each size's database in DIR (scale<N>.duckdb) and
ingests only where none is there yet: the reports of both versions are then measured on
the same database, one after the other, without the minutes of a 1,024-rank ingest each
time (the ingest columns show 0 for a database reused).

The `ray` executor starts a local Ray instance (`ray.init(num_cpus=CPUs)`) inside the
measured process; its start-up (~10 s) is reported separately and its daemons' memory is
counted in the tree.
"""

from __future__ import annotations

import argparse
import json
import os
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
n, executor, db, out, stage, name = sys.argv[1:7]
t0 = time.perf_counter()
ray_start = 0.0
if executor == "ray":
    import os
    os.environ.setdefault("RAY_raylet_start_wait_time_s", "180")
    import ray
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    ray_start = time.perf_counter() - t0
import stepscope
t1 = time.perf_counter()
facts = {{"ray_start_s": ray_start}}
if stage in ("both", "ingest"):
    result = stepscope.ingest_run([{data!r} + "/" + name], db=db, run=name,
                                  executor=executor)
    facts.update(ranks=len(result.ranks), status=result.status,
                 room_retries=sum("ran out of memory" in w for w in result.warnings))
t2 = time.perf_counter()
if stage in ("both", "report"):
    facts["step_ms"] = stepscope.report(name, db=db).report.step_time_ms
t3 = time.perf_counter()
json.dump({{**facts, "ingest_s": t2 - t1, "report_s": t3 - t2}}, open(out, "w"))
"""


SHAPES = ("scale", "tp8pp4", "tp8pp8")  # sample_traces/simulate_gpu.py BENCH_SETS


def set_name(shape: str, n: int) -> str:
    """The simulated set of `shape` at `n` ranks: scale<n> (TP8 x PP2), or issue 44's
    tp8pp4_<n> (4 microbatches) and tp8pp8_<n> (8 microbatches)."""
    return f"scale{n}" if shape == "scale" else f"{shape}_{n}"


def ensure_set(name: str, n: int) -> Path:
    target = DATA / name
    if not (target / f"rank{n - 1}.json.gz").exists():
        subprocess.run([sys.executable, str(REPO / "sample_traces" / "simulate_gpu.py"),
                        "--sets", name, "--no-truth", "--out", str(DATA)], check=True)
    return target


def _child(n: int, executor: str, repo: Path, db: Path, stage: str,
           name: str) -> dict[str, object]:
    """One fresh interpreter doing `stage` (ingest, report or both) of the set of `n`
    ranks into `db`: its facts, wall time and peak memory."""
    out = db.with_suffix(f".{stage}.json")
    code = CHILD.format(repo=str(repo), data=str(DATA))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(repo), os.environ.get("PYTHONPATH")) if p)}
    m = run_measured([sys.executable, "-c", code, str(n), executor, str(db), str(out), stage,
                      name], env=env)
    facts = json.loads(out.read_text())
    return {**facts, "wall_s": m.wall_s, "peak_tree_mb": m.peak_tree_mb,
            "largest_process_mb": m.peak_single_mb}


REUSED = {"ingest_s": 0.0, "wall_s": 0.0, "peak_tree_mb": 0.0, "largest_process_mb": 0.0}


def measure(n: int, executor: str, repo: Path = REPO, split: bool = False,
            db_dir: Path | None = None, shape: str = "scale") -> dict[str, object]:
    """Ingest and report of `n` ranks in one process, or (`split`) as two commands, the
    way a user runs them: then the peaks are the larger of the two, and each is kept.
    With `db_dir` (split only) the database there is reused when it exists."""
    with tempfile.TemporaryDirectory() as tmp:
        name = set_name(shape, n)
        db = (db_dir or Path(tmp)) / (f"{name}.duckdb" if db_dir else "s.duckdb")
        if not split:
            return {"ranks_asked": n, "executor": executor,
                    **_child(n, executor, repo, db, "both", name)}
        if db_dir is not None and db.exists():
            ingest: dict[str, object] = dict(REUSED)
        else:
            ingest = _child(n, executor, repo, db, "ingest", name)
        report = _child(n, executor, repo, db, "report", name)
    return {"ranks_asked": n, "executor": executor, **ingest, "report_s": report["report_s"],
            "step_ms": report["step_ms"],
            "ingest_tree_mb": ingest["peak_tree_mb"],
            "ingest_largest_mb": ingest["largest_process_mb"],
            "report_tree_mb": report["peak_tree_mb"],
            "report_largest_mb": report["largest_process_mb"],
            "peak_tree_mb": max(ingest["peak_tree_mb"], report["peak_tree_mb"]),
            "largest_process_mb": max(ingest["largest_process_mb"],
                                      report["largest_process_mb"])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64,256,1024")
    parser.add_argument("--executors", default="process")
    parser.add_argument("--shape", choices=SHAPES, default="scale",
                        help="scale: TP8 x PP2; tp8pp4 / tp8pp8: issue 44's two shapes")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another stepscope source checkout, measured after this one")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--split", action="store_true",
                        help="ingest and report as two commands (two processes), each measured")
    parser.add_argument("--db-dir", type=Path, default=None,
                        help="with --split: keep the databases here, reuse one that exists")
    args = parser.parse_args(argv)
    if args.db_dir is not None and not args.split:
        parser.error("--db-dir needs --split")
    versions = [("this", REPO), *([("baseline", args.baseline)] if args.baseline else [])]
    sizes = [int(s) for s in args.sizes.split(",")]
    one, five, _ = os.getloadavg()
    print(f"{os.cpu_count()} CPUs, load average {one:.1f} / {five:.1f}")
    print(f"{'version':>8s} {'ranks':>6s} {'executor':>8s} {'ingest s':>9s} {'s/rank':>7s} "
          f"{'report s':>9s} "
          f"{'tree peak MB':>13s} {'largest proc MB':>16s} {'gz MB':>6s}")
    rows = []
    for n in sizes:
        folder = ensure_set(set_name(args.shape, n), n)
        gz_mb = sum(f.stat().st_size for f in folder.glob("*.json.gz")) / 1e6
        for executor in args.executors.split(","):
            for version, repo in versions:
                row = measure(n, executor, repo, args.split, args.db_dir, args.shape)
                row["gz_mb"] = gz_mb
                row["version"] = version
                rows.append(row)
                print(f"{version:>8s} {n:6d} {executor:>8s} {row['ingest_s']:9.1f} "
                      f"{float(row['ingest_s']) / n:7.3f} {row['report_s']:9.2f} "
                      f"{row['peak_tree_mb']:13.0f} {row['largest_process_mb']:16.0f} "
                      f"{gz_mb:6.1f}", flush=True)
                if args.split:
                    print(f"{'':>8s} {'':>6s} {'':>8s} ingest alone: tree "
                          f"{row['ingest_tree_mb']:.0f} MB, largest "
                          f"{row['ingest_largest_mb']:.0f} MB; report alone: tree "
                          f"{row['report_tree_mb']:.0f} MB, largest "
                          f"{row['report_largest_mb']:.0f} MB", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
