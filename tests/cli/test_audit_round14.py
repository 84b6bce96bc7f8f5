"""Audit round 14 (issue 43), first part: a fresh, independent audit of options and
variables (signs, trailing blanks, boundaries, spellings earlier rounds left out), Ray
addresses of shapes not tried before, databases that are encrypted, damaged, foreign by a
link, locked by a writer while a reader asks, or `:memory:`, outputs that would reach the
database or an input by another spelling (`/proc/self/root`, `//`, `/./`, a folder link,
a chain of links, a hard link to an option file) or write through a link out of
`--out-dir`, and what every command prints of names holding the bidi embeddings and marks
or Unicode's line separators. Hostile inputs, option files, signals and the machine's
limits are in test_audit_round14_inputs.py; the fixture in tests/audit14_inputs.py, the
check round 12's with the wider set of controls (audit14_inputs.check14).

Expected outcomes come from README's exit-code table and docs/cli.md; a case the docs do
not settle says "(docs silent)" and expects what a demanding user would. The first-run
count and the cases that failed are in test_audit_round14_inputs.py's docstring (both
files together).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from audit8_inputs import params
from audit14_inputs import ESC, MIX, Case14, check14
from audit14_inputs import root as root

D, T, R = "{db}", "{t}", "{root}"
PLAN = ("plan", "--params", "7e9", "--gpus", "8", "--gpu", "H100", "--seq", "4096")
NIGHT = ("nightly", T, "--db", f"{R}/n14.duckdb", "--job", "j", "--out-dir", f"{R}/n14")
ING = ("ingest", T, "--db", f"{R}/i14.duckdb", "--run", "x", "--quiet")
DASH = ("dashboard", "--db", D)
WHATIF = ("whatif", "base", "--db", D)
EXPORT = ("export", "base", "--db", D, "--out", f"{R}/e14.json")
REPORT = ("report", "base", "--db", D)
LS, PS = "\u2028", "\u2029"


def _bad(argv: tuple[str, ...], *said: str, env: dict[str, str] | None = None) -> Case14:
    return (argv, env, 2, said)


def _ok(argv: tuple[str, ...], env: dict[str, str] | None = None) -> Case14:
    return (argv, env, 0, ())


def _ray(address: str) -> Case14:
    return _bad((*ING, "--executor", address), "--executor")


def _plan(option: str, value: str) -> Case14:
    """plan with one option set (replaced where PLAN has it), refused naming it."""
    argv = list(PLAN)
    if option in argv:
        argv[argv.index(option) + 1] = value
    else:
        argv += [option, value]
    return _bad(tuple(argv), option)


CASES: dict[str, Case14] = {
    # ---- numbers: signs, blanks, bases and boundaries not tried before
    "ingest --jobs -0": _bad((*ING, "--jobs", "-0"), "--jobs"),
    "ingest --jobs with a trailing tab": _bad((*ING, "--jobs", "2\t"), "--jobs"),
    "ingest --jobs in full-width digits": _bad((*ING, "--jobs", "\uff12"), "--jobs"),
    "ingest --jobs 01, a leading zero (docs silent)": _ok((*ING, "--jobs", "01")),
    "ingest --ranks with a trailing comma": _bad((*ING, "--ranks", "0,1,"), "--ranks"),
    "ingest --ranks +1": _bad((*ING, "--ranks", "+1"), "--ranks"),
    "ingest --ranks 0x1": _bad((*ING, "--ranks", "0x1"), "--ranks"),
    "ingest --ranks with a leading comma": _bad((*ING, "--ranks", ",0"), "--ranks"),
    "ingest --ranks with a semicolon": _bad((*ING, "--ranks", "0;1"), "--ranks"),
    "ingest --max-trace-size a unit alone": _bad((*ING, "--max-trace-size", "G"),
                                                 "--max-trace-size"),
    "ingest --max-trace-size 1GG": _bad((*ING, "--max-trace-size", "1GG"),
                                        "--max-trace-size"),
    "ingest --max-trace-size +1G": _bad((*ING, "--max-trace-size", "+1G"),
                                        "--max-trace-size"),
    "ingest --max-trace-size with a trailing newline": _bad(
        (*ING, "--max-trace-size", "1G\n"), "--max-trace-size"),
    "report --peak-tflops with a trailing space": _bad((*REPORT, "--peak-tflops", "1e3 "),
                                                       "--peak-tflops"),
    "report --peak-tflops +100": _bad((*REPORT, "--peak-tflops", "+100"), "--peak-tflops"),
    "report --peak-tflops Infinity": _bad((*REPORT, "--peak-tflops", "Infinity"),
                                          "--peak-tflops"),
    "report --peak-tflops -nan": _bad((*REPORT, "--peak-tflops", "-nan"), "--peak-tflops"),
    "report --peak-tflops .5": _ok((*REPORT, "--peak-tflops", ".5", "--format", "json")),
    "report --peak-tflops 1e-3": _ok((*REPORT, "--peak-tflops", "1e-3", "--format", "json")),
    "diff --peak-tflops just over 1e6": _bad(("diff", "base", "other", "--db", D,
                                              "--peak-tflops", "1000000.001"), "--peak-tflops"),
    "plan --efficiency 1e0, the top of its range": _ok((*PLAN, "--efficiency", "1e0")),
    "plan --efficiency .0": _plan("--efficiency", ".0"),
    "plan --gpus with a trailing space": _plan("--gpus", "8 "),
    "plan --seq +4096": _plan("--seq", "+4096"),
    "plan --top 1_0": _plan("--top", "1_0"),
    "plan --top 1": _ok((*PLAN, "--top", "1")),
    "plan --micro-batches -1": _plan("--micro-batches", "-1"),
    "plan --zero 1.0": _plan("--zero", "1.0"),
    "plan --heads 1.5": _plan("--heads", "1.5"),
    "plan --hidden with a trailing space": _plan("--hidden", "4096 "),
    "plan --gpus-per-node with a trailing newline": _plan("--gpus-per-node", "8\n"),
    "plan --dp +2": _plan("--dp", "+2"),
    "plan --tp in full-width digits": _plan("--tp", "\uff12"),
    "plan --network-gbs Infinity": _plan("--network-gbs", "Infinity"),
    "plan --global-batch-tokens +1024": _plan("--global-batch-tokens", "+1024"),
    "plan --layers 0x20": _plan("--layers", "0x20"),
    "plan --micro-batch -0": _plan("--micro-batch", "-0"),
    "whatif --speedup with a trailing space": _bad((*WHATIF, "--rank", "0", "--speedup",
                                                    "2 "), "--speedup"),
    "whatif --speedup +2": _bad((*WHATIF, "--rank", "0", "--speedup", "+2"), "--speedup"),
    "whatif --rank 0,,1": _bad((*WHATIF, "--rank", "0,,1"), "--rank"),
    "whatif --rank +0": _bad((*WHATIF, "--rank", "+0"), "--rank"),
    "whatif --rank with a trailing comma": _bad((*WHATIF, "--rank", "0,"), "--rank"),
    "export --steps +1": _bad((*EXPORT, "--steps", "+1"), "--steps"),
    "export --steps with a semicolon": _bad((*EXPORT, "--steps", "1;2"), "--steps"),
    "export --ranks 0..1": _bad((*EXPORT, "--ranks", "0..1"), "--ranks"),
    "history --last with a trailing space": _bad(("history", "j", "--db", D, "--last",
                                                  "1 "), "--last"),
    "history --last 0x3": _bad(("history", "j", "--db", D, "--last", "0x3"), "--last"),
    "nightly --keep +1": _bad((*NIGHT, "--keep", "+1"), "--keep"),
    "nightly --keep with a trailing space": _bad((*NIGHT, "--keep", "2 "), "--keep"),
    "nightly --jobs -0": _bad((*NIGHT, "--jobs", "-0"), "--jobs"),
    "nightly --fail-if a hex threshold": _bad((*NIGHT, "--fail-if", "mfu.mfu < 0x1"),
                                              "--fail-if"),
    "nightly --fail-if ==": _bad((*NIGHT, "--fail-if", "mfu.mfu == 0.5"), "--fail-if"),
    "nightly --fail-if a Unicode \u2264": _bad((*NIGHT, "--fail-if", "mfu.mfu \u2264 0.5"),
                                              "--fail-if"),
    "nightly --fail-if a metric in capitals": _bad((*NIGHT, "--fail-if", "MFU.MFU < 0.5"),
                                                   "MFU.MFU"),
    "nightly --fail-if share.bogus": _bad((*NIGHT, "--fail-if", "share.bogus > 0.1"),
                                          "share.bogus"),
    "nightly --fail-if a threshold with a trailing letter": _bad(
        (*NIGHT, "--fail-if", "mfu.mfu < 0.5x"), "--fail-if"),
    "nightly --peak-tflops +inf": _bad((*NIGHT, "--peak-tflops", "+inf"), "--peak-tflops"),
    "dashboard --port with a trailing space": _bad((*DASH, "--port", "8501 "), "--port"),
    "dashboard --port +8501": _bad((*DASH, "--port", "+8501"), "--port"),
    "dashboard --max-upload-mb 1048577": _bad((*DASH, "--max-upload-mb", "1048577"),
                                              "--max-upload-mb"),
    "dashboard --max-upload-mb +5": _bad((*DASH, "--max-upload-mb", "+5"),
                                         "--max-upload-mb"),
    "dashboard --host with a trailing newline": _bad((*DASH, "--host", "127.0.0.1\n"),
                                                     "127.0.0.1"),
    "dashboard --host with an empty label": _bad((*DASH, "--host", "a..b"), "a..b"),
    "dashboard --host with an underscore": _bad((*DASH, "--host", "my_host"), "my_host"),
    "dashboard --host a label of 64 characters": _bad((*DASH, "--host", "a" * 64 + ".lan"),
                                                      "a" * 64),
    "dashboard --host with a line separator": _bad((*DASH, "--host", f"h{LS}x")),
    "dashboard --traces-root a socket": _bad((*DASH, "--traces-root", f"{R}/sock14"),
                                             "sock14"),
    # ---- STEPSCOPE_* variables: forms earlier rounds left out
    "$STEPSCOPE_MAX_UPLOAD_MB 0 (dashboard.md: checked like the option)": _bad(
        DASH, "STEPSCOPE_MAX_UPLOAD_MB", env={"STEPSCOPE_MAX_UPLOAD_MB": "0"}),
    "$STEPSCOPE_MAX_UPLOAD_MB 1048577": _bad(DASH, "STEPSCOPE_MAX_UPLOAD_MB",
                                             env={"STEPSCOPE_MAX_UPLOAD_MB": "1048577"}),
    "$STEPSCOPE_MAX_UPLOAD_MB 1_0": _bad(DASH, "STEPSCOPE_MAX_UPLOAD_MB",
                                         env={"STEPSCOPE_MAX_UPLOAD_MB": "1_0"}),
    "$STEPSCOPE_DB an SQLite file in dashboard": _bad(
        ("dashboard",), "real.sqlite", env={"STEPSCOPE_DB": f"{R}/db14/real.sqlite"}),
    "$STEPSCOPE_DB a Kineto trace in dashboard": _bad(
        ("dashboard",), "rank0.json.gz", env={"STEPSCOPE_DB": f"{T}/rank0.json.gz"}),
    "$STEPSCOPE_DB an encrypted DuckDB in dashboard": _bad(
        ("dashboard",), "encrypted.duckdb", env={"STEPSCOPE_DB": f"{R}/db14/encrypted.duckdb"}),
    "$STEPSCOPE_JOBS +4 in ingest": _bad(ING, "STEPSCOPE_JOBS", env={"STEPSCOPE_JOBS": "+4"}),
    "$STEPSCOPE_JOBS with a leading space in ingest": _bad(ING, "STEPSCOPE_JOBS",
                                                           env={"STEPSCOPE_JOBS": " 4"}),
    "$STEPSCOPE_JOBS 1025 in nightly": _bad(NIGHT, "STEPSCOPE_JOBS",
                                            env={"STEPSCOPE_JOBS": "1025"}),
    "$STEPSCOPE_JOBS abc in export PATH": _bad(
        ("export", T, "--db", f"{R}/x14.duckdb", "--out", f"{R}/x14.json"), "STEPSCOPE_JOBS",
        env={"STEPSCOPE_JOBS": "abc"}),
    "$STEPSCOPE_JOBS abc in whatif PATH": _bad(
        ("whatif", T, "--db", f"{R}/x14.duckdb", "--rank", "0"), "STEPSCOPE_JOBS",
        env={"STEPSCOPE_JOBS": "abc"}),
    "$STEPSCOPE_JOBS empty is unset (docs silent)": _ok(ING, env={"STEPSCOPE_JOBS": ""}),
    "$STEPSCOPE_LOCK_WAIT 86400, the top of its range": _ok(
        ("summary", "--db", D), env={"STEPSCOPE_LOCK_WAIT": "86400"}),
    "$STEPSCOPE_LOCK_WAIT 86401": _bad(("summary", "--db", D), "STEPSCOPE_LOCK_WAIT",
                                       env={"STEPSCOPE_LOCK_WAIT": "86401"}),
    "$STEPSCOPE_LOCK_WAIT 0.5": _ok(("summary", "--db", D), env={"STEPSCOPE_LOCK_WAIT": "0.5"}),
    "$STEPSCOPE_LOCK_WAIT +1 in nightly": _bad(NIGHT, "STEPSCOPE_LOCK_WAIT",
                                               env={"STEPSCOPE_LOCK_WAIT": "+1"}),
    "$STEPSCOPE_LOCK_WAIT with a leading space in ingest": _bad(
        ING, "STEPSCOPE_LOCK_WAIT", env={"STEPSCOPE_LOCK_WAIT": " 1"}),
    "$STEPSCOPE_MEMORY_LIMIT +1GB in report": _bad(REPORT, "STEPSCOPE_MEMORY_LIMIT",
                                                   env={"STEPSCOPE_MEMORY_LIMIT": "+1GB"}),
    "$STEPSCOPE_MEMORY_LIMIT a unit alone in summary": _bad(
        ("summary", "--db", D), "STEPSCOPE_MEMORY_LIMIT", env={"STEPSCOPE_MEMORY_LIMIT": "GB"}),
    "$STEPSCOPE_MEMORY_LIMIT with a trailing newline in history": _bad(
        ("history", "j", "--db", D), "STEPSCOPE_MEMORY_LIMIT",
        env={"STEPSCOPE_MEMORY_LIMIT": "1GB\n"}),
    "$STEPSCOPE_MEMORY_LIMIT 2GB is a size": _ok(("summary", "--db", D),
                                                 env={"STEPSCOPE_MEMORY_LIMIT": "2GB"}),
    "$STEPSCOPE_MAX_TRACE_SIZE +1G in ingest": _bad(
        ING, "STEPSCOPE_MAX_TRACE_SIZE", env={"STEPSCOPE_MAX_TRACE_SIZE": "+1G"}),
    "$STEPSCOPE_MAX_TRACE_SIZE with a trailing space in ingest": _bad(
        ING, "STEPSCOPE_MAX_TRACE_SIZE", env={"STEPSCOPE_MAX_TRACE_SIZE": "1G "}),
    "$STEPSCOPE_MAX_TRACE_SIZE 0 in report PATH": _bad(
        ("report", T, "--db", f"{R}/x14.duckdb"), "STEPSCOPE_MAX_TRACE_SIZE",
        env={"STEPSCOPE_MAX_TRACE_SIZE": "0"}),
    "$STEPSCOPE_MAX_TRACE_SIZE -1 in export PATH": _bad(
        ("export", T, "--db", f"{R}/x14.duckdb", "--out", f"{R}/x14.json"),
        "STEPSCOPE_MAX_TRACE_SIZE", env={"STEPSCOPE_MAX_TRACE_SIZE": "-1"}),
    # ---- Ray addresses and executors: refused by their shape, no cluster, no connection
    "ray client with a query": _ray("ray://localhost:10001?x=1"),
    "ray client with a fragment": _ray("ray://localhost:10001#f"),
    "ray with a fragment": _ray("ray:localhost:6379#x"),
    "ray client IPv6 without a port": _ray("ray://[::1]"),
    "ray client IPv6 with an empty port": _ray("ray://[::1]:"),
    "ray client port 1_0001": _ray("ray://localhost:1_0001"),
    "ray port with a trailing newline": _ray("ray:localhost:6379\n"),
    "ray host after a no-break space": _ray("ray:\u00a0localhost:6379"),
    "ray client IPv4 in brackets": _ray("ray://[127.0.0.1]:10001"),
    "ray IPv6 with a colon after the port": _ray("ray:[::1]:6379:1"),
    "ray host label starting with a hyphen after a dot": _ray("ray:a.-b:6379"),
    "ray host with a semicolon": _ray("ray:localhost;id:6379"),
    "ray host with a line separator": _ray(f"ray:local{LS}host:6379"),
    "ray client host with an RLE": _ray("ray://local\u202bhost:10001"),
    "--executor Ray: with a capital": _ray("Ray:localhost:6379"),
    "--executor ray with a trailing space": _ray("ray "),
    "--executor inline with a trailing space": _ray("inline "),
    "--executor process: with nothing after": _ray("process:"),
    "--executor auto:4": _ray("auto:4"),
    # ---- databases: encrypted, damaged, foreign by a link, special names
    "summary --db :memory:": _bad(("summary", "--db", ":memory:"), ":memory:"),
    "nightly --db :memory:": _bad(("nightly", T, "--db", ":memory:", "--job", "j",
                                   "--out-dir", f"{R}/nm14"), ":memory:"),
    "report PATH --db :memory:": _bad(("report", T, "--db", ":memory:"), ":memory:"),
    "dashboard --db :memory:": _bad(("dashboard", "--db", ":memory:"), ":memory:"),
    "dashboard --db ending with /": _bad(("dashboard", "--db", f"{R}/db14/new.duckdb/"),
                                         "new.duckdb"),
    "dashboard --db a name over 255 bytes": _bad(("dashboard", "--db", f"{R}/{'d' * 300}")),
    "summary --db a link to an SQLite file": _bad(
        ("summary", "--db", f"{R}/db14/sqlite_link.duckdb"), "sqlite_link.duckdb"),
    "summary --db an encrypted DuckDB": _bad(("summary", "--db", f"{R}/db14/encrypted.duckdb"),
                                             "encrypted.duckdb"),
    "ingest into an encrypted DuckDB": _bad(
        (*ING[:2], "--db", f"{R}/db14/encrypted.duckdb", "--run", "e", "--quiet"),
        "encrypted.duckdb"),
    "summary --db a stepscope db whose runs table was dropped": _bad(
        ("summary", "--db", f"{R}/db14/no_runs.duckdb"), "no_runs.duckdb"),
    "report --db a stepscope db whose runs table was dropped": _bad(
        ("report", "base", "--db", f"{R}/db14/no_runs.duckdb"), "no_runs.duckdb"),
    "ingest --db through a loop of links": _bad(
        (*ING[:2], "--db", f"{R}/loop/x.duckdb", "--run", "l", "--quiet"), "loop"),
    "summary --db /dev/stdin": _bad(("summary", "--db", "/dev/stdin"), "/dev/stdin"),
    "history --db ending with /.": _bad(("history", "j", "--db", f"{D}/."), "db.duckdb"),
    # ---- outputs: the database or an input by another spelling, links out of place
    "report --out the db through /proc/self/root": _bad(
        (*REPORT, "--out", f"/proc/self/root{D}"), "db.duckdb"),
    "report --out the db through a folder link": _bad(
        (*REPORT, "--out", f"{R}/dblink/db.duckdb"), "db.duckdb"),
    "report --out the db with a doubled slash": _bad(
        (*REPORT, "--out", f"{R}//db.duckdb"), "db.duckdb"),
    "diff --out the db with /./": _bad(
        ("diff", "base", "other", "--db", D, "--out", f"{R}/./db.duckdb"), "db.duckdb"),
    "export --out a link to a link to the db": _bad(
        ("export", "base", "--db", D, "--out", f"{R}/out14/link1"), "link1"),
    "diff --out a hard link to its --model file": _bad(
        ("diff", "base", "other", "--db", D, "--model", f"{R}/opt14/model.json", "--out",
         f"{R}/out14/model_hard.md"), "model_hard.md"),
    "report PATH through a folder link --out a new file in that folder": _bad(
        ("report", f"{R}/out14/input_link", "--db", f"{R}/o14.duckdb", "--out",
         f"{T}/new14.md"), "new14.md"),
    "report --format html --out a zip named .html": _bad(
        (*REPORT, "--format", "html", "--out", f"{R}/out14/zip_named.html"), "zip_named.html"),
    "report --out JSON naming traceEvents in its first 64 KiB, broken": _bad(
        (*REPORT, "--format", "json", "--out", f"{R}/out14/early_trace_broken.json"),
        "early_trace_broken.json"),
    "report --out JSON naming traceEvents only past 64 KiB is replaced": _ok(
        (*REPORT, "--format", "json", "--out", f"{R}/out14/late_trace.json")),
    "report --out in a folder link to /proc": _bad(
        (*REPORT, "--out", f"{R}/out14/proc_link/r14.md"), "proc_link"),
    "plan --out .": _bad((*PLAN, "--out", "."), "--out"),
    "report --out a folder spelled x/..": _bad((*REPORT, "--out", f"{R}/out14/victim/.."),
                                               "victim"),
    "report --out - is stdout": _ok((*REPORT, "--out", "-")),
    "plan --format json --out - is stdout": _ok((*PLAN, "--format", "json", "--out", "-")),
    "nightly --out-dir a link to the input folder": _bad(
        ("nightly", T, "--db", f"{R}/nl14.duckdb", "--job", "j", "--out-dir",
         f"{R}/out14/input_link"), "input_link"),
    # corrected after the first run: --out-dir is the reports' folder itself (docs/nightly.md
    # step 7: `./stepscope-nightly/<run>/` is only its default), so no folder of the run's
    # name is made: a link of that name in --out-dir is never written through, and a run
    # name too long for a folder writes its reports into --out-dir (exit 0)
    "nightly --run named like a link in --out-dir: nothing written through it": _ok(
        ("nightly", T, "--db", f"{R}/nk14.duckdb", "--job", "j", "--run", "r14", "--out-dir",
         f"{R}/out14/n_links")),
    "nightly --run of 1,024 characters writes into --out-dir": _ok(
        ("nightly", T, "--db", f"{R}/nr14.duckdb", "--job", "j", "--run", "r" * 1024,
         "--out-dir", f"{R}/nr14ok")),
    # ---- names with bidi embeddings, marks and Unicode line separators
    "summary text of the mixed run": _ok(("summary", "esc14", "--db", D)),
    "summary md of the mixed run": _ok(("summary", "esc14", "--db", D, "--format", "md")),
    "summary json of the mixed run": _ok(("summary", "esc14", "--db", D, "--format", "json")),
    "report md of the mixed run": _ok(("report", "esc14", "--db", D)),
    "report json of the mixed run": _ok(("report", "esc14", "--db", D, "--format", "json")),
    "report html of the mixed run to stdout": _ok(("report", "esc14", "--db", D, "--format",
                                                   "html")),
    "diff md of the mixed run against base": _ok(("diff", "base", "esc14", "--db", D)),
    "diff json of the mixed run against base": _ok(("diff", "base", "esc14", "--db", D,
                                                    "--format", "json")),
    "whatif --op text of the mixed kernels": _ok(
        ("whatif", "esc14", "--db", D, "--op", "gemm", "--speedup", "2")),
    "whatif --collective md of the mixed group": _ok(
        ("whatif", "esc14", "--db", D, "--collective", "all_reduce:pg", "--speedup", "2",
         "--format", "md")),
    "export of the mixed run to stdout": _ok(("export", "esc14", "--db", D, "--out", "-")),
    "report of an unknown run with a line separator": _bad(("report", f"r{LS}x", "--db", D)),
    "summary of an unknown run with a paragraph separator": _bad(
        ("summary", f"r{PS}x", "--db", D)),
    "history of a job with an RLM": _bad(("history", "j\u200f", "--db", D)),
    "ingest of a missing path with an LRE": _bad(("ingest", f"{R}/no\u202ape", "--db",
                                                  f"{R}/m14.duckdb")),
    "ingest --run with an RLE": _bad((*ING[:-3], "--run", "a\u202bb", "--quiet"), "--run"),
    "ingest --run with a line separator": _bad((*ING[:-3], "--run", f"a{LS}b", "--quiet"),
                                               "--run"),
    "unknown option with a line separator": _bad(("summary", "--db", D, f"--bogus{LS}x")),
    "unknown command with an RLE": _bad(("bogus\u202b",)),
    "plan --gpu unknown with an ALM": _plan("--gpu", "H\u061c100"),
    "whatif --op with a paragraph separator, no match": _bad(
        (*WHATIF, "--op", f"x{PS}y", "--speedup", "2")),
    "nightly --fail-if a metric with a line separator": _bad(
        (*NIGHT, "--fail-if", f"mfu.mfu{LS} < 1"), "--fail-if"),
    "dashboard --traces-root missing, with a paragraph separator": _bad(
        (*DASH, "--traces-root", f"{R}/no{PS}pe")),
    "report --model missing, with an LRM": _bad((*REPORT, "--model", f"{R}/no\u200f.yaml")),
    "export --out in a missing folder with MIX": _bad(
        ("export", "base", "--db", D, "--out", f"{R}/no{MIX}/e.json")),
    "nightly --baseline unknown, with ESC and MIX": _bad(
        (*NIGHT, "--baseline", f"r{ESC}{MIX}")),
}

# the cases that failed on the first run against the merged code (xfail until fixed)
FIRST_RUN_FAILED: dict[str, str] = {
}


@pytest.fixture(scope="module")
def sock(root: Path) -> Iterator[Path]:
    """A listening Unix socket at root/sock14."""
    import socket

    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(root / "sock14"))
    s.listen(1)
    try:
        yield root / "sock14"
    finally:
        s.close()


@pytest.mark.parametrize("name", params(CASES, FIRST_RUN_FAILED))
def test_case(root: Path, sock: Path, name: str, tmp_path: Path,
              monkeypatch: pytest.MonkeyPatch) -> None:
    places = ("nm14", "nl14", "nr14", "x14.json", "t/new14.md")
    before = {n for n in places if (root / n).exists()}  # another case's doing
    check14(root, CASES[name], tmp_path, monkeypatch)
    assert not list((root / "out14" / "victim").iterdir())
    assert not any((root / n).exists() for n in places if n not in before)


@pytest.fixture(scope="module")
def holder(root: Path) -> Iterator[int]:
    """Another process that holds root/db14/locked14.duckdb open for writing: its pid."""
    db = root / "db14" / "locked14.duckdb"
    proc = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys; c = duckdb.connect(sys.argv[1]); "
         "print('open', flush=True); sys.stdin.read()", str(db)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "open\n"
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


LOCKED = f"{R}/db14/locked14.duckdb"
NOWAIT = {"STEPSCOPE_LOCK_WAIT": "0"}
LOCK_CASES: dict[str, Case14] = {
    "whatif of a db another process writes": _bad(
        ("whatif", "base", "--db", LOCKED, "--rank", "0"), "locked14.duckdb", env=NOWAIT),
    "hang of a db another process writes": _bad(
        ("hang", "base", "--db", LOCKED), "locked14.duckdb", env=NOWAIT),
    "plan --from a db another process writes": _bad(
        ("plan", "--from", "base", "--db", LOCKED, "--gpus", "16"), "locked14.duckdb",
        env=NOWAIT),
    "summary json of a db another process writes": _bad(
        ("summary", "--db", LOCKED, "--format", "json"), "locked14.duckdb", env=NOWAIT),
    "ingest into a db another process writes, a 1 s wait": _bad(
        (*ING[:2], "--db", LOCKED, "--run", "l", "--quiet"), "locked14.duckdb",
        env={"STEPSCOPE_LOCK_WAIT": "1"}),
    "report --out of a db another process writes writes no file": _bad(
        ("report", "base", "--db", LOCKED, "--out", f"{R}/lk14.md"), "locked14.duckdb",
        env=NOWAIT),
}


@pytest.mark.parametrize("name", params(LOCK_CASES, FIRST_RUN_FAILED))
def test_locked(root: Path, holder: int, name: str, tmp_path: Path,
                monkeypatch: pytest.MonkeyPatch) -> None:
    """A database another process holds for writing: exit 2 (README: "a database another
    process still holds"), one line naming the database and its holder's process id
    (docs/cli.md: "whose one line names the holder"), no output file."""
    _, err, _ = check14(root, LOCK_CASES[name], tmp_path, monkeypatch)
    errors = [x for x in err if x.startswith("error")]
    assert str(holder) in errors[0], errors
    assert not (root / "lk14.md").exists()
