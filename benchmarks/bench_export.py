"""Export benchmark (issue 46): `stepscope export` of the simulated TP8 x PP2 job of
bench_scale.py at 64 and 1,024 ranks: the events and bytes it states, its wall time and
peak memory (benchmarks/_measure.py), for all steps and for `--steps` of one step.

The sets and their databases are made once (bench_scale.ensure_set, then `stepscope
ingest` into --db-dir/scale<N>.duckdb, reused when there); only the export is measured.

    python benchmarks/bench_export.py [--sizes 64,1024] [--db-dir DIR] [--json OUT]
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
from bench_scale import ensure_set  # noqa: E402

STEPSCOPE = [sys.executable, "-m", "stepscope"]


def database(n: int, db_dir: Path) -> Path:
    db = db_dir / f"scale{n}.duckdb"
    if not db.exists():
        subprocess.run([*STEPSCOPE, "ingest", str(ensure_set(f"scale{n}", n)), "--db", str(db),
                        "--run", f"scale{n}"], check=True, stdout=subprocess.DEVNULL)
    return db


def measure(n: int, db: Path, steps: str | None) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "trace.json"
        err = Path(tmp) / "stderr"
        cmd = [*STEPSCOPE, "export", f"scale{n}", "--db", str(db), "--out", str(out)]
        cmd += ["--steps", steps] if steps else []
        wrapper = [sys.executable, "-c",
                   "import subprocess, sys; sys.exit(subprocess.run(sys.argv[2:], "
                   "stderr=open(sys.argv[1], 'w')).returncode)", str(err), *cmd]
        m = run_measured(wrapper)
        stated = [line for line in err.read_text().splitlines() if line.startswith("export:")]
        return {"ranks": n, "steps": steps or "all", "stated": stated[0] if stated else "",
                "file_mb": out.stat().st_size / 1e6, "wall_s": m.wall_s,
                "peak_tree_mb": m.peak_tree_mb, "largest_process_mb": m.peak_single_mb}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64,1024")
    parser.add_argument("--db-dir", type=Path, default=HERE / "data")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    args.db_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        db = database(n, args.db_dir)
        for steps in (None, "2"):
            rows.append(measure(n, db, steps))
            print(json.dumps(rows[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
