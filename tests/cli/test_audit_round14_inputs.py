"""Audit round 14 (issue 43), second part: bounded work on hostile inputs (Kineto traces,
gzip headers, links inside a trace folder, NCCL_DEBUG logs, NCCL Inspector JSONL, Flight
Recorder pickles and JSON, archives), option files (YAML 1.1 numbers, aliases of a
large string, files that are no spec), stop signals (during the wait for a locked
database, at a fixed point of a command on a trace path with its own $TMPDIR, and signals
ignored at start under `python -m stepscope`), output streams that fail (a closed pipe,
/dev/full, an ASCII-only stdout), the machine's limits in a process of its own
(RLIMIT_AS, RLIMIT_NOFILE, RLIMIT_FSIZE on the stage folder, RLIMIT_CPU as the bound on
time, a database whose .wal is a FIFO) and Ray addresses where nothing listens. Options,
Ray shapes, databases, outputs and escapes are in test_audit_round14.py; the fixture in
tests/audit14_inputs.py, the check round 12's with the wider set of controls
(audit14_inputs.check14).

Expected outcomes come from README's exit-code table and docs/cli.md; a case the docs do
not settle says "(docs silent)" and expects what a demanding user would.

First run against the merged code (2a8b8cc: main cf46ebc merged; 07:41-07:44 UTC, 258
cases: 175 in test_audit_round14.py, 83 here; 185 s on the shared machine, 79 s of user
CPU): **213 of 258 held (82.6%)** as first written. Of the 45 misses, 29 were the test's
error, corrected and each rerun once (passing):
- the test's own slip (26): test_case's and test_option_case's closing check asserted that
  no case had left `nr14` / `nm14`, so once one case wrote them (below) every later case
  failed that check whatever its own outcome; the check now looks only at what the case
  itself made. Rerun, all 26 held: in test_audit_round14.py the mixed run's `summary`
  text/md/json, `report` md, `diff` md, `whatif --op` text, `whatif --collective` md,
  `export` to stdout, and the messages of `report`/`summary` of an unknown run with U+2028
  / U+2029, `history` of a job with an RLM, `ingest` of a missing path with an LRE,
  `--run` with an RLE / U+2028, an unknown option with U+2028, an unknown command with an
  RLE, `plan --gpu` with an ALM, `whatif --op` with U+2029, `nightly --fail-if` with
  U+2028, `dashboard --traces-root` with U+2029, `report --model` with an LRM, `export
  --out` in a missing folder with MIX, `nightly --baseline` with ESC and MIX (23); here
  `--comm-kernels (a+)+$`, `--comm-kernels` a possessive quantifier, `--comm-kernels` the
  database (3);
- the documented behaviour guessed wrong (2): `nightly --run r14 --out-dir DIR` where
  DIR/r14 is a link out, and `nightly --run` of 1,024 characters: I guessed the reports
  go to DIR/<run>/ (refuse the link, refuse a name too long for a folder); docs/nightly.md
  step 7 says they go to `--out-dir` itself (`./stepscope-nightly/<run>/` is only the
  default), so both write into DIR, exit 0, and nothing is written through the link;
- the test's own slip (1): "plan --from with 10 open files" gave no model spec (exit 2
  before any file was opened: "no model spec"), then the spec of opt14 did not fit the run
  ("FLOPs would run at 189819101% of peak", exit 2); now "plan with 10 open files".
So 258 cases count; the other 16 are defects: **242 of 258 held (93.8%)**. They are
FIRST_RUN_FAILED in each file (xfail, strict, until fixed):
- databases (2): `summary` / `report --db` a stepscope database whose `runs` table was
  dropped exit 1 "database error (CatalogException …)" (docs/cli.md: damaged, exit 2);
- bounded time (1): `summary --db` whose `.wal` is a FIFO hangs (killed at the bound);
- reports (3): `report` json and html, `diff` json write U+2028/U+2029 of names raw while
  escaping the bidi marks beside them (the md and text renderers escape all of them);
- option files (5): `--model` `n_layers: 3_2`, `0x20` (report and nightly) and `1:30`
  accepted as 32, 32 and 90 (YAML 1.1); `n_layers: ~` is "internal error: KeyError";
- hostile inputs (2): a Kineto rank 3 of world_size 2 and Inspector lines without
  `header.n_ranks` are stored (exit 0);
- signals and streams (3): SIGINT in the lock wait prints "interrupted: nothing was
  ingested; DB is unchanged" (docs: "run 'x' … was not ingested; db is unchanged");
  `report PATH` started with SIGINT ignored is interrupted by it (130; docs: stays
  ignored); `summary`/`report` with an ASCII stdout end "internal error:
  UnicodeEncodeError".
Fixed since (plain cases now; all 16): the dropped `runs` table is "a damaged
stepscope database (table(s) runs missing)", exit 2 (ingest/schema.check_tables); a `.wal`
that is not a regular file is refused before DuckDB opens it (ingest/db.py); report/diff
json and html escape U+2028/U+2029 (ingest/errors.TERMINAL_UNSAFE); `--model` YAML numbers
are read by the one grammar of numbers and `~` is a missing field
(analyzers/flops/model_spec.py); a Kineto rank not below its world_size fails its file
(ingest/tasks.py); Inspector lines without header.n_ranks or header.rank fail their file;
Ctrl-C in the lock wait names the run; a stream that cannot encode a name gets backslash
escapes (stepscope/cli.py); a SIGINT ignored at start stays ignored in the ingest's guard
too (ingest/interrupts.py took SIGINT back always).
Held: every option and variable form (signs, blanks, bases, boundaries), every Ray shape
(19) and both addresses where nothing listens, encrypted/foreign/`:memory:`/locked
databases (the holder's pid named), every output spelling of the database or an input,
stop signals at fixed points (temporaries removed), gzip header fields, links inside a
trace folder, Flight Recorder opcodes and limits, archives, machine limits.
The two files run in about 2.5 minutes on the shared machine (the FIFO case bounded at
30 s).
"""

from __future__ import annotations

import importlib.util
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from audit8_inputs import cli, params
from audit14_inputs import MARKER, Case14, build_inputs, check14, raw14
from audit14_inputs import root as root
from conftest import kineto_trace, write_trace

D, R = "{db}", "{root}"
FR = "nccl_trace_rank_8"
INSPECTOR = "node0-pid1.log"


@pytest.fixture(scope="module")
def hostile(root: Path) -> Path:
    """`root` with the hostile inputs of tests/audit14_inputs.build_inputs added."""
    build_inputs(root)
    trace = kineto_trace(rank=0, world_size=1)
    for i in range(5000):
        trace["traceEvents"].append({"ph": "X", "cat": "kernel", "name": "a" * 40 + f"!{i}",
                                     "pid": 0, "tid": 7, "ts": 1000.0 + i * 0.01,
                                     "dur": 0.005, "args": {"device": 0, "stream": 7}})
    write_trace(root / "k14_kernels_aaa" / "rank0.json.gz", trace)
    for r in range(40):
        write_trace(root / "t40" / f"rank{r}.json.gz", kineto_trace(rank=r, world_size=40))
    return root


def _ingest(folder: str, *more: str) -> tuple[str, ...]:
    return ("ingest", f"{R}/{folder}", "--db", f"{R}/in_{folder}.duckdb", "--run", "g",
            "--quiet", *more)


def _fails(folder: str, name: str = "rank0.json", *said: str) -> Case14:
    """The file fails alone: its line names it, then "nothing ingested" (exit 1)."""
    return (_ingest(folder), None, 1, (f"{R}/{folder}/{name}", *said))


def _ok(folder: str) -> Case14:
    return (_ingest(folder), None, 0, ())


FILE_CASES: dict[str, Case14] = {
    # Kineto traces
    "kernel ts 2^70, an integer": _fails("k14_ts_2_70_int"),
    "kernel ts the text nan": _fails("k14_ts_text_nan"),
    "kernel dur the text Infinity": _fails("k14_dur_text_infinity"),
    "distributedInfo.rank 3 of world_size 2 (docs silent)": _fails("k14_rank_past_world"),
    "baseTimeNanoseconds 2^62 - 1, the top of its range": _ok("k14_base_2_62_minus_1"),
    "300,000 flow events": _ok("k14_300k_flows"),
    "50,000 B events that never end": _ok("k14_50k_unmatched_begins"),
    "100,000 top-level keys beside traceEvents": _ok("k14_100k_top_keys"),
    "a .json.gz with a 1 MiB FCOMMENT": _ok("k14_gz_comment_1mib"),
    "a .json.gz with a header CRC (FHCRC)": _ok("k14_gz_fhcrc"),
    "a .json.gz whose ISIZE lies": _fails("k14_gz_isize_lies", "rank0.json.gz"),
    "rank0.json a link to /dev/zero": _fails("k14_link_to_dev_zero"),
    "rank0.json a link to itself (docs silent)": _fails("k14_link_loop"),
    "a folder link to its own folder beside a trace": _ok("k14_folder_link_to_itself"),
    "a broken trace named with a line separator": (
        _ingest("k14_broken_named_ls"), None, 1, (f"{R}/k14_broken_named_ls/",)),
    "a good trace in a folder named with an RLE": _ok("k14_good_folder_rle\u202b"),
    # NCCL_DEBUG logs
    "NCCL log whose comm line straddles the 4 MiB block boundary": _ok("n14_block_boundary"),
    # NCCL Inspector
    "Inspector p2p_sn -4": _fails("i14_p2p_sn_negative", INSPECTOR),
    "Inspector execution time of exactly one day": _ok("i14_exec_one_day"),
    "Inspector execution time one day and 1 us": _fails("i14_exec_over_one_day", INSPECTOR),
    "Inspector lines without header.id": _fails("i14_without_header_id", INSPECTOR,
                                                "header.id"),
    "Inspector lines without header.n_ranks": _fails("i14_without_n_ranks", INSPECTOR),
    "Inspector lines without coll_perf.coll": _fails("i14_without_coll", INSPECTOR),
    "Inspector lines of two communicators": _ok("i14_two_comms"),
    # Flight Recorder
    "FR collective_seq_id 2^64": _fails("fr14_seq_2_64", FR),
    "FR timeout_ms 1e20": _fails("fr14_timeout_1e20", FR),
    "FR collective_seq_id 1.5": _fails("fr14_seq_half", FR),
    "FR pickle BINBYTES8 of 2^62 declared": _fails("fr14_binbytes8_2_62", FR),
    "FR pickle SHORT_BINUNICODE not UTF-8": _fails("fr14_unicode_not_utf8", FR),
    "FR pickle DUP of an empty stack": _fails("fr14_dup_empty", FR),
    "FR pickle POP_MARK without a mark": _fails("fr14_pop_mark_no_mark", FR),
    "FR pickle BUILD on a dict": _fails("fr14_build_on_dict", FR),
    "FR JSON dump nested 100,000 deep": _fails("fr14_json_deep", FR),
    "FR JSON dump of 65 MiB": _fails("fr14_json_65mib", FR),
    # archives
    "tar member with mtime 2^60 and the largest uid": _ok("a14_tar_odd_mtime"),
    "tar.gz of two gzip members": _ok("a14_tgz_two_members"),
    "zip whose local name differs from its directory's": _fails("a14_zip_names_differ",
                                                                "run.zip"),
    "zip written to a stream (data descriptors)": _ok("a14_zip_streamed"),
}

# (docs silent) either read (0) or failed alone (1): one line, no traceback
EITHER_CASES: dict[str, Case14] = {
    "ProfilerStep# of 25 digits": _fails("k14_step_25_digits"),
    "tar member under a GNU long name of 1 MiB": _fails("a14_tar_gnu_longname_1mib",
                                                        "run.tar"),
}

OTHER_CASES: dict[str, Case14] = {
    "report PATH of an NCCL log with MIX in its host and version": (
        ("report", f"{R}/n14_host_mix", "--db", f"{R}/r14h.duckdb"), None, 0, ()),
    "hang md of dumps with MIX in group and op names": (
        ("hang", f"{R}/fr14_pg_mix", "--db", f"{R}/h14m.duckdb"), None, 0, ()),
    "hang json of dumps with MIX in group and op names": (
        ("hang", f"{R}/fr14_pg_mix", "--db", f"{R}/h14j.duckdb", "--format", "json"), None,
        0, ()),
}

MODEL = ("report", "base", "--db", D, "--model")
CK = ("ingest", "{t}", "--db", f"{R}/ck14.duckdb", "--run", "c", "--quiet", "--comm-kernels")


def _opt(argv: tuple[str, ...], path: str, rc: int = 2) -> Case14:
    return ((*argv, f"{R}/opt14/{path}"), None, rc, () if rc == 0 else (f"{R}/opt14/{path}",))


OPTION_CASES: dict[str, Case14] = {
    "--model YAML with CRLF line ends": _opt(MODEL, "model_crlf.yaml", 0),
    "--model YAML with a UTF-8 BOM (docs silent; YAML allows one)": _opt(MODEL,
                                                                        "model_bom.yaml", 0),
    "--model n_layers 3_2 (docs silent)": _opt(MODEL, "layers_underscore.yaml"),
    "--model n_layers 0x20": _opt(MODEL, "layers_hex.yaml"),
    "--model n_layers 1:30, YAML 1.1's base 60": _opt(MODEL, "layers_sexagesimal.yaml"),
    "--model n_layers ~": _opt(MODEL, "layers_null.yaml"),
    "--model n_layers [32]": _opt(MODEL, "layers_list.yaml"),
    "--model 400,000 comment lines": _opt(MODEL, "comments.yaml"),
    "--model a JSON number": _opt(MODEL, "number.json"),
    "--model a 1 MiB string through 1,000 aliases": _opt(MODEL, "alias_strings.yaml"),
    "--model the database": ((*MODEL, D), None, 2, (D,)),
    "diff --model YAML with CRLF line ends": _opt(("diff", "base", "other", "--db", D,
                                                   "--model"), "model_crlf.yaml", 0),
    "nightly --model n_layers 0x20": _opt(("nightly", "{t}", "--db", f"{R}/nm14.duckdb",
                                           "--job", "j", "--out-dir", f"{R}/nm14", "--model"),
                                          "layers_hex.yaml"),
    "--comm-kernels (a+)+$ (RE2 is linear)": _opt(CK, "ck_backtrack.json", 0),
    "--comm-kernels a possessive quantifier": _opt(CK, "ck_possessive.json"),
    "--comm-kernels the database": ((*CK, D), None, 2, (D,)),
}

FIRST_RUN_FAILED: dict[str, str] = {
}


@pytest.mark.parametrize("name", params(FILE_CASES, FIRST_RUN_FAILED))
def test_file_case(hostile: Path, name: str, tmp_path: Path,
                   monkeypatch: pytest.MonkeyPatch) -> None:
    case = FILE_CASES[name]
    check14(hostile, case, tmp_path, monkeypatch, file_case=case[2] == 1)
    assert not MARKER.exists()


@pytest.mark.parametrize("name", params(EITHER_CASES, FIRST_RUN_FAILED))
def test_either_case(hostile: Path, name: str, tmp_path: Path,
                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Read, or failed alone with its one line and "nothing ingested": never a traceback,
    a raw control or a follow-on line."""
    argv, env, _, said = EITHER_CASES[name]
    try:
        check14(hostile, (argv, env, 0, ()), tmp_path, monkeypatch)
    except AssertionError:
        check14(hostile, (argv, env, 1, said), tmp_path, monkeypatch, file_case=True)


@pytest.mark.parametrize("name", params(OTHER_CASES, FIRST_RUN_FAILED))
def test_other_case(hostile: Path, name: str, tmp_path: Path,
                    monkeypatch: pytest.MonkeyPatch) -> None:
    check14(hostile, OTHER_CASES[name], tmp_path, monkeypatch)


@pytest.mark.parametrize("name", params(OPTION_CASES, FIRST_RUN_FAILED))
def test_option_case(hostile: Path, name: str, tmp_path: Path,
                     monkeypatch: pytest.MonkeyPatch) -> None:
    existed = (hostile / "nm14").exists()  # another case's doing
    check14(hostile, OPTION_CASES[name], tmp_path, monkeypatch)
    assert existed or not (hostile / "nm14").exists()


@pytest.mark.parametrize("name", params({"report json of Inspector bandwidths of 1e308": ()},
                                        FIRST_RUN_FAILED))
def test_no_infinity_in_json(hostile: Path, name: str, tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Inspector bus and algorithm bandwidths of 1e308 GB/s are finite, so they may be
    stored; the report's JSON then never holds Infinity or NaN (docs/cli.md: "JSON output
    never contains NaN or Infinity")."""
    _, _, out = check14(hostile, (("report", f"{R}/i14_busbw_1e308", "--db",
                                   f"{R}/r14b.duckdb", "--format", "json"), None, 0, ()),
                        tmp_path, monkeypatch)
    assert "Infinity" not in out and "NaN" not in out


# ---------------------------------------------------------------- signals


@pytest.fixture(scope="module")
def holder(hostile: Path) -> Iterator[int]:
    """Another process holding root/db14/locked14.duckdb open for writing: its pid."""
    db = hostile / "db14" / "locked14.duckdb"
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


HUP, TERM, INT = "interrupted by SIGHUP", "interrupted by SIGTERM", "interrupted"
WAIT_CASES = {
    "ingest SIGINT while it waits for the locked db": (
        ("ingest", "{t}", "--run", "w14", "--quiet"), signal.SIGINT, 130,
        "interrupted: run 'w14' was not ingested"),
    "nightly SIGTERM while it waits for the locked db": (
        ("nightly", "{t}", "--job", "w14", "--run", "w14n", "--out-dir", "{root}/w14n"),
        signal.SIGTERM, 143, TERM),
    "ingest SIGHUP while it waits for the locked db": (
        ("ingest", "{t}", "--run", "w14h", "--quiet"), signal.SIGHUP, 129, HUP),
}


class _NoHandler(Exception):
    pass


def _fallback(signum: int, frame: object) -> None:
    raise _NoHandler(f"signal {signum} reached the test's own handler")


@pytest.mark.interrupt
@pytest.mark.parametrize("name", params(WAIT_CASES, FIRST_RUN_FAILED))
def test_signal_during_lock_wait(hostile: Path, holder: int, name: str, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer waiting for a database another process holds ($STEPSCOPE_LOCK_WAIT 30)
    gets a stop signal 2 s in: docs/schema.md "Concurrency": the wait ends at the next
    poll with 130/143/129, one line, the database unchanged; nothing written."""
    argv, sig, code, line = WAIT_CASES[name]
    db = hostile / "db14" / "locked14.duckdb"
    full = tuple(a.format(t=hostile / "t", root=hostile) for a in argv) + ("--db", str(db))
    monkeypatch.chdir(tmp_path)
    saved = signal.signal(sig, _fallback)  # replaced by the command's own, if it has one
    timer = threading.Timer(2.0, os.kill, (os.getpid(), sig))
    timer.start()
    try:
        rc, err, out = cli(full, {"STEPSCOPE_LOCK_WAIT": "30"})
    finally:
        timer.cancel()
        signal.signal(sig, saved)
    errors = [x for x in err if not x.startswith(("note:", "warning:"))]
    assert rc == code and len(errors) == 1 and errors[0].startswith(line), (rc, err)
    assert not raw14("\n".join(err)) and not raw14(out)
    assert not (hostile / "w14n").exists() and not list(tmp_path.iterdir())


WRAP = ("import importlib, os, sys\n"
        "m = importlib.import_module('stepscope.commands.' + sys.argv[1])\n"
        "def hit(*a, **k):\n"
        "    os.kill(os.getpid(), int(sys.argv[3]))\n"
        "    raise AssertionError('no signal')\n"
        "setattr(m, sys.argv[2], hit)\n"
        "from stepscope.cli import main\n"
        "sys.exit(main(sys.argv[4:]))\n")
POINT_CASES = {
    "report PATH SIGTERM while writing": ("report_cmd", "emit", (
        "report", "{root}/t", "--db", "{root}/sp14a.duckdb", "--out", "{root}/sp14a.md"),
        signal.SIGTERM, 143, TERM),
    "diff PATH PATH SIGINT while writing": ("diff_cmd", "emit", (
        "diff", "{root}/t", "{root}/t2", "--db", "{root}/sp14b.duckdb", "--out",
        "{root}/sp14b.md"), signal.SIGINT, 130, INT),
    "whatif PATH SIGHUP in the replay": ("whatif_cmd", "what_if", (
        "whatif", "{root}/t", "--db", "{root}/sp14c.duckdb", "--rank", "0"),
        signal.SIGHUP, 129, HUP),
    "export PATH SIGTERM while exporting": ("export_cmd", "export_chrome", (
        "export", "{root}/t", "--db", "{root}/sp14d.duckdb", "--out", "{root}/sp14d.json"),
        signal.SIGTERM, 143, TERM),
    "hang PATH SIGINT while building": ("hang_cmd", "build_hang_report", (
        "hang", "{root}/fr14_pg_mix", "--db", "{root}/sp14e.duckdb", "--out",
        "{root}/sp14e.md"), signal.SIGINT, 130, INT),
}


@pytest.mark.interrupt
@pytest.mark.parametrize("name", params(POINT_CASES, FIRST_RUN_FAILED))
def test_signal_at_a_point_removes_temporaries(hostile: Path, name: str,
                                               tmp_path: Path) -> None:
    """A stop signal at a fixed point of a command on a trace path, in a process of its own
    with a private $TMPDIR: 128 + its number, one line as docs/cli.md says, no output file,
    and "every temporary folder is removed" (docs/cli.md "Exit codes")."""
    module, attr, argv, sig, code, line = POINT_CASES[name]
    tmp, cwd = tmp_path / "tmp", tmp_path / "cwd"
    tmp.mkdir()
    cwd.mkdir()
    full = [a.format(root=hostile) for a in argv]
    proc = subprocess.run([sys.executable, "-c", WRAP, module, attr, str(int(sig)), *full],
                          cwd=cwd, capture_output=True, text=True, timeout=240,
                          env={**os.environ, "TMPDIR": str(tmp)}, check=False)
    err = [x for x in proc.stderr.splitlines() if not x.startswith(("note:", "warning:"))]
    assert proc.returncode == code and len(err) == 1 and err[0].startswith(line), \
        (proc.returncode, proc.stderr[-2000:])
    assert not list(tmp.iterdir()) and not list(cwd.iterdir()), list(tmp.iterdir())
    assert not any(Path(a).exists() for a in full if a.endswith((".md", ".json")))


IGNORED_CASES = {
    "ingest with SIGTERM ignored at start, then SIGTERM": (
        ("ingest", "{root}/t2", "--db", "{root}/ig14a.duckdb", "--run", "ig"), signal.SIGTERM),
    "report PATH with SIGINT ignored at start, then SIGINT": (
        ("report", "{root}/t2", "--db", "{root}/ig14b.duckdb"), signal.SIGINT),
    "export PATH with SIGHUP ignored at start, then SIGHUP": (
        ("export", "{root}/t2", "--db", "{root}/ig14c.duckdb", "--out", "{root}/ig14c.json"),
        signal.SIGHUP),
}


@pytest.mark.interrupt
@pytest.mark.parametrize("name", params(IGNORED_CASES, FIRST_RUN_FAILED))
def test_signal_ignored_at_start(hostile: Path, name: str, tmp_path: Path) -> None:
    """`python -m stepscope` started with a stop signal ignored (as nohup does for SIGHUP
    and a shell for a background job's SIGINT), sent that signal every 0.2 s until it ends:
    docs/cli.md "a signal ignored at start, as under nohup, stays ignored": exit 0."""
    argv, sig = IGNORED_CASES[name]
    full = [a.format(root=hostile) for a in argv]

    def ignore() -> None:
        signal.signal(sig, signal.SIG_IGN)

    with open(hostile / f"ig14_{int(sig)}.err", "w+") as log:
        proc = subprocess.Popen([sys.executable, "-P", "-m", "stepscope", *full],
                                cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=log,
                                preexec_fn=ignore)
        deadline = time.monotonic() + 240
        while proc.poll() is None and time.monotonic() < deadline:
            os.kill(proc.pid, sig)
            time.sleep(0.2)
        proc.wait(timeout=30)
        log.seek(0)
        err = log.read()
    assert proc.returncode == 0, (proc.returncode, err[-2000:])
    assert "Traceback" not in err and not list(tmp_path.iterdir())


# ---------------------------------------------------------------- streams and the machine


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None,
         limits: tuple[tuple[int, int], ...] = (), stdout: object = subprocess.PIPE,
         timeout: int = 240) -> tuple[int, list[str], str]:
    """`python -m stepscope` in a process of its own, with `env` added and the limits set."""
    def preexec() -> None:
        for kind, value in limits:
            resource.setrlimit(kind, (value, value))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    proc = subprocess.run([sys.executable, "-P", "-m", "stepscope", *argv], cwd=cwd,
                          stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=timeout,
                          preexec_fn=preexec, env={**os.environ, **(env or {})}, check=False)
    return proc.returncode, proc.stderr.splitlines(), proc.stdout or ""


def _one_line(rc: int, err: list[str], codes: tuple[int, ...], *said: str) -> None:
    errors = [x for x in err if not x.startswith(("warning:", "note:", "export:", "wrote "))]
    assert not any("Traceback" in x or "internal error" in x or "Exception ignored" in x
                   for x in err), err[-6:]
    assert not raw14("\n".join(err))
    assert rc in codes, (rc, err[-6:])
    if rc != 0:
        assert len(errors) == 1 and errors[0].startswith("error: "), err[-6:]
        assert all(s in errors[0] for s in said), (said, errors)
        assert "could not be stored" not in errors[0], errors


def test_report_into_a_closed_pipe(hostile: Path, tmp_path: Path) -> None:
    """`report --format json` whose reader has gone (docs silent): no traceback, no
    "Exception ignored ... BrokenPipeError" at exit; at most one line."""
    proc = subprocess.Popen([sys.executable, "-P", "-m", "stepscope", "report", "base",
                             "--db", str(hostile / "db.duckdb"), "--format", "json"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.close()
    _, err = proc.communicate(timeout=240)
    text = err.decode(errors="replace")
    assert "Traceback" not in text and "Exception ignored" not in text, text[-2000:]
    assert len([x for x in text.splitlines() if not x.startswith("note:")]) <= 1, text


def test_report_to_a_full_stdout(hostile: Path, tmp_path: Path) -> None:
    """`report` with stdout on /dev/full (docs silent; as `--out /dev/full`: "could not
    write (No space left on device)", exit 1): one line, exit 1."""
    with open("/dev/full", "w") as full:
        rc, err, _ = _run(["report", "base", "--db", str(hostile / "db.duckdb")], tmp_path,
                          stdout=full)
    _one_line(rc, err, (1,))


@pytest.mark.parametrize("name", params(
    {"summary and report of mixed names to an ASCII stdout": ()}, FIRST_RUN_FAILED))
def test_summary_of_mixed_names_to_an_ascii_stdout(hostile: Path, name: str,
                                                   tmp_path: Path) -> None:
    """`summary` and `report` of the run whose names hold é, bidi marks and line
    separators, with PYTHONIOENCODING=ascii (docs silent): no UnicodeEncodeError."""
    for argv in (["summary", "esc14"], ["report", "esc14"]):
        rc, err, out = _run([*argv, "--db", str(hostile / "db.duckdb")], tmp_path,
                            env={"PYTHONIOENCODING": "ascii", "LANG": "C", "LC_ALL": "C"})
        _one_line(rc, err, (0,))
        assert not raw14(out)


AS = resource.RLIMIT_AS
PROCESS_CASES: dict[str, tuple[list[str], tuple[tuple[int, int], ...], tuple[int, ...],
                               tuple[str, ...]]] = {
    "diff in 600 MB of address space": (
        ["diff", "base", "other", "--db", "{db}"], ((AS, 600 << 20),), (0, 1), ()),
    "export in 600 MB of address space": (
        ["export", "base", "--db", "{db}", "--out", "{root}/pm14a.json"], ((AS, 600 << 20),),
        (0, 1), ()),
    # corrected: as first written `plan --from base` (no model spec beside the run) was a
    # usage error before any file was opened; the planner alone is what this case tries
    "plan with 10 open files": (
        ["plan", "--params", "7e9", "--gpus", "8", "--gpu", "H100", "--seq", "4096",
         "--out", "{root}/pm14p.md"], ((resource.RLIMIT_NOFILE, 10),), (0, 1), ()),
    "ingest of 40 files with 16 open files": (
        ["ingest", "{root}/t40", "--db", "{root}/pm14b.duckdb", "--quiet"],
        ((resource.RLIMIT_NOFILE, 16),), (0, 1), ()),
    "ingest --stage-dir past the file size limit": (
        ["ingest", "{root}/t", "--db", "{root}/pm14c.duckdb", "--quiet", "--jobs", "2",
         "--stage-dir", "{root}/stage14"], ((resource.RLIMIT_FSIZE, 4096),), (1,), ()),
    "ingest --comm-kernels (a+)+$ over 5,000 kernels of a's, in 60 s of CPU": (
        ["ingest", "{root}/k14_kernels_aaa", "--db", "{root}/pm14d.duckdb", "--quiet",
         "--comm-kernels", "{root}/opt14/ck_backtrack.json"],
        ((resource.RLIMIT_CPU, 60),), (0,), ()),
    "summary of a db whose .wal is a FIFO, in 60 s of CPU (docs silent)": (
        ["summary", "--db", "{root}/db14/wal_fifo.duckdb"], ((resource.RLIMIT_CPU, 60),), (2,),
        ("wal_fifo.duckdb",)),
}


@pytest.mark.parametrize("name", params(PROCESS_CASES, FIRST_RUN_FAILED))
def test_process_case(hostile: Path, name: str, tmp_path: Path) -> None:
    """The machine's limits in a process of their own: an exit code the docs allow, a
    failure one line (never a file's "could not be stored", never partial), no traceback
    or MemoryError, nothing left in the current folder, no hang (a 90 s bound)."""
    argv, limits, codes, said = PROCESS_CASES[name]
    (hostile / "stage14").mkdir(exist_ok=True)
    full = [a.format(root=hostile, db=hostile / "db.duckdb") for a in argv]
    rc, err, _ = _run(full, tmp_path, limits=limits, timeout=30 if "FIFO" in name else 90)
    _one_line(rc, err, codes, *[s.format(root=hostile) for s in said])
    assert not list(tmp_path.iterdir())
    if rc == 1 and "NOFILE" not in name:
        assert not any("MemoryError" in x for x in err)


RAY_CASES = {
    "ingest --executor ray:127.0.0.1:1 where nothing listens": ("ray:127.0.0.1:1", "ray14a"),
    "ingest --executor ray://127.0.0.1:1 where nothing listens": ("ray://127.0.0.1:1",
                                                                  "ray14b"),
}


@pytest.mark.ray
@pytest.mark.parametrize("name", params(RAY_CASES, FIRST_RUN_FAILED))
def test_ray_address_where_nothing_listens(hostile: Path, name: str, tmp_path: Path) -> None:
    """docs/scale.md: "one nothing listens on fails within 10 s, naming it ... any failure
    of Ray's start is one line naming the address": one line naming it, exit 1 or 2 (docs
    silent on which), no traceback, no run committed (a 120 s bound on the whole)."""
    if importlib.util.find_spec("ray") is None:
        pytest.skip("ray is not installed")
    address, stem = RAY_CASES[name]
    db = hostile / f"{stem}.duckdb"
    rc, err, _ = _run(["ingest", str(hostile / "t"), "--db", str(db), "--run", "r",
                       "--executor", address], tmp_path, timeout=120)
    _one_line(rc, err, (1, 2), "127.0.0.1:1")
    if db.exists():
        assert cli(("summary", "r", "--db", str(db)))[0] == 2
    assert not list(tmp_path.iterdir())

