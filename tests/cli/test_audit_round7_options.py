"""Audit round 7 (issue 43), continued: terminal escapes in every printed name, every
option and $STEPSCOPE_* variable, Ray addresses, foreign, corrupt and swapped databases.
The fixtures and the check are in tests/audit7_inputs.py; the round's first-run count is
in test_audit_round7.py's docstring, this file's failures of that run in FIRST_RUN_FAILED.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from audit7_inputs import ESC, NIGHT, PLAN, RAY, Case, D, T, check_case, params
from audit7_inputs import root as root  # the module's fixture

CASES: dict[str, Case] = {
    # ---- terminal escapes in every printed name
    "unknown command with ESC": ((f"x{ESC}",), None, 2, "error: stepscope: argument COMMAND: "
                                 "invalid choice: 'x\\x1b[2J'"),
    "unknown option with ESC": (("summary", "--db", D, f"--x{ESC}"), None, 2,
                                "error: stepscope: unrecognized arguments: --x\\x1b[2J"),
    "--format with ESC": (("summary", "--db", D, "--format", f"j{ESC}"), None, 2,
                          "error: stepscope summary: argument --format: invalid choice: "
                          "'j\\x1b[2J'"),
    "plan --gpu with ESC": ((*PLAN[:6], f"H{ESC}", *PLAN[7:]), None, 2,
                            "error: --gpu H\\x1b[2J: not in the peak table"),
    "whatif --op with OSC": (("whatif", "base", "--db", D, "--op", "x\x1b]0;t\x07",
                              "--speedup", "2"), None, 2,
                             "error: no kernel or launching op matches 'x\\x1b]0;t\\x07'"),
    "nightly --fail-if metric with ESC": ((*NIGHT, "--fail-if", f"mfu{ESC} < 3"), None, 2,
                                          "error: --fail-if 'mfu\\x1b[2J < 3': expected "
                                          "'<metric> <op> <number>'"),
    "nightly --baseline with ESC": ((*NIGHT, "--baseline", f"x{ESC}"), None, 2,
                                    "error: --baseline 'x\\x1b[2J': no such run in {db}"),
    "$STEPSCOPE_MEMORY_LIMIT with ESC": (("summary", "--db", D),
                                         {"STEPSCOPE_MEMORY_LIMIT": f"1{ESC}GB"}, 2,
                                         "error: cannot open the database with "
                                         "$STEPSCOPE_MEMORY_LIMIT='1\\x1b[2JGB'"),
    "$STEPSCOPE_LOCK_WAIT with ESC": (("ingest", T, "--db", D, "--run", "w", "--quiet"),
                                      {"STEPSCOPE_LOCK_WAIT": ESC}, 2,
                                      "error: $STEPSCOPE_LOCK_WAIT="),
    "$STEPSCOPE_JOBS with ESC": (("ingest", T, "--db", D, "--run", "w", "--quiet"),
                                 {"STEPSCOPE_JOBS": ESC}, 2,
                                 "error: $STEPSCOPE_JOBS='\\x1b[2J': expected a whole number"),
    "$STEPSCOPE_MAX_TRACE_SIZE with ESC": (("ingest", T, "--db", D, "--run", "w", "--quiet"),
                                           {"STEPSCOPE_MAX_TRACE_SIZE": ESC}, 2,
                                           "error: STEPSCOPE_MAX_TRACE_SIZE '\\x1b[2J': not "
                                           "a size"),
    "--db with ESC, missing": (("report", "base", "--db", f"{{root}}/x{ESC}.duckdb"), None, 2,
                               "error: {root}/x\\x1b[2J.duckdb: no stepscope database"),
    "summary of a run named with ESC": (("summary", f"r{ESC}", "--db", D), None, 2,
                                        "error: {db}: no run named 'r\\x1b[2J'"),
    "--dtype a bidi override": (("report", "base", "--db", D, "--dtype", "\u202e"), None, 2,
                                "error: stepscope report: argument --dtype: invalid choice: "
                                "'\\u202e'"),
    "file: NCCL log host with ESC": (("report", "{root}/ncclhost"), None, 1,
                                     "error: {root}/ncclhost/nccl.log: no NCCL_DEBUG line"),
    "report of a device named with ESC": (("report", "{root}/devesc"), None, 0, ""),
    "report of a host named with ESC": (("report", "{root}/hostesc"), None, 0, ""),
    # ---- options and environment variables
    "$STEPSCOPE_MAX_TRACE_SIZE abc": (("ingest", T, "--db", D, "--run", "w", "--quiet"),
                                      {"STEPSCOPE_MAX_TRACE_SIZE": "abc"}, 2,
                                      "error: STEPSCOPE_MAX_TRACE_SIZE 'abc': not a size"),
    "$STEPSCOPE_MAX_TRACE_SIZE 0": (("ingest", T, "--db", D, "--run", "w", "--quiet"),
                                    {"STEPSCOPE_MAX_TRACE_SIZE": "0"}, 2,
                                    "error: STEPSCOPE_MAX_TRACE_SIZE '0': must be between"),
    "$STEPSCOPE_MAX_TRACE_SIZE in Arabic-Indic digits": (
        ("ingest", T, "--db", D, "--run", "w", "--quiet"),
        {"STEPSCOPE_MAX_TRACE_SIZE": "\u0663G"}, 2,
        "error: STEPSCOPE_MAX_TRACE_SIZE '\u0663G': not a size"),
    "$STEPSCOPE_LOCK_WAIT in Arabic-Indic digits": (
        ("ingest", T, "--db", D, "--run", "w", "--quiet"), {"STEPSCOPE_LOCK_WAIT": "\u0663"},
        2, "error: $STEPSCOPE_LOCK_WAIT=\u0663: not a number of seconds"),
    "$STEPSCOPE_LOCK_WAIT 1e400": (("ingest", T, "--db", D, "--run", "w", "--quiet"),
                                   {"STEPSCOPE_LOCK_WAIT": "1e400"}, 2,
                                   "error: $STEPSCOPE_LOCK_WAIT=1e400"),
    "$STEPSCOPE_LOCK_WAIT 1_0": (("ingest", T, "--db", D, "--run", "w", "--quiet"),
                                 {"STEPSCOPE_LOCK_WAIT": "1_0"}, 2,
                                 "error: $STEPSCOPE_LOCK_WAIT=1_0: not a number of seconds"),
    "$STEPSCOPE_MEMORY_LIMIT in Arabic-Indic digits": (
        ("summary", "--db", D), {"STEPSCOPE_MEMORY_LIMIT": "\u0663GB"}, 2,
        "error: cannot open the database with $STEPSCOPE_MEMORY_LIMIT="),
    "$STEPSCOPE_JOBS 3.0": (("ingest", T, "--db", D, "--run", "w", "--quiet"),
                            {"STEPSCOPE_JOBS": "3.0"}, 2,
                            "error: $STEPSCOPE_JOBS='3.0': expected a whole number"),
    "$STEPSCOPE_JOBS 1025": (("ingest", T, "--db", D, "--run", "w", "--quiet"),
                             {"STEPSCOPE_JOBS": "1025"}, 2,
                             "error: $STEPSCOPE_JOBS='1025': expected a whole number"),
    "--max-trace-size 1_0G": (("ingest", T, "--db", D, "--max-trace-size", "1_0G"), None, 2,
                              "error: stepscope ingest: argument --max-trace-size: '1_0G': not a "
                              "size; write it like 8G, 500M"),
    "--max-trace-size in Arabic-Indic digits": (("ingest", T, "--db", D, "--max-trace-size",
                                                 "\u0663G"), None, 2,
                                                "error: stepscope ingest: argument "
                                                "--max-trace-size: '٣G': not a size; write it "
                                                "like 8G, 500M"),
    "--peak-tflops 1_000": (("report", "base", "--db", D, "--peak-tflops", "1_000"), None, 2,
                            "error: stepscope report: argument --peak-tflops: not a number: "
                            "'1_000' (see --help)"),
    "--peak-tflops in Arabic-Indic digits": (("report", "base", "--db", D, "--peak-tflops",
                                              "\u0663"), None, 2,
                                             "error: stepscope report: argument --peak-tflops: "
                                             "not a number: '٣' (see --help)"),
    "whatif --speedup 1_5": (("whatif", "base", "--db", D, "--rank", "0", "--speedup",
                              "1_5"), None, 2, "error: stepscope whatif: argument --speedup: not "
                                               "a number: '1_5' (see --help)"),
    "whatif --speedup in Arabic-Indic digits": (("whatif", "base", "--db", D, "--rank", "0",
                                                 "--speedup", "\u0663"), None, 2,
                                                "error: stepscope whatif: argument --speedup: not "
                                                "a number: '٣' (see --help)"),
    "plan --efficiency in Arabic-Indic digits": ((*PLAN, "--efficiency", "\u0660.\u0665"),
                                                 None, 2, "error: stepscope plan: argument "
                                                          "--efficiency: not a number: '٠.٥' (see "
                                                          "--help)"),
    "plan --network-gbs 1_00": ((*PLAN, "--network-gbs", "1_00"), None, 2,
                                "error: stepscope plan: argument --network-gbs: not a number: "
                                "'1_00' (see --help)"),
    "plan --zero 4": ((*PLAN, "--zero", "4"), None, 2, "error: stepscope plan: argument --zero: "
                                                       "'4' is out of range: must be from 0 to 3 "
                                                       "(see --help)"),
    "plan --tp 0": ((*PLAN, "--tp", "0"), None, 2, "error: stepscope plan: argument --tp: '0' is "
                                                   "out of range: must be from 1 to 1048576 (see"),
    "plan --pp -1": ((*PLAN, "--pp", "-1"), None, 2, "error: stepscope plan: argument --pp: '-1' "
                                                     "is out of range: must be from 1 to 1048576 "
                                                     "(see"),
    "plan --micro-batches 0": ((*PLAN, "--micro-batches", "0"), None, 2,
                               "error: stepscope plan: argument --micro-batches: '0' is out of "
                               "range: must be from 1 to"),
    "plan --gpus-per-node 0": ((*PLAN, "--gpus-per-node", "0"), None, 2,
                               "error: stepscope plan: argument --gpus-per-node: '0' is out of "
                               "range: must be from 1 to 1024"),
    "plan --global-batch-tokens 0": ((*PLAN, "--global-batch-tokens", "0"), None, 2,
                                     "error: stepscope plan: argument --global-batch-tokens: '0' "
                                     "is out of range: must be from 1 to"),
    "plan --layers in Arabic-Indic digits": ((*PLAN, "--layers", "\u0663"), None, 2,
                                             "error: stepscope plan: argument --layers: not a "
                                             "whole number: '٣' (see --help)"),
    "plan --heads 0": ((*PLAN, "--heads", "0"), None, 2,
                       "error: stepscope plan: argument --heads: '0' is out of range: must be "
                       "from 1 to 65536 (see"),
    "plan --hidden 1e400": ((*PLAN, "--hidden", "1e400"), None, 2,
                            "error: stepscope plan: argument --hidden: not a whole number: "
                            "'1e400' (see --help)"),
    "plan --from an unknown run": (("plan", "--from", "nope", "--db", D, "--gpus", "8"), None,
                                   2, "error: {db}: no run named 'nope'"),
    "plan --tp without --from": ((*PLAN, "--tp", "3"), None, 2,
                                 "error: plan: --tp needs --from RUN"),
    "plan --params 1e30": (("plan", "--params", "1e30", *PLAN[3:]), None, 2,
                           "error: stepscope plan: argument --params: '1e30' is out of range"),
    "history --last in Arabic-Indic digits": (("history", "j", "--db", D, "--last", "\u0661"),
                                              None, 2, "error: stepscope history: argument "
                                                       "--last: not a whole number: '١' (see "
                                                       "--help)"),
    "history --format bogus": (("history", "j", "--db", D, "--format", "x"), None, 2,
                               "error: stepscope history: argument --format: invalid choice"),
    "nightly --keep in Arabic-Indic digits": ((*NIGHT, "--keep", "\u0661"), None, 2,
                                              "error: stepscope nightly: argument --keep: not a "
                                              "whole number: '١' (see --help)"),
    "nightly --fail-if 1_0": ((*NIGHT, "--fail-if", "mfu.mfu < 1_0"), None, 2,
                              "error: --fail-if 'mfu.mfu < 1_0': expected"),
    "nightly --fail-if 1e400": ((*NIGHT, "--fail-if", "mfu.mfu < 1e400"), None, 2,
                                "error: --fail-if 'mfu.mfu < 1e400': the threshold 1e400 is not a "
                                "finite number (it overflows a"),
    "export --format bogus": (("export", "base", "--db", D, "--out", "{root}/e.json",
                               "--format", "x"), None, 2,
                              "error: stepscope export: argument --format: invalid choice"),
    "export --ranks backwards": (("export", "base", "--db", D, "--out", "{root}/e.json",
                                  "--ranks", "5-3"), None, 2, "error: --ranks '5-3': the range "
                                                              "'5-3' runs backwards"),
    "export --ranks with ESC": (("export", "base", "--db", D, "--out", "{root}/e.json",
                                 "--ranks", f"0{ESC}"), None, 2,
                                "error: --ranks '0\\x1b[2J': '0\\x1b[2J' is not a rank or a range "
                                "like 0-63"),
    "export --ranks 0-2000000000": (("export", "base", "--db", D, "--out", "{root}/e.json",
                                     "--ranks", "0-2000000000"), None, 0, ""),
    "ingest --ranks 0-2147483647": (("ingest", T, "--db", D, "--run", "rr", "--ranks",
                                     "0-2147483647", "--quiet"), None, 0, ""),
    "whatif --rank 0-2000000000": (("whatif", "base", "--db", D, "--rank", "0-2000000000"),
                                   None, 2, "error: stepscope whatif: argument --rank: not a rank "
                                            "or comma-separated ranks: '0-2000000000'"),
    "whatif --rank and --op": (("whatif", "base", "--db", D, "--rank", "0", "--op", "x"), None,
                               2, "error: stepscope whatif: argument --op: not allowed with "
                               "argument --rank"),
    "whatif with no question": (("whatif", "base", "--db", D), None, 2,
                                "error: stepscope whatif: one of the arguments"),
    "summary --format bogus": (("summary", "--db", D, "--format", "x"), None, 2,
                               "error: stepscope summary: argument --format: invalid choice"),
    "ingest --ranks 0,,1": (("ingest", T, "--db", D, "--run", "r", "--ranks", "0,,1"), None,
                            2, "error: stepscope ingest: argument --ranks: give ranks and ranges "
                               "like 0-63,512 (see --help)"),
    "ingest --ranks -1": (("ingest", T, "--db", D, "--run", "r", "--ranks=-1"), None, 2,
                          "error: stepscope ingest: argument --ranks: '-1' is not a rank or a "
                          "range like 0-63 (see --help)"),
    "--executor RAY in capitals": (("ingest", T, "--db", D, "--executor", "RAY"), None, 2,
                                   "error: stepscope ingest: argument --executor: choose auto, "
                                   "inline, process, ray or"),
    "ray address with an extra colon": (("ingest", T, "--db", D, "--executor",
                                         "ray:127.0.0.1:1:2"), None, 2, RAY),
    "ray IPv4 in brackets": (("ingest", T, "--db", D, "--executor", "ray:[127.0.0.1]:1"),
                             None, 2, "error: --executor: cannot reach a Ray cluster at "
                                      "[127.0.0.1]:1 (Connection refused); is it"),
    "ray unclosed bracket": (("ingest", T, "--db", D, "--executor", "ray:[::1:1"), None, 2,
                             RAY),
    "ray trailing space": (("ingest", T, "--db", D, "--executor", "ray:h:1 "), None, 2,
                           "error: stepscope ingest: argument --executor: give the Ray cluster's "
                           "address as ray:HOST:PORT"),
    # Refused by its shape since (no DNS lookup of '-h'); so is a label ending with a
    # hyphen.
    "ray host starting with a hyphen": (("ingest", T, "--db", D, "--executor", "ray:-h:1"),
                                        None, 2, "error: stepscope ingest: argument --executor: "
                                                 "give the Ray cluster's address as ray:HOST:PORT"),
    "ray client host ending a label with a hyphen": (
        ("ingest", T, "--db", D, "--executor", "ray://head-.svc:10001"), None, 2,
        "error: stepscope ingest: argument --executor: give the Ray cluster's address as "
        "ray:HOST:PORT"),
    "ray client host with ESC": (("ingest", T, "--db", D, "--executor", f"ray://h{ESC}:1"),
                                 None, 2, "error: stepscope ingest: argument --executor: give the "
                                          "Ray cluster's address as ray:HOST:PORT"),
    "first of two errors: --jobs before --max-trace-size": (
        ("ingest", T, "--db", D, "--jobs", "0", "--max-trace-size", "0"), None, 2,
        "error: stepscope ingest: argument --jobs: '0' is out of range: must be from 1 to 1024 "
        "(see"),
    "first of two missing paths": (("ingest", "{root}/missing1", "{root}/missing2", "--db", D,
                                    "--run", "m"), None, 2, "error: {root}/missing1"),
    # ---- foreign, corrupt and swapped databases
    "--db schema version 999": (("summary", "--db", "{root}/v999.duckdb"), None, 2, "error: {root"
                                                                                    "}/v999.duc"
                                                                                    "kdb: not a "
                                                                                    "stepscope"
                                                                                    " database (a "
                                                                                    "DuckDB file "
                                                                                    "whose tables "
                                                                                    "schema_info"),
    "--db schema version abc": (("summary", "--db", "{root}/vabc.duckdb"), None, 2,
                                "error: {root}/vabc.duckdb: not a stepscope database (a DuckDB "
                                "file with other tables:"),
    "--db schema_info empty": (("summary", "--db", "{root}/vnone.duckdb"), None, 2,
                               "error: {root}/vnone.duckdb: not a stepscope database (a DuckDB "
                               "file with other tables:"),
    "ingest --db schema version 999": (("ingest", T, "--db", "{root}/v999.duckdb", "--run",
                                        "x"), None, 2, "error: {root}/v999.duckdb: not a "
                                                       "stepscope database (a DuckDB file whose "
                                                       "tables schema_info"),
    "--db cut at 64 KiB": (("report", "base", "--db", "{root}/half.duckdb"), None, 2,
                           "error: {root}/half.duckdb: not a readable DuckDB file (truncated or "
                           "damaged: IO Error: Could"),
    "--db DuckDB magic then noise": (("summary", "--db", "{root}/magic.duckdb"), None, 2,
                                     "error: {root}/magic.duckdb: not a readable DuckDB file "
                                     "(truncated or damaged: Corrupt database"),
    "--db a gzip of a database": (("summary", "--db", "{root}/db.gz.duckdb"), None, 2,
                                  "error: {root}/db.gz.duckdb: not a DuckDB file"),
    "--db 1 GiB of zeros": (("summary", "--db", "{root}/sparse.duckdb"), None, 2,
                            "error: {root}/sparse.duckdb: not a DuckDB file"),
    "--db /dev/zero": (("summary", "--db", "/dev/zero"), None, 2,
                       "error: /dev/zero: not a DuckDB file"),
    "--db with a .wal of noise, read": (("report", "base", "--db", "{root}/walbad.duckdb"),
                                        None, 0, ""),
}

# Failing still, each with what it does (xfail, strict); the cases that failed on the
# first run and are fixed since are listed in test_audit_round7.py's docstring.
STILL_FAILING: dict[str, str] = {}


@pytest.mark.parametrize("name", params(CASES, STILL_FAILING))
def test_case(root: Path, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    check_case(root, name, CASES[name], tmp_path, monkeypatch)
