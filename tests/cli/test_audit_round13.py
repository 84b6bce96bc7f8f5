"""Audit round 13 (issue 43), first part: a fresh, independent audit of options and
variables (signs, spaces, reversed ranges, boundaries), Ray addresses of shapes not tried
before, foreign, damaged, locked and other applications' databases, outputs that would
write outside their place (a run name of `..`, the database by another spelling or a hard
link), and escapes in what every command prints. Hostile inputs, option files, signals and
the machine's limits are in test_audit_round13_inputs.py, the dashboard's uploads in
test_audit_round13_dashboard.py; the fixture in tests/audit13_inputs.py, the check is
round 12's (audit12_inputs.check12: exit code, one line starting "error: " that names the
option or file, no traceback, no raw control character, nothing in the current folder,
a usage error leaves the database as it was).

The first-run count and the cases that failed are in test_audit_round13_inputs.py's
docstring (all three files together).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from audit8_inputs import params
from audit12_inputs import check12
from audit13_inputs import C1, ESC, Case13
from audit13_inputs import root as root

D, T, R = "{db}", "{t}", "{root}"
PLAN = ("plan", "--params", "7e9", "--gpus", "8", "--gpu", "H100", "--seq", "4096")
NIGHT = ("nightly", T, "--db", f"{R}/n13.duckdb", "--job", "j", "--out-dir", f"{R}/n13")
ING = ("ingest", T, "--db", f"{R}/i13.duckdb", "--run", "x", "--quiet")
DASH = ("dashboard", "--db", D)
WHATIF = ("whatif", "base", "--db", D)
EXPORT = ("export", "base", "--db", D, "--out", f"{R}/e13.json")


def _bad(argv: tuple[str, ...], *said: str, env: dict[str, str] | None = None) -> Case13:
    return (argv, env, 2, said)


def _ok(argv: tuple[str, ...], env: dict[str, str] | None = None) -> Case13:
    return (argv, env, 0, ())


def _ray(address: str) -> Case13:
    return _bad((*ING, "--executor", address), "--executor")


CASES: dict[str, Case13] = {
    # ---- numbers with signs, spaces, newlines, reversed ranges, boundaries
    "ingest --jobs +2": _bad((*ING, "--jobs", "+2"), "--jobs"),
    "ingest --jobs with a leading space": _bad((*ING, "--jobs", " 2"), "--jobs"),
    "ingest --jobs with a trailing newline": _bad((*ING, "--jobs", "2\n"), "--jobs"),
    "ingest --ranks reversed 3-1": _bad((*ING, "--ranks", "3-1"), "--ranks"),
    "ingest --ranks open range 0-": _bad((*ING, "--ranks", "0-"), "--ranks"),
    "ingest --ranks in Thai digits": _bad((*ING, "--ranks", "\u0e53"), "--ranks"),
    "ingest --ranks 1e2": _bad((*ING, "--ranks", "1e2"), "--ranks"),
    "ingest --max-trace-size 16 G with a space": _ok((*ING, "--max-trace-size", "16 G")),
    "ingest --max-trace-size -1": _bad((*ING, "--max-trace-size", "-1"),
                                       "--max-trace-size"),
    "ingest --max-trace-size with ESC": _bad((*ING, "--max-trace-size", f"1G{ESC}"),
                                             "--max-trace-size"),
    "ingest --step-marker with C1": _bad((*ING, "--step-marker", f"s{C1}"),
                                         "--step-marker"),
    "ingest --stage-dir /proc/self": _bad((*ING, "--stage-dir", "/proc/self"), "/proc/self"),
    "ingest --stage-dir /sys": _bad((*ING, "--stage-dir", "/sys"), "/sys"),
    "ingest --stage-dir missing, named with C1": _bad((*ING, "--stage-dir", f"{R}/s{C1}")),
    "ingest --executor RAY in capitals": _bad((*ING, "--executor", "RAY"), "--executor"),
    "ingest --run of only spaces": _bad((*ING[:-3], "--run", "   ", "--quiet")),
    "plan --params inf": _bad(("plan", "--params", "inf", *PLAN[3:]), "--params"),
    "plan --params with a trailing space": _bad(("plan", "--params", "7e9 ", *PLAN[3:]),
                                                "--params"),
    "plan --seq 4096.5": _bad((*PLAN[:7], "--seq", "4096.5"), "--seq"),
    "plan --gpus -8": _bad((*PLAN[:3], "--gpus", "-8", *PLAN[5:]), "--gpus"),
    "plan --efficiency just over 1": _bad((*PLAN, "--efficiency", "1.0000001"),
                                          "--efficiency"),
    "plan --peak-tflops just over 1e6": _bad((*PLAN, "--peak-tflops", "1000000.5"),
                                             "--peak-tflops"),
    "plan --dtype fp8 (not a plan dtype)": _bad((*PLAN, "--dtype", "fp8"), "--dtype"),
    "plan --gpu with a newline": _bad((*PLAN[:5], "--gpu", "H100\n", *PLAN[7:]), "--gpu"),
    "report --peak-tflops 0": _bad(("report", "base", "--db", D, "--peak-tflops", "0"),
                                   "--peak-tflops"),
    "report --peak-tflops 0x10": _bad(("report", "base", "--db", D, "--peak-tflops",
                                       "0x10"), "--peak-tflops"),
    "report --peak-tflops 1e6, the bound itself": _ok(
        ("report", "base", "--db", D, "--peak-tflops", "1e6", "--format", "json")),
    "whatif --speedup 2_0": _bad((*WHATIF, "--rank", "0", "--speedup", "2_0"), "--speedup"),
    "whatif --speedup MEDIAN in capitals": _ok((*WHATIF, "--rank", "0", "--speedup",
                                                "MEDIAN")),
    "whatif --collective :group with no name": _bad((*WHATIF, "--collective", ":pg")),
    "whatif --rank and --op together": _bad((*WHATIF, "--rank", "0", "--op", "gemm")),
    "whatif --rank 99 not in the run": _bad((*WHATIF, "--rank", "99"), "99"),
    "export --steps reversed 5-3": _bad((*EXPORT, "--steps", "5-3"), "--steps"),
    "export --ranks 0-1e2": _bad((*EXPORT, "--ranks", "0-1e2"), "--ranks"),
    "export --format PERFETTO in capitals": _bad((*EXPORT, "--format", "PERFETTO"),
                                                 "--format"),
    "history --last +3": _bad(("history", "j", "--db", D, "--last", "+3"), "--last"),
    "summary --format TEXT in capitals": _bad(("summary", "--db", D, "--format", "TEXT"),
                                              "--format"),
    "nightly --fail-if an unknown metric": _bad((*NIGHT, "--fail-if", "mfu.bogus < 1"),
                                                "mfu.bogus"),
    "nightly --fail-if with two thresholds": _bad((*NIGHT, "--fail-if", "mfu.mfu < 1 < 2"),
                                                   "--fail-if"),
    "nightly --keep 1.5": _bad((*NIGHT, "--keep", "1.5"), "--keep"),
    "nightly --baseline an unknown run": _bad((*NIGHT, "--baseline", "nosuchrun13"),
                                              "nosuchrun13"),
    "nightly --job of 1,100 characters": _bad(("nightly", T, "--db", f"{R}/n13.duckdb",
                                               "--job", "j" * 1100, "--out-dir",
                                               f"{R}/n13"), "--job"),
    "dashboard --port 2^64 + 80": _bad((*DASH, "--port", str((1 << 64) + 80)), "--port"),
    "dashboard --port with a trailing newline": _bad((*DASH, "--port", "8501\n"), "--port"),
    "dashboard --max-upload-mb 1e3": _bad((*DASH, "--max-upload-mb", "1e3"),
                                          "--max-upload-mb"),
    "dashboard --traces-root /proc/self/fd/0": _bad((*DASH, "--traces-root", "/proc/self/fd/0"),
                                                   "/proc/self/fd/0"),
    "dashboard --traces-root missing, named with ESC": _bad(
        (*DASH, "--traces-root", f"{R}/nope{ESC}")),
    "dashboard --db a Kineto trace": _bad(("dashboard", "--db", f"{R}/db13/trace.duckdb"),
                                          "trace.duckdb"),
    "dashboard --db an SQLite file": _bad(("dashboard", "--db", f"{R}/db13/sqlite.duckdb"),
                                          "sqlite.duckdb"),
    # ---- STEPSCOPE_* variables, values not tried before
    "$STEPSCOPE_JOBS 0 in nightly": _bad(NIGHT, "STEPSCOPE_JOBS", env={"STEPSCOPE_JOBS": "0"}),
    "$STEPSCOPE_JOBS -1 in ingest": _bad(ING, "STEPSCOPE_JOBS", env={"STEPSCOPE_JOBS": "-1"}),
    "$STEPSCOPE_JOBS 1.5 in report PATH": _bad(
        ("report", T, "--db", f"{R}/r13.duckdb"), "STEPSCOPE_JOBS",
        env={"STEPSCOPE_JOBS": "1.5"}),
    "$STEPSCOPE_LOCK_WAIT -1 in summary": _bad(("summary", "--db", D), "STEPSCOPE_LOCK_WAIT",
                                               env={"STEPSCOPE_LOCK_WAIT": "-1"}),
    "$STEPSCOPE_LOCK_WAIT inf in history": _bad(("history", "j", "--db", D),
                                                "STEPSCOPE_LOCK_WAIT",
                                                env={"STEPSCOPE_LOCK_WAIT": "inf"}),
    "$STEPSCOPE_LOCK_WAIT nan in whatif": _bad((*WHATIF, "--rank", "0"),
                                               "STEPSCOPE_LOCK_WAIT",
                                               env={"STEPSCOPE_LOCK_WAIT": "nan"}),
    "$STEPSCOPE_LOCK_WAIT 1e400 in hang": _bad(("hang", "base", "--db", D),
                                               "STEPSCOPE_LOCK_WAIT",
                                               env={"STEPSCOPE_LOCK_WAIT": "1e400"}),
    "$STEPSCOPE_MEMORY_LIMIT nanGB in diff": _bad(("diff", "base", "other", "--db", D),
                                                  "STEPSCOPE_MEMORY_LIMIT",
                                                  env={"STEPSCOPE_MEMORY_LIMIT": "nanGB"}),
    "$STEPSCOPE_MEMORY_LIMIT of 10^20 GB in summary": _bad(
        ("summary", "--db", D), "STEPSCOPE_MEMORY_LIMIT",
        env={"STEPSCOPE_MEMORY_LIMIT": "1" + "0" * 20 + "GB"}),
    "$STEPSCOPE_MEMORY_LIMIT with ESC in export": _bad(
        EXPORT, "STEPSCOPE_MEMORY_LIMIT", env={"STEPSCOPE_MEMORY_LIMIT": f"1GB{ESC}"}),
    "$STEPSCOPE_MAX_TRACE_SIZE 0 in ingest": _bad(ING, "STEPSCOPE_MAX_TRACE_SIZE",
                                                  env={"STEPSCOPE_MAX_TRACE_SIZE": "0"}),
    "$STEPSCOPE_MAX_TRACE_SIZE 1_000 in ingest": _bad(
        ING, "STEPSCOPE_MAX_TRACE_SIZE", env={"STEPSCOPE_MAX_TRACE_SIZE": "1_000"}),
    "$STEPSCOPE_MAX_TRACE_SIZE inf in nightly": _bad(
        NIGHT, "STEPSCOPE_MAX_TRACE_SIZE", env={"STEPSCOPE_MAX_TRACE_SIZE": "inf"}),
    # ---- Ray addresses: refused by their shape, no cluster started, no connection tried
    "ray IPv6 with an unclosed bracket": _ray("ray:[::1:1"),
    "ray IPv6 in two pairs of brackets": _ray("ray:[[::1]]:1"),
    "ray port 2^32 + 6379": _ray(f"ray:localhost:{(1 << 32) + 6379}"),
    "ray client empty port": _ray("ray://localhost:"),
    "ray empty port": _ray("ray:localhost:"),
    "ray client with an empty host": _ray("ray://:10001"),
    "ray client host with a space": _ray("ray://my host:10001"),
    "ray client host not ASCII": _ray("ray://h\u00f4st:10001"),
    "ray host label starting with a hyphen": _ray("ray:-host:6379"),
    "ray client IPv6 port 99999": _ray("ray://[::1]:99999"),
    "ray host with a path": _ray("ray:localhost:6379/x"),
    "ray client with user@": _ray("ray://user@localhost:10001"),
    "ray port 0x10": _ray("ray:localhost:0x10"),
    "ray host of 255 characters": _ray("ray:" + ".".join(["a" * 63] * 4) + ":6379"),
    "ray client host with C1": _ray(f"ray://h{C1}:10001"),
    # ---- databases: other applications', damaged, locked, odd files
    "summary --db an SQLite file": _bad(("summary", "--db", f"{R}/db13/sqlite.duckdb"),
                                        "sqlite.duckdb"),
    "report --db a schema_version of text": _bad(
        ("report", "base", "--db", f"{R}/db13/version_text.duckdb"), "version_text.duckdb"),
    "summary --db with a garbage .wal beside it": _ok(
        ("summary", "--db", f"{R}/db13/garbage_wal.duckdb")),
    "history --db a FIFO": _bad(("history", "j", "--db", f"{R}/db13/fifo.duckdb"), "fifo.duckdb"),
    "nightly --db a FIFO": _bad(("nightly", T, "--db", f"{R}/db13/fifo.duckdb", "--job", "j",
                                 "--out-dir", f"{R}/nf13"), "fifo.duckdb"),
    "summary --db /proc/self/environ": _bad(("summary", "--db", "/proc/self/environ"),
                                            "/proc/self/environ"),
    "summary --db an empty file": _bad(("summary", "--db", f"{R}/db13/empty.duckdb"),
                                       "empty.duckdb"),
    "history --db another application's DuckDB": _bad(
        ("history", "j", "--db", f"{R}/db13/other_app.duckdb"), "other_app.duckdb"),
    "summary --db missing, named with ESC": _bad(("summary", "--db", f"{R}/no{ESC}.duckdb")),
    "ingest into a stepscope db holding a table of mine": _ok(
        (*ING[:2], "--db", f"{R}/db13/with_mine.duckdb", "--run", "mine", "--quiet")),
    "nightly into another application's DuckDB": _bad(
        ("nightly", T, "--db", f"{R}/db13/other_app.duckdb", "--job", "j", "--out-dir",
         f"{R}/no13"), "other_app.duckdb"),
    # ---- outputs that would write outside their place or destroy something
    "nightly --run ./..": _bad((*NIGHT, "--run", "./.."), "--run"),
    "nightly --run .": _bad((*NIGHT, "--run", "."), "--run"),
    "nightly --run sub/../../escape": _bad((*NIGHT, "--run", "sub/../../escape"), "--run"),
    "nightly --out-dir a new folder inside the input folder": _bad((*NIGHT[:-1], f"{T}/sub"),
                                                                    f"{T}/sub"),
    "report --out the db by another spelling": _bad(
        ("report", "base", "--db", D, "--out", f"{T}/../db.duckdb"), "db.duckdb"),
    "diff --out a hard link to the db": _bad(
        ("diff", "base", "other", "--db", D, "--out", f"{R}/out13/db_hardlink.md"),
        "db_hardlink.md"),
    "diff PATH --out a new file inside the input folder": _bad(
        ("diff", T, "other", "--db", D, "--out", f"{T}/diff.md"), "diff.md"),
    "report --out an existing tar": _bad(("report", "base", "--db", D, "--out",
                                          f"{R}/out13/old.tar"), "old.tar"),
    "report --out an existing folder": _bad(("report", "base", "--db", D, "--out",
                                             f"{R}/out13/a_folder"), "a_folder"),
    "diff --out under /sys": _bad(("diff", "base", "other", "--db", D, "--out",
                                   "/sys/kernel/d13.md"), "/sys/kernel"),
    "report --format json --out /dev/full": (
        ("report", "base", "--db", D, "--format", "json", "--out", "/dev/full"), None, 1,
        ("/dev/full",)),
    "diff --format html --out /dev/full": (
        ("diff", "base", "other", "--db", D, "--format", "html", "--out", "/dev/full"), None,
        1, ("/dev/full",)),
    "report --out named with ESC in a missing folder": _bad(
        ("report", "base", "--db", D, "--out", f"{R}/nodir{ESC}/r.md")),
    # ---- escapes in every printed name
    "summary md of the esc run": _ok(("summary", "esc", "--db", D, "--format", "md")),
    "report md of kernels with ESC and C1": _ok(("report", "esc", "--db", D)),
    "diff md of the esc run against base": _ok(("diff", "base", "esc", "--db", D)),
    "whatif --collective text of a group with C1": _ok(
        ("whatif", "esc", "--db", D, "--collective", "all_reduce", "--speedup", "2", "--format",
         "text")),
    "report of an unknown run named with C1": _bad(("report", f"r{C1}", "--db", D)),
    "history of a job named with ESC and C1": _bad(("history", f"j{ESC}{C1}", "--db", D)),
    "export of an unknown run named with ESC": _bad(
        ("export", f"r{ESC}", "--db", D, "--out", f"{R}/e13.json")),
    "plan --from an unknown run named with C1": _bad(("plan", "--from", f"r{C1}", "--gpus",
                                                      "8", "--db", D)),
    "ingest of a good folder named with C1": _ok(
        ("ingest", f"{R}/k13_good_c1{C1}", "--db", f"{R}/c13.duckdb", "--run", "c")),
    "ingest of kernels and a group named with C1": _ok(
        ("ingest", f"{R}/k13_kernels_c1", "--db", f"{R}/c13b.duckdb", "--run", "k")),
}

# the cases that failed on the first run against the final code (xfail until fixed)
FIRST_RUN_FAILED: dict[str, str] = {
}


@pytest.mark.parametrize("name", params(CASES, FIRST_RUN_FAILED))
def test_case(root: Path, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    check12(root, CASES[name], tmp_path, monkeypatch)


@pytest.fixture(scope="module")
def holder(root: Path) -> Iterator[Path]:
    """Another process that holds root/db13/locked.duckdb open for writing."""
    db = root / "db13" / "locked.duckdb"
    proc = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys; c = duckdb.connect(sys.argv[1]); "
         "print('open', flush=True); sys.stdin.read()", str(db)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "open\n"
        yield db
    finally:
        proc.kill()
        proc.wait()


LOCKED = f"{R}/db13/locked.duckdb"
NOWAIT = {"STEPSCOPE_LOCK_WAIT": "0"}
LOCK_CASES: dict[str, Case13] = {
    "export of a db another process writes, no wait": _bad(
        ("export", "base", "--db", LOCKED, "--out", f"{R}/el13.json"), "locked.duckdb",
        env=NOWAIT),
    "ingest into a db another process writes, no wait": _bad(
        (*ING[:2], "--db", LOCKED, "--run", "l", "--quiet"), "locked.duckdb", env=NOWAIT),
    "diff of a db another process writes, no wait": _bad(
        ("diff", "base", "other", "--db", LOCKED), "locked.duckdb", env=NOWAIT),
    "nightly into a db another process writes, no wait": _bad(
        ("nightly", T, "--db", LOCKED, "--job", "l", "--out-dir", f"{R}/nl13"),
        "locked.duckdb", env=NOWAIT),
}


@pytest.mark.parametrize("name", params(LOCK_CASES, FIRST_RUN_FAILED))
def test_locked(root: Path, holder: Path, name: str, tmp_path: Path,
                monkeypatch: pytest.MonkeyPatch) -> None:
    """A database another process holds: exit 2 at once with $STEPSCOPE_LOCK_WAIT=0, one
    line naming the database (the README: "a database another process still holds")."""
    check12(root, LOCK_CASES[name], tmp_path, monkeypatch)
    assert not (root / "nl13").exists()
