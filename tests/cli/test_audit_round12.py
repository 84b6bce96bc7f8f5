"""Audit round 12 (issue 43), first part: a fresh, independent audit of the options and
variables of every command (empty values, NUL bytes, numbers in other scripts' digits or
out of range), Ray addresses, foreign and damaged databases, outputs that would write
outside their place, and escapes in what every command prints. Hostile inputs, option
files, the machine's limits and signals are in test_audit_round12_inputs.py, the dashboard's
uploads in test_audit_round12_dashboard.py; the fixture and the check in
tests/audit12_inputs.py. Each case pins what the README and docs/cli.md promise: the exit
code, one line starting "error: " that names the option or file, never a guessed sentence.

The first-run count and the cases that failed are in test_audit_round12_inputs.py's
docstring (all three files together).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from audit8_inputs import params
from audit12_inputs import BIDI, C1, ESC, Case12, check12
from audit12_inputs import root as root

D, T, R = "{db}", "{t}", "{root}"
PLAN = ("plan", "--params", "7e9", "--gpus", "8", "--gpu", "H100", "--seq", "4096")
NIGHT = ("nightly", T, "--db", f"{R}/n12.duckdb", "--job", "j", "--out-dir", f"{R}/n12")
ING = ("ingest", T, "--db", f"{R}/i12.duckdb", "--run", "x", "--quiet")
DASH = ("dashboard", "--db", D)
NUL = "a\x00b"


def _bad(argv: tuple[str, ...], *said: str, env: dict[str, str] | None = None) -> Case12:
    return (argv, env, 2, said)


def _ok(argv: tuple[str, ...], env: dict[str, str] | None = None) -> Case12:
    return (argv, env, 0, ())


CASES: dict[str, Case12] = {
    # ---- empty values of every option that names something
    "report --model empty": _bad(("report", "base", "--db", D, "--model", "")),
    "report --comm-kernels empty": _bad(("report", "base", "--db", D, "--comm-kernels", "")),
    "report --db empty": _bad(("report", "base", "--db", "")),
    "report --format empty": _bad(("report", "base", "--db", D, "--format", ""), "--format"),
    "diff --out empty": _bad(("diff", "base", "other", "--db", D, "--out", ""), "--out"),
    "hang --out empty": _bad(("hang", "base", "--db", D, "--out", ""), "--out"),
    "export --out empty": _bad(("export", "base", "--db", D, "--out", ""), "--out"),
    "nightly --out-dir empty": _bad((*NIGHT[:-1], ""), "--out-dir"),
    "nightly --baseline empty": _bad((*NIGHT, "--baseline", "")),
    "nightly --fail-if empty": _bad((*NIGHT, "--fail-if", ""), "--fail-if"),
    "dashboard --traces-root empty": _bad((*DASH, "--traces-root", "")),
    "dashboard --host empty": _bad((*DASH, "--host", ""), "--host"),
    "dashboard --db empty": _bad(("dashboard", "--db", "")),
    "history of an empty job": _bad(("history", "", "--db", D)),
    "summary of an empty run": _bad(("summary", "", "--db", D)),
    "whatif of an empty run": _bad(("whatif", "", "--db", D, "--rank", "0")),
    "hang of an empty run": _bad(("hang", "", "--db", D)),
    "export of an empty run": _bad(("export", "", "--db", D, "--out", f"{R}/e.json")),
    "plan --from empty": _bad(("plan", "--from", "", "--gpus", "8", "--db", D)),
    "plan --gpu empty": _bad(("plan", "--params", "7e9", "--gpus", "8", "--gpu", "",
                              "--seq", "4096"), "--gpu"),
    "ingest --ranks empty": _bad((*ING, "--ranks", ""), "--ranks"),
    "ingest --comm-kernels empty": _bad((*ING, "--comm-kernels", "")),
    "ingest --max-trace-size empty": _bad((*ING, "--max-trace-size", ""),
                                          "--max-trace-size"),
    "export --steps empty": _bad(("export", "base", "--db", D, "--out", f"{R}/e.json",
                                  "--steps", ""), "--steps"),
    "whatif --speedup empty": _bad(("whatif", "base", "--db", D, "--rank", "0", "--speedup",
                                    ""), "--speedup"),
    "whatif --op empty": _bad(("whatif", "base", "--db", D, "--op", "")),
    # ---- NUL bytes (only main([...]) can pass one): refused, exit 2
    "report --step-marker with a NUL": _bad(("report", "base", "--db", D, "--step-marker",
                                             NUL)),
    "report --model with a NUL": _bad(("report", "base", "--db", D, "--model", NUL)),
    "report --out with a NUL": _bad(("report", "base", "--db", D, "--out", NUL)),
    "summary --db with a NUL": _bad(("summary", "--db", NUL)),
    "ingest --run with a NUL": _bad((*ING[:-3], "--run", NUL)),
    "nightly --job with a NUL": _bad(("nightly", T, "--db", f"{R}/n12.duckdb", "--job", NUL)),
    "whatif --op with a NUL": _bad(("whatif", "base", "--db", D, "--op", NUL)),
    # ---- numbers: other scripts' digits, underscores, underflow, range
    "report --peak-tflops in Arabic-Indic digits": _bad(
        ("report", "base", "--db", D, "--peak-tflops", "\u0665\u0660\u0660"),
        "--peak-tflops"),
    "report --peak-tflops 1_000": _bad(("report", "base", "--db", D, "--peak-tflops",
                                        "1_000"), "--peak-tflops"),
    "report --peak-tflops 1e-400": _bad(("report", "base", "--db", D, "--peak-tflops",
                                         "1e-400"), "--peak-tflops"),
    "report --dtype int4": _bad(("report", "base", "--db", D, "--dtype", "int4"), "--dtype"),
    "plan --gpus 1048577": _bad((*PLAN[:3], "--gpus", "1048577", *PLAN[5:]), "--gpus"),
    "plan --tp 0": _bad((*PLAN, "--tp", "0"), "--tp"),
    "plan --pp -1": _bad((*PLAN, "--pp", "-1"), "--pp"),
    "plan --dp 1.5": _bad((*PLAN, "--dp", "1.5"), "--dp"),
    "plan --micro-batches 0": _bad((*PLAN, "--micro-batches", "0"), "--micro-batches"),
    "plan --zero 9": _bad((*PLAN, "--zero", "9"), "--zero"),
    "plan --heads 0": _bad((*PLAN, "--heads", "0"), "--heads"),
    "plan --layers 1e400": _bad((*PLAN, "--layers", "1e400"), "--layers"),
    "plan --micro-batch 0": _bad((*PLAN, "--micro-batch", "0"), "--micro-batch"),
    "plan --efficiency 1e-400": _bad((*PLAN, "--efficiency", "1e-400"), "--efficiency"),
    "plan --network-gbs 1_0": _bad((*PLAN, "--network-gbs", "1_0"), "--network-gbs"),
    "plan --top -1": _bad((*PLAN, "--top", "-1"), "--top"),
    "plan --gpus-per-node 0": _bad((*PLAN, "--gpus-per-node", "0"), "--gpus-per-node"),
    "plan --global-batch-tokens nan": _bad((*PLAN, "--global-batch-tokens", "nan"),
                                           "--global-batch-tokens"),
    "whatif --speedup -2": _bad(("whatif", "base", "--db", D, "--rank", "0", "--speedup",
                                 "-2"), "--speedup"),
    "whatif --rank 1e3": _bad(("whatif", "base", "--db", D, "--rank", "1e3"), "--rank"),
    "whatif with no --rank, --op or --collective": _bad(("whatif", "base", "--db", D)),
    "export --steps past 2^64": _bad(("export", "base", "--db", D, "--out", f"{R}/e.json",
                                      "--steps", "1-99999999999999999999"), "--steps"),
    "export --ranks -1": _bad(("export", "base", "--db", D, "--out", f"{R}/e.json",
                               "--ranks", "-1"), "--ranks"),
    "export --format json": _bad(("export", "base", "--db", D, "--out", f"{R}/e.json",
                                  "--format", "json"), "--format"),
    "history --last -1": _bad(("history", "j", "--db", D, "--last", "-1"), "--last"),
    "history --format html": _bad(("history", "j", "--db", D, "--format", "html"),
                                  "--format"),
    "nightly --keep -1": _bad((*NIGHT, "--keep", "-1"), "--keep"),
    "nightly --jobs 0": _bad((*NIGHT, "--jobs", "0"), "--jobs"),
    "nightly --fail-if with a NaN threshold": _bad((*NIGHT, "--fail-if", "mfu.mfu < nan"),
                                                   "--fail-if"),
    "nightly --fail-if 1_0": _bad((*NIGHT, "--fail-if", "mfu.mfu < 1_0"), "--fail-if"),
    "nightly --fail-if <>": _bad((*NIGHT, "--fail-if", "mfu.mfu <> 3"), "--fail-if"),
    "nightly --bogus": _bad((*NIGHT, "--bogus")),
    "ingest --jobs 10^30": _bad((*ING, "--jobs", "1" + "0" * 30), "--jobs"),
    "ingest --ranks 2^31": _bad((*ING, "--ranks", "2147483648"), "--ranks"),
    "ingest --ranks 0,,1": _bad((*ING, "--ranks", "0,,1"), "--ranks"),
    "ingest --max-trace-size 1e400G": _bad((*ING, "--max-trace-size", "1e400G"),
                                           "--max-trace-size"),
    "ingest --max-trace-size 10XB": _bad((*ING, "--max-trace-size", "10XB"),
                                         "--max-trace-size"),
    "ingest --step-marker with ESC": _bad((*ING, "--step-marker", f"s{ESC}"),
                                          "--step-marker"),
    "ingest --run of 1,025 characters": _bad((*ING[:-3], "--run", "r" * 1025), "--run"),
    "dashboard --port 1e3": _bad((*DASH, "--port", "1e3"), "--port"),
    "dashboard --port in Arabic-Indic digits": _bad((*DASH, "--port", "\u0668\u0660"),
                                                    "--port"),
    "dashboard --max-upload-mb 0": _bad((*DASH, "--max-upload-mb", "0"), "--max-upload-mb"),
    "dashboard --host with ESC": _bad((*DASH, "--host", f"h{ESC}"), "--host"),
    "dashboard --traces-root missing": _bad((*DASH, "--traces-root", f"{R}/nope"),
                                            f"{R}/nope"),
    # ---- STEPSCOPE_* variables
    "$STEPSCOPE_JOBS 10^30 in ingest": _bad(ING, "STEPSCOPE_JOBS",
                                            env={"STEPSCOPE_JOBS": "1" + "0" * 30}),
    "$STEPSCOPE_JOBS in Devanagari digits": _bad(ING, "STEPSCOPE_JOBS",
                                                 env={"STEPSCOPE_JOBS": "\u096a"}),
    "$STEPSCOPE_LOCK_WAIT 1_0 in export": _bad(
        ("export", "base", "--db", D, "--out", f"{R}/e.json"), "STEPSCOPE_LOCK_WAIT",
        env={"STEPSCOPE_LOCK_WAIT": "1_0"}),
    "$STEPSCOPE_LOCK_WAIT abc in export": _bad(
        ("export", "base", "--db", D, "--out", f"{R}/e.json"), "STEPSCOPE_LOCK_WAIT",
        env={"STEPSCOPE_LOCK_WAIT": "abc"}),
    "$STEPSCOPE_MEMORY_LIMIT abc in nightly": _bad(NIGHT, "STEPSCOPE_MEMORY_LIMIT",
                                                   env={"STEPSCOPE_MEMORY_LIMIT": "abc"}),
    "$STEPSCOPE_MEMORY_LIMIT in Arabic-Indic digits in report": _bad(
        ("report", "base", "--db", D), "STEPSCOPE_MEMORY_LIMIT",
        env={"STEPSCOPE_MEMORY_LIMIT": "\u0661GB"}),
    "$STEPSCOPE_MAX_TRACE_SIZE -1G in ingest": _bad(ING, "STEPSCOPE_MAX_TRACE_SIZE",
                                                    env={"STEPSCOPE_MAX_TRACE_SIZE": "-1G"}),
    "$STEPSCOPE_MAX_TRACE_SIZE abc in diff PATH PATH": _bad(
        ("diff", T, f"{R}/t2", "--db", f"{R}/d12.duckdb"), "STEPSCOPE_MAX_TRACE_SIZE",
        env={"STEPSCOPE_MAX_TRACE_SIZE": "abc"}),
    # ---- Ray addresses (refused by their shape, no cluster)
    "ray port 00000": _bad((*ING, "--executor", "ray:127.0.0.1:00000"), "--executor"),
    "ray empty label": _bad((*ING, "--executor", "ray:a..b:1"), "--executor"),
    "ray label of 64 characters": _bad((*ING, "--executor", f"ray:{'a' * 64}.b:1"),
                                       "--executor"),
    "ray port +1": _bad((*ING, "--executor", "ray:localhost:+1"), "--executor"),
    "ray host with a colon": _bad((*ING, "--executor", "ray:1.2.3.4:1:2"), "--executor"),
    "ray port with a leading space": _bad((*ING, "--executor", "ray:localhost: 1"),
                                          "--executor"),
    "ray client label of 64 characters": _bad((*ING, "--executor", f"ray://{'b' * 64}:1"),
                                              "--executor"),
    "ray client port in Arabic-Indic digits": _bad(
        (*ING, "--executor", "ray://localhost:\u0661\u0660"), "--executor"),
    # ---- databases
    "summary --db a gzip file": _bad(("summary", "--db", f"{R}/db12/gz.duckdb"), "gz.duckdb"),
    "report --db a zip file": _bad(("report", "base", "--db", f"{R}/db12/zip.duckdb"),
                                   "zip.duckdb"),
    "whatif --db a Parquet file": _bad(("whatif", "base", "--db", f"{R}/db12/pq.duckdb",
                                        "--rank", "0"), "pq.duckdb"),
    "history --db a folder": _bad(("history", "j", "--db", f"{R}/db12/folder.duckdb"),
                                  "folder.duckdb"),
    "hang --db a DuckDB of another app": _bad(("hang", "base", "--db",
                                               f"{R}/db12/foreign.duckdb"), "foreign.duckdb"),
    "summary --db a DuckDB with gpu_ops of another shape": _bad(
        ("summary", "--db", f"{R}/db12/foreign.duckdb"), "foreign.duckdb"),
    "ingest --db the first 4 KiB of a database": _bad(
        (*ING[:2], "--db", f"{R}/db12/head.duckdb", "--quiet"), "head.duckdb"),
    "ingest --db random bytes": _bad((*ING[:2], "--db", f"{R}/db12/random.duckdb",
                                      "--quiet"), "random.duckdb"),
    "report --db ending in /": _bad(("report", "base", "--db", f"{R}/db12/new.duckdb/")),
    "summary --db a name over 255 bytes": _bad(("summary", "--db", f"{R}/{'d' * 300}.duckdb")),
    "ingest --db a link loop": _bad((*ING[:2], "--db", f"{R}/db12/loop_a.duckdb", "--quiet"),
                                    "loop_a.duckdb"),
    "diff --db a dangling link": _bad(("diff", "base", "other", "--db",
                                       f"{R}/db12/dangling.duckdb"), "dangling.duckdb"),
    "nightly --db a folder": _bad(("nightly", T, "--db", f"{R}/db12/folder.duckdb", "--job",
                                   "j", "--out-dir", f"{R}/n12f"), "folder.duckdb"),
    "history --db five schema versions newer": _bad(
        ("history", "j", "--db", f"{R}/db12/newer.duckdb"), "newer.duckdb"),
    "export --db five schema versions newer": _bad(
        ("export", "base", "--db", f"{R}/db12/newer.duckdb", "--out", f"{R}/e.json"),
        "newer.duckdb"),
    "ingest --db /dev/null": _bad((*ING[:2], "--db", "/dev/null", "--quiet"), "/dev/null"),
    "whatif --db /dev/zero": _bad(("whatif", "base", "--db", "/dev/zero", "--rank", "0"),
                                  "/dev/zero"),
    # ---- outputs that would destroy something: refused before any work
    "report --out its --model file": _bad(
        ("report", "base", "--db", D, "--model", f"{R}/opt12/model.yaml", "--out",
         f"{R}/opt12/model.yaml"), "model.yaml"),
    "diff --out its --comm-kernels file": _bad(
        ("diff", "base", "other", "--db", D, "--comm-kernels", f"{R}/opt12/ck.json", "--out",
         f"{R}/opt12/ck.json"), "ck.json"),
    "plan --out its --model file": _bad(
        (*PLAN, "--model", f"{R}/opt12/model.yaml", "--out", f"{R}/opt12/model.yaml"),
        "model.yaml"),
    "export PATH --out one of its traces": _bad(
        ("export", T, "--db", f"{R}/x12.duckdb", "--out", f"{T}/rank0.json.gz"),
        "rank0.json.gz"),
    "report --out an existing bzip2 file": _bad(
        ("report", "base", "--db", D, "--out", f"{R}/out12/old.bz2"), "old.bz2"),
    "hang --out an existing zstd file": _bad(
        ("hang", "base", "--db", D, "--out", f"{R}/out12/old.zst"), "old.zst"),
    "diff --out a Kineto trace": _bad(
        ("diff", "base", "other", "--db", D, "--out", f"{R}/out12/kineto.json"),
        "kineto.json"),
    "report --out a link to the db": _bad(
        ("report", "base", "--db", D, "--out", f"{R}/out12/db_link.md"), "db_link.md"),
    "export --out a link to the db's .wal": _bad(
        ("export", "base", "--db", D, "--out", f"{R}/out12/wal_link.json"), "wal_link.json"),
    "nightly --out-dir a socket": _bad((*NIGHT[:-1], f"{R}/out12/nightly.sock"),
                                       "nightly.sock"),
    "hang --out in a missing folder": _bad(
        ("hang", "base", "--db", D, "--out", f"{R}/nodir12/h.md"), f"{R}/nodir12"),
    "report --out /dev/stderr": _ok(("report", "base", "--db", D, "--out", "/dev/stderr")),
    # ---- escapes in every printed name
    "whatif --op text matching kernels with ESC and C1": _ok(
        ("whatif", "esc", "--db", D, "--op", "gemm", "--speedup", "2", "--format", "text")),
    "whatif md of a run with ESC kernels": _ok(("whatif", "esc", "--db", D, "--rank", "0",
                                                "--format", "md")),
    "whatif --collective with a group with ESC, no match": _bad(
        ("whatif", "esc", "--db", D, "--collective", f"all_reduce:g{ESC}")),
    "report of a missing --model named with C1": _bad(
        ("report", "base", "--db", D, "--model", f"{R}/missing{C1}.yaml")),
    "diff of a missing path with ESC": _bad(("diff", f"{R}/nope{ESC}", "other", "--db", D)),
    "whatif of a missing path with a bidi override": _bad(
        ("whatif", f"{R}/nope{BIDI}", "--db", D, "--rank", "0")),
    "plan --gpu with ESC": _bad(("plan", "--params", "7e9", "--gpus", "8", "--gpu",
                                 f"H{ESC}", "--seq", "4096"), "--gpu"),
    "history md of a job with a bidi override, unknown": _bad(
        ("history", f"j{BIDI}", "--db", D, "--format", "md")),
    "summary text of kernels with C1 (esc run)": _ok(("summary", "esc", "--db", D)),
    "hang md of a run with ESC kernels": _bad(("hang", "esc", "--db", D, "--format", "md"),
                                              "run 'esc'"),
    "ingest progress of a folder named with C1": (
        ("ingest", f"{R}/k12_folder{C1}", "--db", f"{R}/c1.duckdb", "--run", "c"), None, 1,
        ("rank0.json",)),
}

# the cases that failed on the first run against the unchanged code (xfail until fixed)
FIRST_RUN_FAILED: dict[str, str] = {
}


@pytest.mark.parametrize("name", params(CASES, FIRST_RUN_FAILED))
def test_case(root: Path, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    check12(root, CASES[name], tmp_path, monkeypatch,
            file_case=name == "ingest progress of a folder named with C1")
