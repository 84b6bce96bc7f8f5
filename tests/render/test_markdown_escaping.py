"""Names from the traces reach the Markdown outputs as written (dashboard/render/format.py
md_text and md_code): a kernel's `<128, 4>` is no HTML tag, `*` and `_` no emphasis, `|`
no column border, a backtick does not end a code span early.

Every Markdown renderer gets models whose names carry every hostile character (the golden
snapshots' models with their names replaced, and models built here for what the
snapshots lack: idle, NCCL, what-if, hang, nightly, summary, history); the output is parsed with
mistune (GFM tables and strikethrough) and checked structurally: every row of a table has
the header's column count, no HTML, link, emphasis or strikethrough comes from a name,
and every name reads intact in the parsed text. The HTML pages of the same models escape
each name exactly once.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterator
from datetime import datetime
from html import escape
from pathlib import Path
from typing import Any

import mistune
import msgspec
import polars as pl
import pytest
from markdown_ast import CODE_SPAN, GFM, _nodes, _text

from stepscope.analyzers.nightly.history import HistoryNight
from stepscope.analyzers.results import (
    CompletionLag,
    Diff,
    GroupProgress,
    HangReport,
    HostActivity,
    MeasuredOps,
    Mismatch,
    NcclFinding,
    NcclGroup,
    NcclSection,
    NcclSource,
    NightlyReport,
    P2PWait,
    PlanResult,
    RankOps,
    Report,
    StuckCollective,
    Suspect,
    WhatIfResult,
    from_json,
    to_json,
)
from stepscope.analyzers.summary import RunSummary
from stepscope.dashboard.render.critical_path import whatif_markdown
from stepscope.dashboard.render.diff import diff_markdown
from stepscope.dashboard.render.format import md_code, md_text
from stepscope.dashboard.render.hang import hang_markdown
from stepscope.dashboard.render.html_diff import diff_html
from stepscope.dashboard.render.html_nightly import nightly_html
from stepscope.dashboard.render.html_report import report_html
from stepscope.dashboard.render.nightly import history_markdown, nightly_markdown
from stepscope.dashboard.render.plan import plan_markdown
from stepscope.dashboard.render.report import report_markdown
from stepscope.dashboard.render.summary import summary_markdown

SNAPSHOTS = Path(__file__).resolve().parents[1] / "snapshots"
# every character Markdown acts on, in a name short enough never to be shortened
HOSTILE = "<8, *_|`q`>[a](b)&lt;~~s~~\\_x_ #"
# identifiers (op, kernel, group, host, run names) and sentences quoting them
NAME_KEYS = {"name", "op", "host", "hosts", "collective", "group_label", "group", "link",
             "device", "run", "thread", "label", "pg_names", "target"}
TEXT_KEYS = {"evidence", "detail", "title", "message", "notes", "peak_reason", "narrative",
             "sentence", "uses", "why", "assumptions", "layout", "dtype_reason",
             "zero_source", "microbatch_source", "source", "what"}
KEEP = {"waterfall"}  # names the renderers look up in their own label tables

HTML = mistune.create_markdown(plugins=["table", "strikethrough"])
FORBIDDEN = {"inline_html", "block_html", "link", "image", "emphasis", "strikethrough",
             "block_quote", "block_code"}


class Names:
    """Hostile replacements, the same for the same original so joins still hold."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.texts: dict[str, str] = {}

    def name(self, value: str) -> str:
        return self.names.setdefault(value, f"n{len(self.names)}{HOSTILE}")

    def text(self, value: str) -> str:
        return self.texts.setdefault(value, f"- {value} {HOSTILE} t{len(self.texts)}")

    def all(self) -> list[str]:
        return [*self.names.values(), *self.texts.values()]


def _rename(node: Any, names: Names, key: str = "") -> Any:
    """`node` (a model as JSON) with the strings under NAME_KEYS/TEXT_KEYS replaced."""
    if isinstance(node, dict):
        return {k: node[k] if k in KEEP else _rename(v, names, k) for k, v in node.items()}
    if isinstance(node, list):
        return [_rename(v, names, key) for v in node]
    if isinstance(node, str) and key in NAME_KEYS:
        return names.name(node)
    if isinstance(node, str) and key in TEXT_KEYS:
        return names.text(node)
    return node


def _hostile(snapshot: str, names: Names) -> dict[str, Any]:
    renamed: dict[str, Any] = _rename(json.loads((SNAPSHOTS / snapshot).read_text()), names)
    return renamed


def _idle_and_nccl(report: dict[str, Any], names: Names) -> dict[str, Any]:
    """The report with its idle shown (5% of the step) and an NCCL section."""
    report["breakdown_ms"]["idle"] = max(report["breakdown_ms"]["idle"],
                                         0.05 * report["step_time_ms"])
    report["idle_split"]["host_activity"] = [msgspec.to_builtins(HostActivity(
        name=names.name("aten::_to_copy"), kind="cpu_op", thread=names.name("pt_main"),
        ms=1.0))]
    report["nccl"] = msgspec.to_builtins(_nccl(names))
    return report


def _nccl(names: Names) -> NcclSection:
    desc, pg, host = names.name("tp"), names.name("pg0"), names.name("node0")
    return NcclSection(
        versions=[names.name("2.21.5")], sources=[NcclSource(kind="nccl_log", files=2, ranks=2)],
        hosts={host: [0, 1]}, ranks=[],
        groups=[NcclGroup(comm_id=names.name("0xabc"), pg_names=[pg], pg_desc=desc,
                          ranks=[0, 1], nranks=2, hosts=[host], tiers=[names.name("ib")],
                          link=names.name("ib"), gdr=False)],
        measured=[MeasuredOps(comm_id=names.name("0xabc"), collective=names.name("AllReduce"),
                              pg_names=[], pg_desc=None, ranks=[0, 1], hosts=[host], n_ops=3,
                              msg_bytes=1e6, bus_bw_gbs=10.0, bus_bw_p10_gbs=9.0,
                              timing_source=None, over_time=[])],
        findings=[NcclFinding(kind=names.name("gdr_disabled"), severity="high", ranks=[0],
                              hosts=[host], message=names.text("GDR off"))])


def _hang(names: Names) -> HangReport:
    pg, desc = names.name("pg1"), names.name("default_pg")
    return HangReport(
        run=names.name("job"), verdict=names.text("pg 1 is stuck"), suspect_ranks=[1],
        suspects=[Suspect(rank=1, idle=False, reasons=[names.text("never entered")])],
        stuck=[StuckCollective(
            pg_name=pg, pg_desc=desc, op=None, profiling_name=names.name("nccl:all_reduce"),
            seq=3, sizes=[[4, 5]], output_sizes=None, dtype=names.name("Float"),
            state="scheduled", kind="not_entered", first_created_ns=None, missing_ranks=[1],
            waiting_ranks=[0], ranks_without_dump=[])],
        mismatches=[Mismatch(pg_name=pg, pg_desc=desc, seq=4, fields=["op"], ranks=[
            RankOps(rank=0, ops=[names.name("all_gather")], sizes=[None],
                    dtypes=[[names.name("BFloat16")]])])],
        completion_lags=[CompletionLag(pg_name=pg, pg_desc=desc, lagging_ranks=[1],
                                       ahead_ranks=[0], first_seq=1, last_seq=2)],
        p2p_waits=[P2PWait(pg_name=pg, pg_desc=desc, rank=0, op="send", peer_rank=1,
                           state="started", sizes=None, dtype=None, peer_posted=False)],
        groups=[GroupProgress(pg_name=pg, pg_desc=desc, ranks=[0, 1], last_completed_by_all=2,
                              last_enqueued_max=4, ranks_without_dump=[],
                              membership_conflict=False)],
        dump_ranks=[0, 1], fr_versions=[names.name("2.4")], nccl_versions=[],
        notes=[names.text("a note")])


def _nightly(names: Names) -> NightlyReport:
    report = _idle_and_nccl(_hostile("report-straggler.json", names), names)
    diff = _hostile("diff-base-scaled.json", names)
    night = {**report, "diff": diff, "baseline_note": None,
             "baseline": {"run": diff["a"]["run"], "selected_by": "previous",
                          "trace_start": None},
             "checks": [{"condition": names.name("mfu < 0.3"), "metric": "mfu", "op": "<",
                         "threshold": 0.3, "value": 0.2, "status": "fail", "passed": False}],
             "nightly": {"job": names.name("nightly-job"), "run": report["run"]["name"],
                         "trace_start": None, "ingested_at": "2025-01-01T00:00:00Z",
                         "status": "partial", "verdict": "FAIL", "exit_code": 3,
                         "failed_files": [{"file": names.name("rank3.json"),
                                           "error": names.text("bad JSON")}],
                         "pruned_runs": [], "top_causes": [names.text("straggler wait")]}}
    return from_json(json.dumps(night), NightlyReport)


def _frame(cls: type, **values: object) -> pl.DataFrame:
    """One row of a dataclass's frame: the given values, None elsewhere."""
    row = {f.name: values.get(f.name) for f in dataclasses.fields(cls)}
    return pl.DataFrame([row], infer_schema_length=None)


def _summary(names: Names) -> str:
    values = dict(run=names.name("run-a"), status="complete", hosts=1,
                  devices=names.name("H100"), steps=3, gpu_ops=10, compute_kernels=5,
                  comm_kernels=2, memory_ops=1, collectives=2, p2p_ops=0, process_groups=1,
                  top_loss="idle", top_loss_share=0.1)
    row = RunSummary(**{f.name: values.get(f.name) for f in dataclasses.fields(RunSummary)})
    return summary_markdown([row])


def _history(names: Names) -> str:
    frame = _frame(HistoryNight, run=names.name("night-1"),
                   ingested_at=datetime(2025, 1, 1), status="complete", checks="pass",
                   checks_failed=0, in_db=True)
    return history_markdown(names.name("job-h"), frame)


def _cases() -> Iterator[tuple[str, Callable[[Names], str]]]:
    for snap in ("report-straggler.json", "report-deep_pipeline-spec.json",
                 "report-cpu-pipeline.json"):
        yield snap, lambda n, s=snap: report_markdown(from_json(json.dumps(
            _idle_and_nccl(_hostile(s, n), n)), Report))
    yield "diff", lambda n: diff_markdown(from_json(json.dumps(
        _hostile("diff-base-scaled.json", n)), Diff))
    for snap in ("plan-from-mb4.json", "plan-70b-h100.json"):
        yield snap, lambda n, s=snap: plan_markdown(from_json(json.dumps(
            _hostile(s, n)), PlanResult))
    yield "whatif", lambda n: whatif_markdown(from_json(json.dumps(_hostile(
        "report-straggler.json", n)["critical_path"]["whatifs"][0]), WhatIfResult))
    yield "hang", lambda n: hang_markdown(_hang(n))
    yield "nightly", lambda n: nightly_markdown(_nightly(n))
    yield "summary", _summary
    yield "history", _history


CASES = dict(_cases())
# a pipe not escaped by a backslash (an even run of backslashes before it)
UNESCAPED_PIPE = re.compile(r"(?<!\\)(?:\\\\)*\|")


def _tables(markdown: str) -> list[list[str]]:
    """The pipe tables of `markdown`: runs of lines that start with '|'."""
    tables: list[list[str]] = []
    previous = False
    for line in markdown.splitlines():
        row = line.startswith("|")
        if row and not previous:
            tables.append([])
        if row:
            tables[-1].append(line)
        previous = row
    return tables


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_names_survive_every_markdown_renderer(case: str) -> None:
    names = Names()
    markdown = CASES[case](names)
    assert names.names, "the fixture renamed nothing"
    for table in _tables(markdown):
        columns = {len(UNESCAPED_PIPE.findall(line)) for line in table}
        assert len(columns) == 1, f"{case}: a row breaks its table:\n" + "\n".join(table)
    ast = GFM(markdown)
    assert isinstance(ast, list)
    found = {n["type"] for n in _nodes(ast)} & FORBIDDEN
    assert not found, f"{case}: names became Markdown: {found}"
    assert not _raw_angles(markdown), f"{case}: a raw '<' from a name"
    blocks = [_text(n) for n in _nodes(ast)
              if n["type"] in ("paragraph", "heading", "table_cell", "block_text")]
    written = [n for n in names.all() if _rendered(n, markdown)]
    assert written, f"{case}: the renderer wrote none of the names"
    garbled = [n for n in written if not any(n in b for b in blocks)]
    assert not garbled, f"{case}: names do not read intact: {garbled[:3]}"




def _raw_angles(markdown: str) -> list[str]:
    """Lines with a '<' outside code spans that no backslash escapes."""
    return [line for line in markdown.splitlines()
            if re.search(r"(?<!\\)<", CODE_SPAN.sub("", line))]


def _rendered(name: str, markdown: str) -> bool:
    """Whether the renderer wrote `name` at all (escaped as text or in a code span)."""
    return any(shown in markdown for shown in (md_text(name), md_text(name, cell=True),
                                               md_code(name), md_code(name, table=False)))


@pytest.mark.parametrize("text", [
    "void at::native::(anonymous namespace)::elementwise_kernel<128, 4, *_|x>",
    "aten::_to_copy", "a|b|c", "`tick` and ``two``", "**bold** _em_ ~~s~~", "[l](u) ![i](j)",
    "&lt; &amp; &#60;", "back\\slash\\*", "- item", "+ item", "# heading", "1. first",
    "12) twelve", "> quote", "title #", "<https://x.y>", "mid_word_ok", "x_", "_y"])
def test_md_text_reads_back_as_written(text: str) -> None:
    """In a paragraph, a list item and a table cell the parsed text is `text` itself."""
    for wrap in ("{}", "- {}", "| h |\n|---|\n| {} |"):
        ast = GFM(wrap.format(md_text(text, cell=wrap.startswith("|"))))
        assert isinstance(ast, list)
        assert not {n["type"] for n in _nodes(ast)} & FORBIDDEN
        got = [_text(n) for n in _nodes(ast)
               if n["type"] in ("paragraph", "block_text", "table_cell", "heading")]
        assert text in got, (wrap, md_text(text), got)


def test_md_text_escapes_only_what_markdown_reads() -> None:
    assert md_text("all_reduce TENSOR_MODEL_PARALLEL_GROUP 3.5 ms -> 2") == (
        "all_reduce TENSOR_MODEL_PARALLEL_GROUP 3.5 ms -> 2")
    assert md_text("aten::_to_copy") == "aten::\\_to_copy"
    assert md_text("k<128, 4>") == "k\\<128, 4>"
    assert md_text("a|b") == "a\\|b"
    assert md_text("T& x") == "T& x" and md_text("&lt;") == "\\&lt;"
    assert md_text("line\nbreak\r\nand") == "line break and"
    assert md_text("- x") == "\\- x" and md_text("- x", cell=True) == "- x"
    assert md_text("-") == "\\-" and md_text("-", cell=True) == "-"
    assert md_text("1. x") == "1\\. x" and md_text("1.5 x") == "1.5 x"
    assert md_text(None) == "None" and md_text(3) == "3"


@pytest.mark.parametrize("name", [
    "plain", "a`b", "`lead", "trail`", "``", "a``b`c", " spaced ", "x|y", "|x||y|", "a`|`b",
    "multi\nline"])
def test_md_code_reads_as_the_name_in_code(name: str) -> None:
    """A name reads back as written, in code spans only (a table cell splits it at each
    `|`, written `\\|` between the spans), and no backslash shows in the rendered HTML."""
    flat = " ".join(name.splitlines())
    for table in (False, True):
        span = md_code(name, table=table)
        src = f"| h |\n|---|\n| {span} |" if table else f"- {span}"
        ast = GFM(src)
        assert isinstance(ast, list)
        codes = [n["raw"] for n in _nodes(ast) if n["type"] == "codespan"]
        pieces = flat.split("|") if table else [flat]
        assert codes == [p for p in pieces if p], (name, span, ast)
        html = HTML(src)
        assert "\\" not in html, (name, span, html)
        cells = [_text(n) for n in _nodes(ast) if n["type"] == "table_cell"]
        text = cells[-1] if table else "".join(_text(n) for n in ast)
        assert text == flat, (name, span, text)


def test_md_code_fences_and_pads() -> None:
    assert md_code("a") == "`a`"
    assert md_code("a`b") == "``a`b``"
    assert md_code("`a") == "`` `a ``"
    assert md_code("a``b") == "```a``b```"
    assert md_code("x|y") == "`x`\\|`y`" and md_code("x|y", table=False) == "`x|y`"
    assert md_code("|x|") == "\\|`x`\\|"
    assert md_code("") == ""


def test_json_keeps_the_names_unescaped() -> None:
    """Escaping is the Markdown side's: the model's JSON holds the names as given."""
    names = Names()
    hang = _hang(names)
    assert json.loads(to_json(hang))["stuck"][0]["pg_desc"] == names.name("default_pg")


def test_html_pages_escape_the_names_once() -> None:
    """The HTML renderers of the same hostile models: no raw '<8,' (a tag from a name) and
    none escaped twice ('&amp;lt;8', which a browser shows as '&lt;8')."""
    names = Names()
    report = from_json(json.dumps(_idle_and_nccl(_hostile("report-straggler.json", names),
                                                 names)), Report)
    diff = from_json(json.dumps(_hostile("diff-base-scaled.json", names)), Diff)
    pages = {"node000": report_html(report), "diff_base": diff_html(diff),
             "straggler": nightly_html(_nightly(names))}
    for name, page in pages.items():
        assert "<8," not in page and "&amp;lt;8" not in page
        assert escape(names.name(name)) in page
