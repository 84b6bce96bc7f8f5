"""`stepscope nightly` and `stepscope history` end to end on simulated nights.

The healthy night is `diff_base`, the bad night `diff_scaled` (world 8 -> 16 ranks, DP
all-reduce over the network at 1/5 of the bandwidth, a straggler): MFU 45.9% -> 24.6%
in the simulator's ground truth.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest
from conftest import cli, validate_json

from stepscope.analyzers.results import NightlyReport, from_json, to_json
from stepscope.nightly import default_run_name

pytestmark = pytest.mark.slow  # nightly runs on bundled sets

SIM = Path(__file__).resolve().parents[2] / "sample_traces" / "simulated"
GOOD, BAD = SIM / "diff_base", SIM / "diff_scaled"
CHECKS = ["--fail-if", "diff.mfu_delta_points < -5", "--fail-if", "step_time_ms > 20",
          "--fail-if", "share.exposed_comm > 0.6"]


def truth(folder: Path) -> dict[str, float]:
    return json.loads((folder / "ground_truth.json").read_text())["mfu"]


@dataclass
class Nights:
    tmp: Path
    db: Path
    first: tuple[int, str, str]
    rerun: tuple[int, str, str]
    bad: tuple[int, str, str]
    good_run: str

    def out(self, name: str) -> Path:
        return self.tmp / name


@pytest.fixture(scope="module")
def nights(tmp_path_factory: pytest.TempPathFactory) -> Nights:
    """Night 1 (healthy), the same night re-run without --allow-missing, then the bad
    night with --keep 1."""
    tmp = tmp_path_factory.mktemp("nightly")
    db = tmp / "nightly.duckdb"
    common = ["--job", "llm", "--db", db, *CHECKS]
    first = cli("nightly", GOOD, *common, "--out-dir", tmp / "first", "--allow-missing")
    rerun = cli("nightly", GOOD, *common, "--out-dir", tmp / "rerun")
    # the simulator stamps every set with the same start time, so the bad night is named
    bad = cli("nightly", BAD, *common, "--run", "llm-bad", "--out-dir", tmp / "bad",
              "--keep", "1")
    return Nights(tmp, db, first, rerun, bad, default_run_name("llm", [GOOD]))


def test_default_run_name_is_job_trace_start_and_content(tmp_path: Path) -> None:
    name = default_run_name("llm", [GOOD])
    assert re.fullmatch(r"llm-20251231T135512Z-[0-9a-f]{12}", name), name
    copy = tmp_path / "copy"
    shutil.copytree(GOOD, copy)
    assert default_run_name("llm", [copy]) == name  # the same traces, elsewhere
    # one file of the night is other content (its start is the same)
    assert default_run_name("llm", [GOOD / "rank0.json.gz"]).startswith("llm-20251231T135512Z-")
    assert default_run_name("llm", [GOOD / "rank0.json.gz"]) != name


def test_healthy_first_night_passes_with_allow_missing(nights: Nights) -> None:
    rc, out, err = nights.first
    assert rc == 0, err
    assert f"run '{nights.good_run}'" in out
    report = json.loads((nights.out("first") / "report.json").read_text())
    assert report["baseline"] is None and report["diff"] is None
    statuses = {c["metric"]: c["status"] for c in report["checks"]}
    assert statuses == {"diff.mfu_delta_points": "skipped", "step_time_ms": "pass",
                        "share.exposed_comm": "pass"}
    assert report["mfu"]["mfu"] == pytest.approx(truth(GOOD)["mfu"], abs=0.005)


def test_missing_metric_fails_without_allow_missing(nights: Nights) -> None:
    rc, _, err = nights.rerun
    assert rc == 4
    lines = [line for line in err.splitlines() if line.startswith("check failed")]
    assert lines == ["check failed: diff.mfu_delta_points: not computable "
                     "(threshold: fail if < -5)"]


def test_bad_night_fails_the_right_check(nights: Nights) -> None:
    rc, _, err = nights.bad
    assert rc == 4
    failed = [line for line in err.splitlines() if line.startswith("check failed")]
    assert len(failed) == 1
    assert failed[0].startswith("check failed: diff.mfu_delta_points = -21.")
    assert "(threshold: fail if < -5)" in failed[0]
    report = json.loads((nights.out("bad") / "report.json").read_text())
    expected = 100 * (truth(BAD)["mfu"] - truth(GOOD)["mfu"])
    assert report["diff"]["mfu_delta_points"] == pytest.approx(expected, abs=0.5)
    assert report["baseline"] == {"run": nights.good_run, "selected_by": "previous",
                                  "trace_start": "2025-12-31T13:55:12Z"}
    assert [c["passed"] for c in report["checks"]] == [False, True, True]
    assert report["nightly"]["exit_code"] == 4 and report["nightly"]["verdict"] == "FAIL"


def test_summary_names_the_top_cause(nights: Nights) -> None:
    md = (nights.out("bad") / "report.md").read_text()
    summary = md.split("\n---\n")[0]
    assert len(summary.splitlines()) <= 12  # chat-sized
    assert "**FAIL**" in summary
    assert "MFU 24.6%** (-21.3 pts vs 45.9%)" in summary
    cause = next(line for line in summary.splitlines() if "Top cause" in line)
    assert "exposed communication" in cause and "DATA_PARALLEL_GROUP" in cause
    assert "`diff.mfu_delta_points < -5`: value -21.3" in summary
    # the full report and the diff follow the summary
    assert "# stepscope report: llm-bad" in md and "## MFU points by cause" in md


def test_history_has_one_row_per_night_and_rerun_replaces(nights: Nights) -> None:
    rc, out, _ = cli("history", "llm", "--db", nights.db, "--format", "json")
    assert rc == 0
    rows = json.loads(out)["nights"]
    assert [r["run"] for r in rows] == [nights.good_run, "llm-bad"]
    good, bad = rows
    assert good["checks"] == "fail" and good["checks_failed"] == 1  # the re-run's verdict
    assert bad["baseline"] == nights.good_run and bad["checks"] == "fail"
    assert bad["mfu_change_points"] == pytest.approx(bad["mfu_delta_points"], abs=1e-9)
    assert bad["largest_loss"] == "exposed_comm"
    total = sum(bad[f"{c}_ms"] for c in ("compute", "recompute", "exposed_comm",
                                          "straggler_wait", "bubble", "memory", "idle"))
    assert total == pytest.approx(bad["step_time_ms"], rel=1e-6)
    assert "exposed communication" in bad["top_cause"]


def test_keep_prunes_traces_but_not_history(nights: Nights) -> None:
    assert "pruned 1 old run(s): llm-20251231T135512Z" in nights.bad[1]
    con = duckdb.connect(str(nights.db), read_only=True)
    try:
        assert con.execute("SELECT run FROM runs").fetchall() == [("llm-bad",)]
        (left,), = con.execute("SELECT count(*) FROM ranks WHERE run <> 'llm-bad'").fetchall()
        assert left == 0
        (kept,), = con.execute("SELECT count(*) FROM history WHERE job = 'llm'").fetchall()
        assert kept == 2
    finally:
        con.close()


def test_history_text_and_markdown(nights: Nights) -> None:
    rc, out, _ = cli("history", "llm", "--db", nights.db, "--last", "1")
    assert rc == 0
    lines = out.splitlines()
    assert lines[1].split()[:3] == ["date", "run", "status"]
    assert len(lines) == 3 and "llm-bad" in lines[2] and "FAIL(1)" in lines[2]
    assert "-21.3" in lines[2] and "24.6%" in lines[2]
    rc, md, _ = cli("history", "llm", "--db", nights.db, "--format", "md")
    assert rc == 0 and md.count("| llm-") == 2


def test_unknown_job_and_metric_are_usage_errors(nights: Nights, tmp_path: Path) -> None:
    rc, _, err = cli("history", "nope", "--db", nights.db)
    assert rc == 2 and "jobs: llm" in err
    rc, _, err = cli("nightly", GOOD, "--job", "llm", "--db", tmp_path / "x.duckdb",
                     "--fail-if", "mfu.mfuu < 0.3")
    assert rc == 2 and "unknown metric 'mfu.mfuu'" in err and "diff.mfu_delta_points" in err
    assert not (tmp_path / "x.duckdb").exists()  # nothing ingested
    rc, _, err = cli("nightly", GOOD, "--job", "llm", "--db", tmp_path / "x.duckdb",
                     "--fail-if", "mfu.mfu ~ 0.3")
    assert rc == 2 and "expected '<metric> <op> <number>'" in err
    rc, _, err = cli("nightly", GOOD, "--job", "a/b", "--db", tmp_path / "x.duckdb")
    assert rc == 2 and "--job 'a/b'" in err
    rc, _, err = cli("nightly", GOOD, "--job", "llm", "--db", nights.db, "--baseline", "zzz")
    assert rc == 2 and "--baseline 'zzz': no such run" in err


def test_nothing_ingested_exits_1(tmp_path: Path) -> None:
    bad = tmp_path / "traces"
    bad.mkdir()
    (bad / "rank0.json").write_text("{not json")
    rc, _, err = cli("nightly", bad, "--job", "llm", "--db", tmp_path / "n.duckdb",
                     "--out-dir", tmp_path / "out")
    assert rc == 1 and "nothing ingested into run 'llm-undated-" in err
    assert not (tmp_path / "out" / "report.json").exists()


@pytest.mark.browser
def test_nightly_html_opens_offline(nights: Nights) -> None:
    """report.html as a reader opens it from disk: verdict, charts, no request."""
    from offline_browser import artifacts_dir, open_offline

    path = nights.out("bad") / "report.html"
    with open_offline(path) as visit:
        page = visit.page
        assert page.locator(".verdict").inner_text() == "FAIL"
        assert page.locator("svg.chart").count() >= 5  # diff, MFU points, breakdown, ...
        cause = page.locator("p", has_text="Top cause:").first.inner_text()
        assert "exposed communication" in cause
        assert page.locator("#checks tr").count() == 4  # header + 3 checks
        page.screenshot(path=str(artifacts_dir() / "nightly-report.png"), full_page=True)
    assert visit.console_errors == [] and visit.page_errors == []
    assert visit.requests == [path.resolve().as_uri()]


def test_report_json_follows_the_nightly_schema(nights: Nights) -> None:
    """report.json validates against docs/nightly.schema.json (generated from the model
    class NightlyReport; tests/analyzers/test_results.py fails when it is stale) and reads
    back into it."""
    for name in ("first", "rerun", "bad"):
        text = (nights.out(name) / "report.json").read_text()
        validate_json(json.loads(text), NightlyReport)
        night = from_json(text, NightlyReport)
        assert night.nightly.run and night.run.name == night.nightly.run
        assert to_json(night) + "\n" == text  # one serializer: byte for byte


def test_every_nightly_file_is_rendered_from_report_json(nights: Nights) -> None:
    """report.md and report.html are pure functions of the one model report.json holds:
    rendered again from the parsed report.json, they are the files the night wrote."""
    from stepscope.dashboard.render.html_nightly import nightly_html
    from stepscope.dashboard.render.nightly import nightly_markdown

    for name in ("first", "rerun", "bad"):
        out = nights.out(name)
        night = from_json((out / "report.json").read_text(), NightlyReport)
        assert nightly_markdown(night) == (out / "report.md").read_text()
        assert nightly_html(night) == (out / "report.html").read_text()


def test_keep_bounds_the_database_over_many_nights(tmp_path: Path) -> None:
    """Five nights with --keep 1: the file stops growing after the second night (each
    night adds ~4 MB without pruning)."""
    db = tmp_path / "k.duckdb"
    cpu = SIM.parent / "cpu" / "ddp"
    sizes = []
    for night in range(1, 6):
        rc, _, err = cli("nightly", cpu, "--job", "cpu", "--db", db, "--run", f"n{night}",
                         "--keep", "1", "--quiet", "--out-dir", tmp_path / f"o{night}")
        assert rc == 0, err
        sizes.append(db.stat().st_size)
    assert max(sizes[2:]) <= 1.25 * sizes[1], sizes
    rc, out, _ = cli("history", "cpu", "--db", db, "--format", "json")
    rows = json.loads(out)["nights"]
    assert [r["run"] for r in rows] == [f"n{i}" for i in range(1, 6)]
    assert [r["in_db"] for r in rows] == [False] * 4 + [True]
    assert all(r["baseline"] == f"n{i}" for i, r in enumerate(rows[1:], start=1))


def test_partial_night_exits_3_and_says_so(tmp_path: Path) -> None:
    import shutil

    traces = tmp_path / "night"
    shutil.copytree(SIM.parent / "cpu" / "ddp", traces)
    (traces / "rank3.json.gz").write_bytes(b"\x1f\x8b truncated")
    args = ["nightly", traces, "--job", "cpu", "--db", tmp_path / "p.duckdb", "--run", "p1",
            "--out-dir", tmp_path / "out"]
    rc, _, err = cli(*args, "--fail-if", "count.failed_files > 1")
    assert rc == 3
    assert any(line.startswith("error: ") and "rank3.json.gz" in line
               for line in err.splitlines())
    summary = (tmp_path / "out" / "report.md").read_text().split("\n---\n")[0]
    assert "**PARTIAL**" in summary and "**Partial ingest:** 1 file(s) failed" in summary
    rc, _, err = cli(*args, "--fail-if", "count.failed_files > 0")  # a failed check wins
    assert rc == 4 and "check failed: count.failed_files = 1" in err


def test_history_record_binds_every_history_row_field() -> None:
    """analyzers/sql/history/record.sql lists exactly the fields of HistoryRow, in order, as
    columns and as parameters (the row is bound by field name)."""
    from dataclasses import fields

    from stepscope.analyzers._sql import sql
    from stepscope.analyzers.nightly.history import HistoryRow

    body = "\n".join(line for line in sql("history/record.sql").splitlines()
                     if not line.lstrip().startswith("--"))
    names = [f.name for f in fields(HistoryRow)]
    columns = body.split("(", 1)[1].split(")", 1)[0]
    assert [c.strip() for c in columns.split(",")] == names
    assert re.findall(r"\$(\w+)", body) == names
