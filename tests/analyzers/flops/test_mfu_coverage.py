"""What the MFU covers (issue 40, point 2; docs/mfu.md, "What the MFU covers"): with the
traces' FLOPs, only ops with shapes count, so where they run under half of the compute
time the headline is a lower bound: "MFU ≥ x% from the y% of compute time with shapes",
with the MFU the unshaped kernels would give at the shaped ones' FLOP rate (mfu / y) and
a pointer to --model; with a model spec, the spec's FLOPs lead and the MFU is plain.

Checked on AMD-AGI/TraceLens's real xDiT FLUX.1 trace (tests/data/AMD-AGI_TraceLens,
MI300X, four hipGraphLaunch replays of compiled regions without shapes) against the share
computed here from the raw events, not by the project's SQL: each kernel of the step
whose launch sits under an op (innermost three) of a kind with shapes."""

from __future__ import annotations

import bisect
import gzip
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import msgspec
import pytest
from conftest import REPO

import stepscope
from stepscope.analyzers.diff.build import mfu_percent
from stepscope.analyzers.flops.bound import above_peak_message
from stepscope.analyzers.flops.mfu import SHAPED_MAJORITY, coverage
from stepscope.analyzers.flops.model_spec import ModelSpec
from stepscope.analyzers.report import build_report
from stepscope.analyzers.results import Report, to_json
from stepscope.dashboard.app.views import overview
from stepscope.dashboard.render.format import mfu_pct
from stepscope.dashboard.render.html_report import report_html
from stepscope.dashboard.render.report import report_markdown

FLUX = (REPO / "tests/data/AMD-AGI_TraceLens/tests/traces/inference/xdit_flux.1_aiter_sage"
        / "profile_trace_rank_0.json.gz")

SHAPED_KINDS = (  # the op kinds whose kernels have shapes (GEMM, attention, conv, memory-bound)
    r"^aten::(mm|addmm|bmm|baddbmm|linear|matmul|convolution)$",
    r"^aten::_scaled_dot_product_(flash|efficient|cudnn)_attention$",
    r"^aten::_(flash|efficient)_attention_forward$",
    r"^aten::(native_|_fused_)?(layer_norm|rms_norm|group_norm|batch_norm)$",
    r"^aten::_?(log_)?softmax$",
    r"^aten::(native_)?(add|sub|mul|div|neg|exp|log|pow|sqrt|rsqrt|sigmoid|tanh|relu|gelu|"
    r"silu|threshold|clamp|where|copy|fill|zero|dropout|masked_fill|addcmul|addcdiv|lerp|abs|"
    r"reciprocal|erf|maximum|minimum|_foreach_[a-z]+)_?$",
)


def _shaped(op: dict[str, Any]) -> bool:
    return (op.get("args", {}).get("Input Dims") is not None
            and any(re.match(p, op["name"]) for p in SHAPED_KINDS))


def _hand_shares(path: Path) -> tuple[float, float]:
    """(shaped, all) compute-kernel µs of the trace's one step, from the raw events: a
    kernel is shaped when one of the three innermost CPU ops around its launch is."""
    events = json.load(gzip.open(path))["traceEvents"]
    step = next(e for e in events if str(e.get("name", "")).startswith("ProfilerStep#"))
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    ops: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op":
            ops[(e["pid"], e["tid"])].append(e)
    for thread in ops.values():
        thread.sort(key=lambda o: (o["ts"], -o["dur"]))
    starts = {k: [o["ts"] for o in v] for k, v in ops.items()}
    shaped = total = 0.0
    for k in (e for e in events if e.get("cat") == "kernel"):
        launch = launches.get(k["args"].get("correlation"))
        if launch is None or not step["ts"] <= launch["ts"] <= step["ts"] + step["dur"]:
            continue
        total += k["dur"]
        thread = ops[(launch["pid"], launch["tid"])]
        before = thread[:bisect.bisect_right(starts[(launch["pid"], launch["tid"])],
                                             launch["ts"])]
        around = [o for o in before if o["ts"] + o["dur"] >= launch["ts"]]
        innermost = sorted(around, key=lambda o: o["dur"])[:3]
        shaped += k["dur"] if any(_shaped(o) for o in innermost) else 0.0
    return shaped, total


def _hand_graph_calls(path: Path) -> tuple[int, int]:
    """(graph launches, stream captures) among the raw runtime events; and no runtime call
    or kernel names a graph id or exec handle that could tie a launch to a capture."""
    events = json.load(gzip.open(path))["traceEvents"]
    runtime = [e for e in events if e.get("cat") == "cuda_runtime"]
    assert not any("graph" in k.lower() for e in events for k in e.get("args", {}))
    return (sum(bool(re.match(r"^(cuda|hip)GraphLaunch", e["name"])) for e in runtime),
            sum(bool(re.match(r"^(cuda|hip)StreamBeginCapture", e["name"])) for e in runtime))


@pytest.fixture(scope="module")
def flux_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("flux")
    (folder / "t").mkdir()
    (folder / "t" / FLUX.name).write_bytes(FLUX.read_bytes())
    db = folder / "flux.duckdb"
    stepscope.ingest_run(folder / "t", db=db, run="flux")
    return db


def _report(db: Path, spec: ModelSpec | None = None) -> Report:
    with stepscope.open(db) as store:
        return build_report(store.con, "flux", spec)


@pytest.fixture(scope="module")
def flux_report(flux_db: Path) -> Report:
    return _report(flux_db)


def test_flux_mfu_says_it_is_a_lower_bound(flux_report: Report) -> None:
    mfu = flux_report.mfu
    shaped, total = _hand_shares(FLUX)
    assert total / 1e3 == pytest.approx(201.152, abs=1e-3)  # the step's compute kernels
    assert mfu.shaped_share == pytest.approx(shaped / total, rel=1e-6)  # 0.1434
    assert mfu.flops_source == "trace" and mfu.mfu is not None
    assert mfu.lower_bound
    assert mfu.mfu_at_shaped_rate == pytest.approx(mfu.mfu / (shaped / total), rel=1e-6)
    # before: "MFU 1.8%" bare; then without the replays (issue 40 point 2, last sentence)
    launches, captures = _hand_graph_calls(FLUX)
    assert (launches, captures) == (4, 0)
    assert mfu.headline == (
        "MFU ≥ 1.8% from the 14.3% of compute time with shapes; about 12.9% if the other "
        "85.7% ran at the shaped kernels' FLOP rate; replays of a captured graph: shapes not "
        f"linked ({launches} CUDA/HIP graph launch(es) ran ops the profiler records only at "
        "capture; the trace holds no capture of the graph); pass --model FILE for the "
        "model's FLOPs")


def test_every_output_says_so(flux_report: Report) -> None:
    report = flux_report
    md = report_markdown(report)
    assert "- **MFU ≥ 1.8%**, HFU ≥ 1.8% of" in md
    assert f"- covers: {report.mfu.headline}" in md
    assert "**MFU 1.8%**" not in md
    html = report_html(report)
    assert '<div class="v">≥ 1.8%</div><div class="d ">14% of compute time has shapes' in html
    assert "<b>MFU ≥ 1.8%</b>" in html
    data = json.loads(to_json(report))
    assert data["mfu"]["lower_bound"] is True and data["mfu"]["headline"] == report.mfu.headline
    assert data["roofline"]["coverage"] == pytest.approx(data["mfu"]["shaped_share"])


def test_with_a_spec_the_spec_leads(flux_db: Path) -> None:
    spec = ModelSpec(n_params=11.9e9, n_layers=57, hidden=3072, seq_len=4608,
                     global_batch_tokens=1024)
    mfu = _report(flux_db, spec).mfu
    assert mfu.flops_source == "spec"
    assert not mfu.lower_bound and mfu.mfu_at_shaped_rate is None
    assert mfu.headline is not None and mfu.headline.startswith("MFU ") and "≥" not in mfu.headline


@pytest.mark.parametrize(("share", "lower", "at_rate"), [
    (1.0, False, None), (SHAPED_MAJORITY, False, None), (0.49, True, 0.02 / 0.49),
    (0.01, True, None),   # 0.02 / 0.01 = 200%: no estimate above the peak
    (None, False, None),  # no GPU kernels
])
def test_the_rule(share: float | None, lower: bool, at_rate: float | None) -> None:
    got_lower, got_rate, headline = coverage(0.02, "trace", share)
    assert got_lower is lower
    assert got_rate == (pytest.approx(at_rate) if at_rate is not None else None)
    assert headline.startswith("MFU ≥ 2.0%" if lower else "MFU 2.0%")
    assert coverage(0.02, "spec", share)[0] is False


@pytest.mark.parametrize("mfu", [0.0026, 0.00027, 0.0045, 0.018, 0.352, 0.592])
def test_one_formatter_for_the_mfu(mfu: float) -> None:
    """The coverage sentence, the headline cards, the diff narrative and the above-peak
    message show one MFU with the same digits (analyzers/numbers.py). Before: the report
    printed "**MFU ≥ 0.26%**" above "covers: MFU ≥ 0.3% from ..." for the same value."""
    shown = mfu_pct(mfu)
    headline = coverage(mfu, "trace", 0.14)[2]
    assert headline.startswith(f"MFU {mfu_pct(mfu, True)} from the 14.0% ")
    assert mfu_percent(mfu) == shown
    assert coverage(mfu, "spec", 0.14)[2] == f"MFU {shown}"
    message = above_peak_message(1 + mfu, 30 + mfu, "trace")  # before: "100%", "3e+03%"
    assert message is not None
    assert message.startswith(f"MFU would be {mfu_pct(1 + mfu)} (HFU {mfu_pct(30 + mfu)})")
    assert {"0.0026": "0.26%", "0.00027": "0.027%", "0.0045": "0.45%",
            "0.018": "1.8%", "0.352": "35.2%", "0.592": "59.2%"}[str(mfu)] == shown


def test_every_output_shows_the_same_small_mfu(flux_report: Report,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A lower-bound MFU of 0.26% reads '≥ 0.26%' in the Markdown headline, its 'covers'
    line, the HTML card and facts: one number, not '0.26%' here and '0.3%' there."""
    lower, at_rate, headline = coverage(0.0026, "trace", 0.143)
    mfu = msgspec.structs.replace(flux_report.mfu, mfu=0.0026, hfu=0.0026, lower_bound=lower,
                                  mfu_at_shaped_rate=at_rate, headline=headline)
    report = msgspec.structs.replace(flux_report, mfu=mfu)
    md = report_markdown(report)
    assert "- **MFU ≥ 0.26%**, HFU ≥ 0.26% of" in md
    assert "- covers: MFU ≥ 0.26% from the 14.3% of compute time with shapes; about 1.8%" in md
    assert "0.3%" not in md.split("- covers:")[1].split("\n")[0]
    html = report_html(report)
    assert '<div class="v">≥ 0.26%</div>' in html and "<b>MFU ≥ 0.26%</b>" in html
    assert "covers: MFU ≥ 0.26% from" in html
    shown: list[str] = []  # the dashboard's Overview: its MFU line (before: "**MFU 0.26%**")
    monkeypatch.setattr(overview.st, "markdown", lambda text, *a, **k: shown.append(text))
    monkeypatch.setattr(overview, "chart_and_table", lambda *a, **k: None)
    monkeypatch.setattr(overview.st, "caption", lambda *a, **k: None)
    overview.mfu_section(report)
    assert shown[0].startswith("**MFU ≥ 0.26%**, HFU ≥ 0.26% of ")
