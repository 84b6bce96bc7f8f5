"""Audit round 10 (issue 43), second part: bounded work on hostile inputs (Kineto traces
of odd shapes, NCCL_DEBUG logs and Inspector JSONL, Flight Recorder pickles, archives,
option files), the machine's failures in a process of its own (file size, open-file
and address-space limits, $TMPDIR) and signals. Options, Ray, databases, writes and
escapes are in test_audit_round10.py.

First run against the unchanged code (218 cases: 120 in test_audit_round10.py,
98 here): **169 of 218 passed (77.5%)** as first written, no test-side
correction made before counting. The 49 misses: 32 in test_audit_round10.py (triaged
there), 17 here.

Triage of the 17 here (each run with the xfail removed, against README's exit-code table
and docs/): first run 169/218; after triage here: 10 wrong guesses corrected, 7 defects,
7 fixed (FIRST_RUN_FAILED is empty). Known flaky, not among the 17 (it passed the first
run): "ingest with 12 open files" and "nightly past the open-file limit" sit at the
boundary (13 descriptors fail, 14 succeed by hand), so on a loaded machine the command may
finish (exit 0).

Wrong guesses (the code does the right, documented thing; the case is corrected):
* "a broken trace named with ESC": a name with an escape code is shown quoted and
  escaped (docs/cli.md "Exit codes": `'rank1\nx.json'`); the line starts with the quote.
* "FR protocol 5 bytearray": an in-band bytearray is plain data (no import, no call);
  the dump's unknown key is ignored, so the dump ingests (exit 0).
* "FR state and frames with ESC and OSC": the case's state `done<OSC>` is no state
  of a dump; the entry is refused with the state escaped (exit 1, one line).
* "zip member with an absolute path": members with absolute or `..` paths are skipped
  (docs/dashboard.md "Uploads", sources._safe_member): the archive holds no trace (1).
* "zip of a folder entry only", "tar of a member named .", "tar of a folder named
  rank0.json": the archive's line then "nothing ingested", as for every file case:
  moved from OTHER_CASES (one line) to FILE_CASES (two lines).
* "plan --model a list": `--model` goes with `--from RUN` (docs/planner.md); with it
  the file is named: `error: list.yaml: the model spec must be a mapping of fields`.
* "ingest past the file size limit": under 200,000 bytes the run's commit fits in the
  WAL (61 KB); DuckDB's checkpoint at close cannot grow the file and leaves the WAL,
  replayed on the next open (summary reads the run): exit 0 is right.
* "ingest SIGHUP": the signal came 1.5 s after the start, before the ingest's handler
  on the loaded machine (Python's default SIGHUP kills with no word); the test now
  waits until /proc/PID/status shows the handlers (SigCgt), no sleep.

Defects (each xfail strict in FIRST_RUN_FAILED until its fix):
* "UTF-32": a UTF-32 rank0.json is skipped as a non-trace .json (json.loads decodes
  UTF-32 bytes), then "no trace files" (exit 2).
* "NCCL log rank past nRanks" (its comm line completed with NCCL's `localRank 0`: as
  first written, the line was no NCCL line and was rightly ignored): rank 5 of nRanks 2
  is stored (exit 0).
* "Inspector without header", "Inspector without coll_perf": not recognized as
  Inspector JSONL, skipped in silence (exit 2, "no trace files").
* "Inspector comm_name of 1 MiB": coll_perf lies past the 64 KiB sniff: skipped.
* "Inspector exec time 1e308": stored (exit 0).
* "ingest in 400 MB of address space": exit 2, "cannot open the database with
  $STEPSCOPE_MEMORY_LIMIT='1GB' (Out of Memory Error: Allocation failure)": the
  machine's failure blamed on a setting the user never gave.

Fixed (each its own commit, the case's xfail removed):
* "UTF-32": the file's line, "UTF-32 text, not UTF-8: stepscope reads traces in UTF-8
  (convert it, e.g. iconv -f UTF-32 -t UTF-8)", then "nothing ingested" (exit 1).
* "Inspector without header", "... without coll_perf": "2 NCCL Inspector line(s)
  without header.id" / "... without coll_perf.coll / p2p_perf.p2p" (exit 1): the sniff
  takes a line holding one of the plugin's keys, or opening with its header.
* "Inspector comm_name of 1 MiB": ingested (exit 0): the header's start is enough.
* "Inspector exec time 1e308": "3 NCCL Inspector line(s) with an execution time that is
  negative or not finite, or over 1 day" (exit 1); negative, NaN and infinite sizes and
  bandwidths likewise.
* "NCCL log rank past nRanks": "1 communicator line(s) with a rank outside [0, nRanks)
  ('comm 0x.. rank R nRanks N')" (exit 1), for Init COMPLETE lines too.
* "ingest in 400 MB of address space": "x.duckdb: cannot open the database: out of
  memory; free memory, or ingest with fewer --jobs (the machine's failure, not the
  database's); nothing was committed" (exit 1); a file size limit at open likewise.
"""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from audit8_inputs import Case, check_case, params
from audit10_inputs import root as root

D = "{db}"


def _ingest(folder: str) -> tuple[str, ...]:
    return ("ingest", f"{{root}}/{folder}", "--db", f"{{root}}/in_{folder}.duckdb", "--run",
            "g", "--quiet")


def _bad(folder: str, name: str = "rank0.json") -> Case:
    """A file case: one line naming the file, then "nothing ingested" (exit 1)."""
    return (_ingest(folder), None, 1, f"error: {{root}}/{folder}/{name}")


def _ok(folder: str) -> Case:
    return (_ingest(folder), None, 0, "")


NO_TRACES = "error: no trace files"

FILE_CASES: dict[str, Case] = {
    "kernel ts -0.0": _ok("k_ts_neg_zero"),
    "kernel name empty": _ok("k_name_empty"),
    "kernel name null": _ok("k_name_null"),
    "kernel cat a number": _ok("k_cat_number"),
    "kernel ph lower-case x": _ok("k_ph_lower"),
    "kernel External id a string": _ok("k_ext_string"),
    "kernel correlation 1.5": _ok("k_corr_float"),
    "kernel stream -1": _ok("k_stream_negative"),
    "kernel device 2^40": _ok("k_device_2_40"),
    "kernel pid -1": _ok("k_pid_negative"),
    "kernel tid null": _ok("k_tid_null"),
    "distributedInfo.rank the text 0": _ok("k_dist_rank_text"),
    "distributedInfo null": _ok("k_dist_null"),
    "deviceProperties of 10,000 GPUs": _ok("k_props_10k"),
    "ProfilerStep numbers swapped": _ok("k_steps_swapped"),
    "ProfilerSteps overlapping": _ok("k_steps_overlap"),
    "ProfilerStep numbers negative": _ok("k_steps_negative"),
    "kernel dur 1e-400": _ok("k_dur_tiny"),
    "schemaVersion a string": _ok("k_schema_text"),
    "thread, trace and backend names with ESC": _ok("k_esc_names"),
    "kernel grid with ESC": _ok("k_grid_esc"),
    "200,000 instant events": _ok("k_200k_instants"),
    "two JSON documents in one file": _bad("k_two_docs"),
    "whitespace only": _bad("k_whitespace"),
    "UTF-32": _bad("k_utf32"),
    "Latin-1 bytes in a kernel name": _bad("k_latin1"),
    "100,000-deep nesting in an unused key": _bad("k_deep_top"),
    "random bytes after a gzip magic": _bad("k_gz_random", "rank0.json.gz"),
    "a gzip with a 60 KB FEXTRA": _ok("k_gz_fextra"),
    "an empty rank0.json": _bad("k_empty"),
    "a broken trace named with ESC": (_ingest("k_esc_file"), None, 1,
                                      "error: '{root}/k_esc_file/rank0\\x1b[31m.json': "),
    "NCCL 2.19 log": _ok("n_2_19"),
    "NCCL log of a 1 MiB line": _ok("n_long_line"),
    "NCCL log rank past nRanks": _bad("n_rank_past", "nccl.log"),
    "NCCL log version 2.99": _ok("n_v2_99"),
    "NCCL log of 100,000 channel lines": _ok("n_100k_channels"),
    "NCCL log version 2.x": _ok("n_version_x"),
    "an empty nccl.log": _bad("n_empty", "nccl.log"),
    "NCCL WARN with OSC": _ok("n_osc_warn"),
    "Inspector without header": _bad("i_no_header", "node0-pid1.log"),
    "Inspector without coll_perf": _bad("i_no_perf", "node0-pid1.log"),
    "Inspector a null line": _bad("i_null_line", "node0-pid1.log"),
    "Inspector comm_name of 1 MiB": _ok("i_long_comm"),
    "Inspector exec time 1e308": _bad("i_time_1e308", "node0-pid1.log"),
    "Inspector comm_name with ESC and OSC": _ok("i_comm_esc"),
    "FR entries a dict": _bad("fr_entries_dict", "nccl_trace_rank_8"),
    "FR protocol 5 bytearray": _ok("fr_bytearray"),
    "FR LONG4 of 2 GiB declared": _bad("fr_long4", "nccl_trace_rank_8"),
    "FR 50,000 nested marks": _bad("fr_deep", "nccl_trace_rank_8"),
    "FR pickle of collections.OrderedDict": _bad("fr_ordered", "nccl_trace_rank_8"),
    "FR pg_config a string": _bad("fr_pg_text", "nccl_trace_rank_8"),
    "FR an entry of no fields": _bad("fr_entry_empty", "nccl_trace_rank_8"),
    "FR state and frames with ESC and OSC": _bad("fr_entry_esc", "nccl_trace_rank_8"),
    "zip member with a NUL in its name": _bad("a_nul_name", "run.zip"),
    "zip with a 65 KB comment": _ok("a_big_comment"),
    "tar.gz cut in half": _bad("a_tgz_cut", "run.tar.gz"),
    "zip member whose sizes lie": _bad("a_size_lies", "run.zip"),
    "a zip named .tar": _ok("a_zip_as_tar"),
    "zip member of 50 MiB of NUL": _bad("a_zeros", "run.zip"),
    "zip member a symlink to /etc/passwd": _bad("a_zip_symlink", "run.zip"),
    "zip member with an absolute path": _bad("a_zip_abs", "run.zip"),
    "tar member with OSC in its name": _bad("a_member_esc", "run.tar"),
    "a tar gzipped and named .json.gz": _bad("a_gz_of_tar", "rank0.json.gz"),
    "zip of a folder entry only": _bad("a_dir_entry", "run.zip"),
    "tar of a member named .": _bad("a_tar_dot", "run.tar"),
    "tar of a folder named rank0.json": _bad("a_tar_dir_named_json", "run.tar"),
}

OTHER_CASES: dict[str, Case] = {
    "NCCL WARN line only": (_ingest("n_warn_only"), None, 0, ""),
    "the text null": (_ingest("k_null"), None, 2, NO_TRACES),
    "--model 10,000 list items": (("report", "base", "--db", D, "--model",
                                   "{root}/opt/seq10k.yaml"), None, 2,
                                  "error: {root}/opt/seq10k.yaml: "),
    "--model empty": (("report", "base", "--db", D, "--model", "{root}/opt/empty.yaml"), None,
                      2, "error: {root}/opt/empty.yaml: "),
    "--model null": (("report", "base", "--db", D, "--model", "{root}/opt/null.yaml"), None,
                     2, "error: {root}/opt/null.yaml: "),
    "--model a list": (("report", "base", "--db", D, "--model", "{root}/opt/list.yaml"), None,
                       2, "error: {root}/opt/list.yaml: "),
    "--model n_layers 0": (("report", "base", "--db", D, "--model", "{root}/opt/layers0.yaml"),
                           None, 2, "error: {root}/opt/layers0.yaml: "),
    "--model a null key": (("report", "base", "--db", D, "--model",
                            "{root}/opt/null_key.yaml"), None, 2,
                           "error: {root}/opt/null_key.yaml: "),
    "--model 100,000-deep nesting": (("report", "base", "--db", D, "--model",
                                      "{root}/opt/deep.yaml"), None, 2,
                                     "error: {root}/opt/deep.yaml: "),
    "--model Latin-1": (("report", "base", "--db", D, "--model", "{root}/opt/latin1.yaml"),
                        None, 2, "error: {root}/opt/latin1.yaml: "),
    "--model gzip": (("report", "base", "--db", D, "--model", "{root}/opt/gz.yaml"), None, 2,
                     "error: {root}/opt/gz.yaml: "),
    "diff --model 100,000-deep nesting": (("diff", "base", "other", "--db", D, "--model",
                                           "{root}/opt/deep.yaml"), None, 2,
                                          "error: {root}/opt/deep.yaml: "),
    "plan --model a list": (("plan", "--from", "base", "--db", D, "--model",
                             "{root}/opt/list.yaml", "--gpus", "8"), None, 2,
                            "error: {root}/opt/list.yaml: "),
    "--comm-kernels empty file": (("ingest", "{t}", "--db", D, "--run", "c",
                                   "--comm-kernels", "{root}/opt/ck_empty_file.json"), None, 2,
                                  "error: {root}/opt/ck_empty_file.json: "),
    "--comm-kernels 100,000-deep nesting": (("ingest", "{t}", "--db", D, "--run", "c",
                                             "--comm-kernels", "{root}/opt/ck_deep.json"),
                                            None, 2, "error: {root}/opt/ck_deep.json: "),
    "--comm-kernels UTF-16": (("ingest", "{t}", "--db", D, "--run", "c", "--comm-kernels",
                               "{root}/opt/ck_utf16.json"), None, 2,
                              "error: {root}/opt/ck_utf16.json: "),
    "--comm-kernels null": (("ingest", "{t}", "--db", D, "--run", "c", "--comm-kernels",
                             "{root}/opt/ck_null.json"), None, 2,
                            "error: {root}/opt/ck_null.json: "),
    "report PATH --comm-kernels a folder": (("report", "{t}", "--comm-kernels",
                                             "{root}/opt/ck_dir.json"), None, 2,
                                            "error: {root}/opt/ck_dir.json"),
    "nightly --comm-kernels 100,000-deep": (("nightly", "{t}", "--db", D, "--job", "j",
                                             "--out-dir", "{root}/n", "--comm-kernels",
                                             "{root}/opt/ck_deep.json"), None, 2,
                                            "error: {root}/opt/ck_deep.json: "),
    "nightly --model null": (("nightly", "{t}", "--db", D, "--job", "j", "--out-dir",
                              "{root}/n", "--model", "{root}/opt/null.yaml"), None, 2,
                             "error: {root}/opt/null.yaml: "),
}

DEFECT = "defect (triaged): "
FIRST_RUN_FAILED: dict[str, str] = {
}


@pytest.mark.parametrize("name", params(FILE_CASES, FIRST_RUN_FAILED))
def test_file_case(root: Path, name: str, tmp_path: Path,
                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A hostile file: ingested (exit 0), or one line naming it then "nothing ingested"."""
    check_case(root, FILE_CASES[name], tmp_path, monkeypatch, file_case=True)


@pytest.mark.parametrize("name", params(OTHER_CASES, FIRST_RUN_FAILED))
def test_other_case(root: Path, name: str, tmp_path: Path,
                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A hostile option file or archive: its exit code and the start of its one line."""
    check_case(root, OTHER_CASES[name], tmp_path, monkeypatch)


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None,
         limit: tuple[int, int] | None = None) -> tuple[int, list[str]]:
    """The CLI in a process of its own, under one resource limit: (exit code, stderr)."""
    def preexec() -> None:
        if limit is not None:
            resource.setrlimit(limit[0], (limit[1], limit[1]))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    import os
    proc = subprocess.run([sys.executable, "-P", "-m", "stepscope", *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=180, preexec_fn=preexec,
                          env={**os.environ, **(env or {})}, check=False)
    return proc.returncode, proc.stderr.splitlines()


MB = 1 << 20
MACHINE: dict[str, tuple[list[str], dict[str, str] | None, tuple[int, int] | None, int, str]] = {
    "ingest past the file size limit": (
        ["ingest", "{root}/t", "--db", "{root}/big_i.duckdb", "--run", "x", "--quiet"], None,
        (resource.RLIMIT_FSIZE, 200_000), 0, ""),
    "ingest with 12 open files": (
        ["ingest", "{root}/t", "--db", "{root}/big_n.duckdb", "--run", "x", "--quiet",
         "--jobs", "1"], None, (resource.RLIMIT_NOFILE, 8), 1, "error: "),
    "plan --out past the file size limit": (
        ["plan", "--params", "7e9", "--gpus", "8", "--gpu", "H100", "--seq", "4096", "--out",
         "{root}/big_p.md"], None, (resource.RLIMIT_FSIZE, 50), 1,
        "error: {root}/big_p.md: could not be written (File too large)"),
    "report --out past the file size limit": (
        ["report", "base", "--db", "{db}", "--out", "{root}/big_r.md"], None,
        (resource.RLIMIT_FSIZE, 100), 1,
        "error: {root}/big_r.md: could not be written (File too large)"),
    "nightly past the open-file limit": (
        ["nightly", "{root}/t", "--db", "{root}/big_ny.duckdb", "--job", "j", "--out-dir",
         "{root}/big_nyo", "--jobs", "1"], None, (resource.RLIMIT_NOFILE, 8), 1, "error: "),
    "ingest in 400 MB of address space": (
        ["ingest", "{root}/t", "--db", "{root}/big_as.duckdb", "--run", "x", "--quiet",
         "--jobs", "1"], None, (resource.RLIMIT_AS, 400 * MB), 1, "error: "),
    "ingest with $TMPDIR read-only (/proc)": (
        ["ingest", "{root}/t", "--db", "{root}/big_tmp.duckdb", "--run", "x", "--quiet"],
        {"TMPDIR": "/proc"}, None, 0, ""),
    "ingest with $TMPDIR a FIFO": (
        ["ingest", "{root}/t", "--db", "{root}/big_tf.duckdb", "--run", "x", "--quiet"],
        {"TMPDIR": "{root}/fifo_out.json"}, None, 0, ""),
    "report PATH with $TMPDIR /dev/null": (
        ["report", "{root}/t"], {"TMPDIR": "/dev/null"}, None, 0, ""),
}


@pytest.mark.parametrize("name", params(MACHINE, FIRST_RUN_FAILED))
def test_the_machines_failures(root: Path, name: str, tmp_path: Path) -> None:
    """The machine's failure: one line, the documented code, no traceback, nothing
    committed (no run named x in a database left behind) and nothing in the cwd."""
    argv, env, limit, want_rc, want = MACHINE[name]
    fill = {"root": str(root), "db": str(root / "db.duckdb")}
    full = [a.format(**fill) for a in argv]
    env = {k: v.format(**fill) for k, v in (env or {}).items()}
    rc, err = _run(full, tmp_path, env, limit)
    errors = [x for x in err if not x.startswith(("warning:", "note:"))]
    assert not any("Traceback" in x or "internal error" in x for x in err), err
    assert not list(tmp_path.iterdir())
    if want_rc == 0:
        assert rc == 0 and not errors, (rc, err)
        return
    assert rc == want_rc and len(errors) == 1 and errors[0].startswith(
        want.format(**fill)), (rc, err)


SIGNALS = {
    "ingest SIGHUP": (["ingest", "{root}/k_200k_instants", "--db", "{root}/sig_h.duckdb",
                       "--run", "x"], signal.SIGHUP, 129),
    "report PATH SIGTERM": (["report", "{root}/k_200k_instants"], signal.SIGTERM, 143),
    "nightly SIGINT": (["nightly", "{root}/k_200k_instants", "--db", "{root}/sig_n.duckdb",
                        "--job", "j", "--out-dir", "{root}/sig_no"], signal.SIGINT, 130),
}


def _handler_installed(proc: subprocess.Popen[str], sig: int) -> bool:
    """Whether the process catches `sig` and SIGTERM (stepscope's InterruptGuard is in
    place: Python alone catches only SIGINT), from /proc/PID/status; False once it ended."""
    import time
    want = (1 << (sig - 1)) | (1 << (signal.SIGTERM - 1))
    while proc.poll() is None:
        try:
            status = Path(f"/proc/{proc.pid}/status").read_text()
        except OSError:
            return False
        caught = next(int(x.split()[1], 16) for x in status.splitlines()
                      if x.startswith("SigCgt:"))
        if caught & want == want:
            return True
        time.sleep(0.005)
    return False


@pytest.mark.parametrize("name", params(SIGNALS, FIRST_RUN_FAILED))
def test_signals_in_a_process(root: Path, name: str, tmp_path: Path) -> None:
    """A stop signal once the command's handlers are in place (not after a fixed sleep:
    on a loaded machine 1.5 s could fall before them, when SIGHUP kills the interpreter
    with no word): 128 + its number, one 'interrupted' line."""
    import os
    argv, sig, code = SIGNALS[name]
    full = [a.format(root=root) for a in argv]
    proc = subprocess.Popen([sys.executable, "-P", "-m", "stepscope", *full], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=os.environ.copy())
    assert _handler_installed(proc, sig), proc.communicate(timeout=60)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    lines = [x for x in err.splitlines() if not x.startswith(("warning:", "note:"))]
    assert proc.returncode == code, (proc.returncode, err[-2000:])
    assert len(lines) == 1 and lines[0].startswith("interrupted"), err[-2000:]
    assert not list(tmp_path.iterdir())
