"""Audit round 11 (issue 43), second part: bounded work on hostile inputs (Kineto traces,
NCCL_DEBUG logs of the 2.22 to 2.27 shapes, Inspector JSONL, Flight Recorder pickles of
opcodes not tried before, archives, option files), the machine's failures in processes
of their own (file size and open-file limits, read-only folders for an unprivileged
user, odd $TMPDIR, a database another process holds) and signals raised at a fixed
point of the work (no sleep: the process sends the signal to itself when the ingest
starts its transaction). Options, Ray, databases, writes and escapes are in
test_audit_round11.py, the dashboard's uploads in test_audit_round11_dashboard.py.

First run against the unchanged code, 223 cases in three files (test_audit_round11.py 111,
this file 95, test_audit_round11_dashboard.py 17), in two batches each run once:

- batch 1, 195 cases (03:23 UTC): 169 passed as first written (86.7%); after the 22
  test-side corrections below, **190 of 195 (97.4%)**.
- batch 2, 28 cases marked "batch 2" (written after batch 1 ran, 03:30 UTC): **25 of 28**.
- together: **215 of 223 (96.4%)**; since the fixes below, 223 of 223 (one miss was a
  wrong guess found in triage after the count, see test_audit_round11.py). The 8 misses
  were FIRST_RUN_FAILED (xfail, strict) in the committed first run: the machine's
  failures (4: report/hang/export/whatif PATH past RLIMIT_FSIZE exit 2 with "cannot open
  the database" naming a temporary file, not 1), validation (3: dashboard --port 8_501,
  --max-upload-mb in full-width digits, $STEPSCOPE_LOCK_WAIT=abc in dashboard start the
  server), writes outside their place (1: diff PATH PATH --out in an input folder
  written).

Fixed since (each case now a plain pass): the 4 PATH targets past RLIMIT_FSIZE exit 1 with
"FOLDER: cannot write the temporary database of the traces: the file size limit is
reached (…)" (stepscope/scratch_db.py; a --db of the user's keeps exit 2 as rounds 7 and 9
pin); dashboard --port and --max-upload-mb take ASCII digits only (stepscope/whole_numbers.py:
"argument --port: not a whole number: '8_501'"); dashboard refuses a bad
$STEPSCOPE_LOCK_WAIT before its server starts.

Test-side corrections made before counting (wrong guesses of a documented behaviour):
- 7 --out refusals name the option first ("error: --out PATH: is a gzip file …"): report
  gzip, plan zip, hang trace, diff DuckDB, export link to a trace, hang hard link to the
  db, plan the db; 2 more ("error: stepscope diff: argument --out: PATH: is a folder",
  plan --out a link loop); 3 nightly --out-dir ("error: --out-dir PATH: …": a link loop,
  /dev/null, the db); the 2 unprivileged ones (plan --out, nightly --out-dir read-only).
- "kernel ts false": a bool is accepted as round 8's "kernel dur a bool" pinned (exit 0).
- "a stray file named with OSC": the name is shown quoted, as docs/cli.md says.
- "--comm-kernels a pattern that is a list": `report RUN --comm-kernels` is refused as
  documented (it applies when ingesting); the case now ingests.
- "report PATH past the file size limit": 100,000 bytes fit; the limit is now 20,000.
- "diff PATH PATH with 12 open files": 14 fit; now 12 (one line, exit 1, as pinned).
- dashboard: a NUL and a name of dots only are refused by Streamlit's own uploader before
  the app sees them (not the app's doing): replaced by a DEL and "...json"; a zip member
  climbing out with ../ is skipped as unsafe, so the upload is refused (nothing written
  outside held).
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from audit8_inputs import Case, check_case, params
from audit11_inputs import root as root

D = "{db}"


def _ingest(folder: str) -> tuple[str, ...]:
    return ("ingest", f"{{root}}/{folder}", "--db", f"{{root}}/in_{folder}.duckdb", "--run",
            "g", "--quiet")


def _bad(folder: str, name: str = "rank0.json") -> Case:
    """A file case: one line naming the file, then "nothing ingested" (exit 1)."""
    return (_ingest(folder), None, 1, f"error: {{root}}/{folder}/{name}")


def _ok(folder: str) -> Case:
    return (_ingest(folder), None, 0, "")


FR = "nccl_trace_rank_8"

FILE_CASES: dict[str, Case] = {
    "kernel ts a list": _bad("k_ts_list"),
    "kernel dur an object": _bad("k_dur_object"),
    "kernel args a number": _bad("k_args_number"),
    "cpu op ts the text abc": _bad("k_cpu_ts_text"),
    "traceEvents a string": _bad("k_events_string"),
    "distributedInfo.world_size 2^31": _bad("k_world_2_31"),
    "distributedInfo.rank -1": _bad("k_rank_negative"),
    "distributedInfo.rank in Arabic-Indic text": _bad("k_rank_arabic"),
    "distributedInfo.world_size the text 2x": _bad("k_world_text_2"),
    "baseTimeNanoseconds 2^62": _bad("k_base_2_62"),
    "baseTimeNanoseconds 1.5": _bad("k_base_fraction"),
    "kernel ts false": _ok("k_kernel_ts_bool"),
    "a zlib stream named .json.gz": _bad("k_zlib", "rank0.json.gz"),
    "an xz stream named .json.gz": _bad("k_xz", "rank0.json.gz"),
    "an SQLite database named rank0.json": _bad("k_sqlite"),
    "a DuckDB database named rank0.json": _bad("k_duckdb"),
    "1 MiB of spaces before a valid trace": _ok("k_lead_spaces"),
    "8 MiB of spaces before a valid trace, gzipped": _ok("k_gz_lead_spaces"),
    "NCCL 2.22 log": _ok("n_2_22_3"),
    "NCCL 2.25 log": _ok("n_2_25_1"),
    "NCCL 2.27 log": _ok("n_2_27_3"),
    "nccl.log of plain English": _bad("n_plain_text", "nccl.log"),
    "nccl_trace_rank_3 of plain text": _bad("fr_plain_text", "nccl_trace_rank_3"),
    "Inspector header.rank equal to n_ranks": _bad("i_rank_eq_n", "node0-pid1.log"),
    "FR pickle INST of os.system": _bad("fr_inst", FR),
    "FR pickle OBJ of os.system": _bad("fr_obj", FR),
    "FR pickle NEWOBJ_EX of object": _bad("fr_newobj_ex", FR),
    "FR pickle of a complex number": _bad("fr_complex", FR),
    "FR pickle LONG_BINPUT at 2^31-1": _bad("fr_put_2_31", FR),
    "FR pickle of a frozenset": _bad("fr_frozenset", FR),
    "zip64 member": _ok("a_zip64"),
    "zip holding a .json.gz": _ok("a_zip_gz_member"),
    # read since the long names are staged under short ones (ingest/sources, p43n): a
    # valid trace is not lost for its folder's depth (it failed alone before)
    "tar member under 3,000 folders": _ok("a_tar_longname"),
    "an xz tar named .tar": _ok("a_tar_xz"),
    "zip without its end record": _bad("a_zip_cut", "run.zip"),
    "zip member named with OSC": _bad("a_zip_osc_member", "run.zip"),
    "tar.gz member named with C1": _bad("a_tar_c1_member", "run.tar.gz"),
    # ---- batch 2 (run once after the first)
    "50,000 thread names with escapes": _ok("k_50k_threads"),
    "NCCL 2.23 log of 200,000 WARN lines with OSC": _ok("n_200k_warn"),
}

OTHER_CASES: dict[str, Case] = {
    "a stray file named with OSC beside two ranks": (
        ("ingest", "{root}/k_esc_stray", "--db", "{root}/stray.duckdb", "--run", "s"), None,
        3, "error: '{root}/k_esc_stray/"),
    "NCCL log IB device with C1, report": (("report", "{root}/n_ib_c1"), None, 0, ""),
    "--comm-kernels a link to /dev/zero": (("ingest", "{t}", "--db", D, "--run", "c",
                                            "--comm-kernels", "{root}/opt/ck_zero_link.json"),
                                           None, 2, "error: {root}/opt/ck_zero_link.json"),
    "--comm-kernels a repeat past RE2's limit": (("ingest", "{t}", "--db", D, "--run", "c",
                                                  "--comm-kernels",
                                                  "{root}/opt/ck_repeat.json"), None, 2,
                                                 "error: {root}/opt/ck_repeat.json"),
    "--comm-kernels a pattern that is a list": (("ingest", "{t}", "--db", D, "--run", "c",
                                                 "--comm-kernels",
                                                 "{root}/opt/ck_pattern_list.json"), None, 2,
                                                "error: {root}/opt/ck_pattern_list.json"),
    "--comm-kernels /proc/self/status": (("ingest", "{t}", "--db", D, "--run", "c",
                                          "--comm-kernels", "/proc/self/status"), None, 2,
                                         "error: /proc/self/status"),
    "--model /proc/self/environ": (("report", "base", "--db", D, "--model",
                                    "/proc/self/environ"), None, 2,
                                   "error: /proc/self/environ"),
    "--model /dev/stdin": (("report", "base", "--db", D, "--model", "/dev/stdin"), None, 2,
                           "error: /dev/stdin"),
    "--model n_layers !!str 32": (("report", "base", "--db", D, "--model",
                                   "{root}/opt/model_tag_str.yaml"), None, 2,
                                  "error: {root}/opt/model_tag_str.yaml"),
    "--model 10^9 items through aliases": (("diff", "base", "other", "--db", D, "--model",
                                            "{root}/opt/model_laughs.yaml"), None, 2,
                                           "error: {root}/opt/model_laughs.yaml"),
    "--model hidden 1e308": (("report", "base", "--db", D, "--model",
                              "{root}/opt/model_hidden_1e308.yaml"), None, 2,
                             "error: {root}/opt/model_hidden_1e308.yaml"),
    "--model a merge of a list of numbers": (("report", "base", "--db", D, "--model",
                                              "{root}/opt/model_merge_list.yaml"), None, 2,
                                             "error: {root}/opt/model_merge_list.yaml"),
    "--model an integer key": (("nightly", "{t}", "--db", "{root}/n11i.duckdb", "--job", "j",
                                "--out-dir", "{root}/n11i", "--model",
                                "{root}/opt/model_int_key.yaml"), None, 2,
                               "error: {root}/opt/model_int_key.yaml"),
    "--model a --comm-kernels file": (("report", "base", "--db", D, "--model",
                                       "{root}/opt/model_ck.json"), None, 2,
                                      "error: {root}/opt/model_ck.json"),
    # ---- batch 2 (run once after the first)
    "ingest into a database whose .wal is a folder": (
        ("ingest", "{t}", "--db", "{root}/walfolder.duckdb", "--run", "x"), None, 2,
        "error: {root}/walfolder.duckdb"),
    "history text of nights with OSC and C1 kernel names": (
        ("history", "jesc", "--db", "{root}/hist.duckdb"), None, 0, ""),
    "history md of nights with OSC and C1 kernel names": (
        ("history", "jesc", "--db", "{root}/hist.duckdb", "--format", "md"), None, 0, ""),
    "history json of nights with OSC and C1 kernel names": (
        ("history", "jesc", "--db", "{root}/hist.duckdb", "--format", "json"), None, 0, ""),
}

# First run: the 4 "PATH past the file size limit" cases failed (exit 2, "cannot open the
# database" naming a temporary file); fixed since (ingest/db_open_machine.py): exit 1,
# "cannot write the database: the file size limit is reached (ulimit -f) (…)".
FIRST_RUN_FAILED: dict[str, str] = {}


@pytest.mark.parametrize("name", params(FILE_CASES, FIRST_RUN_FAILED))
def test_file_case(root: Path, name: str, tmp_path: Path,
                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A hostile file: ingested (exit 0), or one line naming it then "nothing ingested"."""
    check_case(root, FILE_CASES[name], tmp_path, monkeypatch, file_case=True)


@pytest.mark.parametrize("name", params(OTHER_CASES, FIRST_RUN_FAILED))
def test_other_case(root: Path, name: str, tmp_path: Path,
                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A hostile option file or a partial run: its exit code and its first error line."""
    check_case(root, OTHER_CASES[name], tmp_path, monkeypatch)


# ---- the machine's failures, in processes of their own

DROP = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner"]


def _preexec(limit: tuple[int, int] | None) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    if limit is not None:
        resource.setrlimit(limit[0], (limit[1], limit[1]))


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None,
         limit: tuple[int, int] | None = None, unprivileged: bool = False,
         code: str | None = None) -> tuple[int, list[str]]:
    """The CLI in a process of its own (`code` run first when given; `unprivileged`:
    without root's right to write anywhere): (exit code, stderr)."""
    head = [*DROP] if unprivileged and os.geteuid() == 0 else []
    head += [sys.executable, "-P"]
    head += ["-c", code, *argv] if code else ["-m", "stepscope", *argv]
    proc = subprocess.run(head, cwd=cwd, capture_output=True, text=True, timeout=120,
                          preexec_fn=lambda: _preexec(limit),
                          env={**os.environ, **(env or {})}, check=False)
    return proc.returncode, proc.stderr.splitlines()


PLAN = ["plan", "--params", "7e9", "--gpus", "8", "--gpu", "H100", "--seq", "4096"]
MACHINE: dict[str, tuple[list[str], dict[str, str] | None, tuple[int, int] | None,
                         bool, int, str]] = {
    "report PATH past the file size limit": (
        ["report", "{root}/t"], None, (resource.RLIMIT_FSIZE, 20_000), False, 1, "error: "),
    "diff PATH PATH with 12 open files": (
        ["diff", "{root}/t", "{root}/t2"], None, (resource.RLIMIT_NOFILE, 8), False, 1,
        "error: "),
    "ingest with $TMPDIR a dangling link": (
        ["ingest", "{root}/t", "--db", "{root}/m_dl.duckdb", "--run", "x", "--quiet"],
        {"TMPDIR": "{root}/out/nowhere_link"}, None, False, 0, ""),
    "ingest with $TMPDIR relative": (
        ["ingest", "{root}/t", "--db", "{root}/m_rel.duckdb", "--run", "x", "--quiet"],
        {"TMPDIR": "tmp11"}, None, False, 0, ""),
    "unprivileged: ingest --db in a read-only folder": (
        ["ingest", "{root}/t", "--db", "{root}/ro/x.duckdb", "--run", "x", "--quiet"],
        None, None, True, 2, "error: {root}/ro/x.duckdb"),
    "unprivileged: ingest --stage-dir read-only": (
        ["ingest", "{root}/t", "--db", "{root}/m_s.duckdb", "--run", "x", "--quiet",
         "--stage-dir", "{root}/ro"], None, None, True, 2, "error: --stage-dir"),
    "unprivileged: plan --out in a read-only folder": (
        [*PLAN, "--out", "{root}/ro/p.md"], None, None, True, 2,
        "error: stepscope plan: argument --out: {root}/ro/p.md"),
    "unprivileged: nightly --out-dir under a read-only folder": (
        ["nightly", "{root}/t", "--db", "{root}/m_n.duckdb", "--job", "j", "--out-dir",
         "{root}/ro/n"], None, None, True, 2, "error: --out-dir {root}/ro/n"),
    "unprivileged: ingest with $TMPDIR read-only": (
        ["ingest", "{root}/t", "--db", "{root}/m_t.duckdb", "--run", "x", "--quiet"],
        {"TMPDIR": "{root}/ro"}, None, True, 0, ""),
    "unprivileged: report PATH from a read-only current folder": (
        ["report", "{root}/t"], None, None, True, 0, ""),
    "unprivileged: summary of a database in a read-only folder": (
        ["summary", "--db", "{root}/ro/db.duckdb"], None, None, True, 0, ""),
    # ---- batch 2 (run once after the first)
    "hang PATH past the file size limit": (
        ["hang", "{root}/fr_dir\x1b]0;owned\x07\x1b[2J"], None, (resource.RLIMIT_FSIZE, 20_000),
        False, 1, "error: "),
    "export PATH past the file size limit": (
        ["export", "{root}/t", "--out", "{root}/m_e.json"], None,
        (resource.RLIMIT_FSIZE, 20_000), False, 1, "error: "),
    "whatif PATH past the file size limit": (
        ["whatif", "{root}/t", "--rank", "0"], None, (resource.RLIMIT_FSIZE, 20_000), False, 1,
        "error: "),
    "report PATH with 12 open files": (
        ["report", "{root}/t"], None, (resource.RLIMIT_NOFILE, 8), False, 1, "error: "),
    "unprivileged: ingest into a read-only database file": (
        ["ingest", "{root}/t", "--db", "{root}/ro_db.duckdb", "--run", "x", "--quiet"], None,
        None, True, 2, "error: {root}/ro_db.duckdb"),
    "unprivileged: nightly into a read-only database file": (
        ["nightly", "{root}/t", "--db", "{root}/ro_db.duckdb", "--job", "j", "--out-dir",
         "{root}/m_ron"], None, None, True, 2, "error: {root}/ro_db.duckdb"),
    "unprivileged: report of a read-only database file": (
        ["report", "base", "--db", "{root}/ro_db.duckdb"], None, None, True, 0, ""),
    "unprivileged: ingest of an unreadable trace": (
        ["ingest", "{root}/unread", "--db", "{root}/m_ur.duckdb", "--run", "x", "--quiet"],
        None, None, True, 3, "error: {root}/unread/rank1.json.gz"),
    "unprivileged: ingest of a folder that cannot be listed": (
        ["ingest", "{root}/unread_dir", "--db", "{root}/m_ud.duckdb", "--run", "x",
         "--quiet"], None, None, True, 3, "error: {root}/unread_dir/sub"),
    "unprivileged: --model unreadable": (
        ["report", "base", "--db", "{db}", "--model", "{root}/opt/unreadable.yaml"], None,
        None, True, 2, "error: {root}/opt/unreadable.yaml"),
    "unprivileged: --comm-kernels unreadable": (
        ["ingest", "{root}/t", "--db", "{root}/m_ck.duckdb", "--run", "x", "--comm-kernels",
         "{root}/opt/unreadable_ck.json"], None, None, True, 2,
        "error: {root}/opt/unreadable_ck.json"),
}


@pytest.mark.parametrize("name", params(MACHINE, FIRST_RUN_FAILED))
def test_the_machines_failures(root: Path, name: str, tmp_path: Path) -> None:
    """The machine's failure: one line, the documented code, no traceback, nothing in
    the current folder (a read-only one for the unprivileged cases)."""
    argv, env, limit, unprivileged, want_rc, want = MACHINE[name]
    if unprivileged and os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("root without setpriv (util-linux): cannot give up its right to write")
    fill = {"root": str(root), "db": str(root / "db.duckdb")}
    cwd = root / "ro" if unprivileged else tmp_path
    full = [a.format(**fill) for a in argv]
    env = {k: v.format(**fill) for k, v in (env or {}).items()}
    before = sorted(os.listdir(cwd))
    rc, err = _run(full, cwd, env, limit, unprivileged)
    errors = [x for x in err if not x.startswith(("warning:", "note:"))]
    assert not any("Traceback" in x or "internal error" in x for x in err), err
    assert sorted(os.listdir(cwd)) == before
    if want_rc == 0:
        assert rc == 0 and not errors, (rc, err)
        return
    assert rc == want_rc and len(errors) == 1 and errors[0].startswith(
        want.format(**fill)), (rc, err)


HOLD = ("import duckdb, sys; c = duckdb.connect(sys.argv[1], read_only=sys.argv[2] == 'r'); "
        "print('held', flush=True); sys.stdin.read()")

LOCKED: dict[str, tuple[str, list[str], int]] = {
    "summary while another process holds the db": ("w", ["summary", "--db", "{db}"], 2),
    "ingest while another process holds the db": ("w", ["ingest", "{root}/t", "--db", "{db}",
                                                        "--run", "lk", "--quiet"], 2),
    "nightly while another process holds the db": ("w", ["nightly", "{root}/t", "--db",
                                                         "{db}", "--job", "lk", "--out-dir",
                                                         "{root}/lk"], 2),
    # ---- batch 2 (run once after the first)
    "report while another process reads the db": ("r", ["report", "base", "--db", "{db}"],
                                                  0),
    "ingest while another process reads the db": ("r", ["ingest", "{root}/t", "--db", "{db}",
                                                        "--run", "lk", "--quiet"], 2),
    "history while another process holds the db": ("w", ["history", "j", "--db", "{db}"], 2),
}


@pytest.mark.parametrize("name", params(LOCKED, FIRST_RUN_FAILED))
def test_a_database_held_by_another_process(root: Path, name: str, tmp_path: Path) -> None:
    """Another process holds the database (its line read back first: no sleep): exit 2
    after $STEPSCOPE_LOCK_WAIT=0 seconds, one line naming the database."""
    db = str(root / "db.duckdb")
    mode, argv, want = LOCKED[name]
    holder = subprocess.Popen([sys.executable, "-c", HOLD, db, mode], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        full = [a.format(root=root, db=db) for a in argv]
        rc, err = _run(full, tmp_path, {"STEPSCOPE_LOCK_WAIT": "0"})
    finally:
        holder.communicate("", timeout=30)
    errors = [x for x in err if not x.startswith(("warning:", "note:"))]
    assert not any("Traceback" in x or "internal error" in x for x in err), err
    if want == 0:
        assert rc == 0 and not errors, (rc, err)
        return
    assert rc == 2 and len(errors) == 1 and errors[0].startswith(f"error: {db}"), (rc, err)


# ---- signals raised at a fixed point: when the ingest's transaction starts its files

RAISE_AT = """
import os, signal, sys
signal.signal(signal.SIGHUP, signal.SIG_IGN) if sys.argv[1] == 'IGN' else None
sig = getattr(signal, sys.argv[1] if sys.argv[1] != 'IGN' else 'SIGHUP')
import stepscope.ingest.writer as w
point = sys.argv[2]
orig = getattr(w, point)
def hooked(*a, **k):
    os.kill(os.getpid(), sig)
    return orig(*a, **k)
setattr(w, point, hooked)
from stepscope.cli import main
sys.exit(main(sys.argv[3:]))
"""

SIGNALS: dict[str, tuple[str, list[str], int]] = {
    "ingest SIGTERM as its files start": (
        "SIGTERM", ["ingest", "{root}/t", "--db", "{root}/sg_t.duckdb", "--run", "x"], 143),
    "report PATH SIGINT as its files start": ("SIGINT", ["report", "{root}/t"], 130),
    "nightly SIGHUP as its files start": (
        "SIGHUP", ["nightly", "{root}/t", "--db", "{root}/sg_n.duckdb", "--job", "j",
                   "--out-dir", "{root}/sg_no"], 129),
    "diff PATH PATH SIGTERM as its files start": (
        "SIGTERM", ["diff", "{root}/t", "{root}/t2"], 143),
    "hang PATH SIGINT as its files start": (
        "SIGINT", ["hang", "{root}/fr_dir\x1b]0;owned\x07\x1b[2J"], 130),
    "export PATH SIGHUP as its files start": (
        "SIGHUP", ["export", "{root}/t", "--out", "{root}/sg_e.json"], 129),
    "ingest with SIGHUP ignored at start, then SIGHUP": (
        "IGN", ["ingest", "{root}/t", "--db", "{root}/sg_i.duckdb", "--run", "x", "--quiet"],
        0),
    # ---- batch 2 (run once after the first): the signal as the run is being finished
    "ingest SIGINT as it finishes the run": (
        "SIGINT", ["ingest", "{root}/t", "--db", "{root}/sg_f.duckdb", "--run", "x"], 130),
    "nightly SIGTERM as it finishes the run": (
        "SIGTERM", ["nightly", "{root}/t", "--db", "{root}/sg_fn.duckdb", "--job", "j",
                    "--out-dir", "{root}/sg_fno"], 143),
    "ingest into the shared db SIGHUP as it finishes the run": (
        "SIGHUP", ["ingest", "{root}/t", "--db", "{db}", "--run", "sgx"], 129),
}
FINISH = {"ingest SIGINT as it finishes the run", "nightly SIGTERM as it finishes the run",
          "ingest into the shared db SIGHUP as it finishes the run"}


@pytest.mark.parametrize("name", params(SIGNALS, FIRST_RUN_FAILED))
def test_signals_at_a_fixed_point(root: Path, name: str, tmp_path: Path) -> None:
    """128 + the signal's number and one 'interrupted' line; nothing committed and no
    temporary folder left in the current one. A signal ignored at start stays ignored."""
    sig, argv, code = SIGNALS[name]
    full = [a.format(root=root, db=root / "db.duckdb") for a in argv]
    point = "_finish_run" if name in FINISH else "_ingest_files"
    rc, err = _run([sig, point, *full], tmp_path, code=RAISE_AT)
    lines = [x for x in err if not x.startswith(("warning:", "note:"))]
    assert not any("Traceback" in x or "internal error" in x for x in err), err
    assert rc == code, (rc, err[-20:])
    assert not list(tmp_path.iterdir())
    if code == 0:
        assert not lines, err
        return
    assert len(lines) == 1 and lines[0].startswith("interrupted"), err[-20:]
    if sig == "SIGTERM" or sig == "SIGHUP":
        assert f"by {sig}" in lines[0], lines
    if name in FINISH:  # nothing committed: the run is not in the database
        db = next(a for a in full if a.endswith(".duckdb"))
        if Path(db).exists():
            con = duckdb.connect(db, read_only=True)
            try:
                assert not con.execute("SELECT count(*) FROM runs WHERE run LIKE 'sgx' OR "
                                       "run LIKE 'x' OR run LIKE 'j%'").fetchone()[0]
            finally:
                con.close()
