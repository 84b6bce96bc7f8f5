"""Names from the traces and from the user reach the dashboard's Markdown as written
(dashboard/app/widgets.py plain / code over render/format.py md_text / md_code).

Two small runs whose kernel, op, group, host, run and file names carry every character
Markdown and Streamlit act on (`<` a tag, `*`/`_` emphasis, `|` a table, a backtick a code
span, `[a](b)` a link, `$x$` LaTeX, `:red[y]` a colour directive) are shown on every
page; every Markdown body the page writes (markdown, captions, alerts, subheaders,
expander and metric labels) is parsed with mistune: no name writes a raw `<`, `$` or
`:red[`, each name the page shows reads intact in the parsed text, and on the pages that
show a name the body holds it escaped (plain / code).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import kineto_trace, write_trace
from dashboard_helpers import app_test, no_exception
from markdown_ast import CODE_SPAN, GFM, _nodes, _text
from streamlit.testing.v1 import AppTest

import stepscope
from stepscope.dashboard.app.views import PAGES
from stepscope.dashboard.app.widgets import code, plain
from stepscope.dashboard.render.format import chart_text

pytestmark = pytest.mark.slow  # ingests two runs, renders every page

HOSTILE = "<8, *_|`q`>[a](b) $x$ :red[y]"
KERNEL = f"elementwise_kernel{HOSTILE}"
OP = f"aten::_to_copy{HOSTILE}"
GROUP = f"tp_group{HOSTILE}"
HOSTS = [f"node{n}{HOSTILE}" for n in range(2)]  # ranks 0-1 and 2-3
WORLD, SLOW = 4, 3
RUN_A, RUN_B = f"base{HOSTILE}", f"new{HOSTILE}"
BAD_FILE = f"rank9{HOSTILE}.json"
NAMES = [KERNEL, OP, GROUP, *HOSTS, RUN_A, RUN_B, BAD_FILE]
# names a page must show (escaped): the straggler's host, the runs, the failed file...
SHOWN = {"overview": [HOSTS[1]], "ranks": [HOSTS[1]], "runs": [RUN_B, BAD_FILE],
         "compare": [RUN_A, RUN_B, HOSTS[1]], "kernels": [KERNEL],
         "communication": [GROUP]}


def _trace(rank: int) -> dict[str, Any]:
    """kineto_trace with hostile names; rank SLOW arrives 300 us late at every all-reduce
    (its GEMM runs longer), so it is the straggler the pages name with its host (4 ranks,
    5 steps: too often last to be chance)."""
    text = json.dumps(kineto_trace(rank=rank, world_size=WORLD, steps=5))
    for old, new in (("sm90_xmma_gemm_bf16", KERNEL), ("aten::copy_", OP),
                     ("default_pg", GROUP)):
        text = text.replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1])
    trace: dict[str, Any] = json.loads(text)
    trace["host_name"] = HOSTS[rank // 2]
    if rank == SLOW:
        for e in trace["traceEvents"]:
            if e.get("cat") == "kernel" and e["name"] == KERNEL:
                e["dur"] += 300.0
            elif e.get("cat") == "kernel" and e["name"].startswith("ncclDevKernel"):
                e["ts"] += 300.0
                e["dur"] -= 300.0
    return trace


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    db = root / "db.duckdb"
    for run, base in ((RUN_A, 0), (RUN_B, 86_400 * 10**9)):
        folder = root / run.replace("/", "_")
        for r in range(WORLD):
            trace = _trace(r)
            trace["baseTimeNanoseconds"] += base
            write_trace(folder / f"rank{r}.json.gz", trace)
        if run == RUN_B:
            (folder / BAD_FILE).write_text("{not json")
        stepscope.ingest_run([folder], db=db, run=run)
    return db


def bodies(at: AppTest) -> list[str]:
    """Every Markdown text the page wrote: bodies of markdown, captions, alerts and
    subheaders, expander and metric labels and metric help."""
    out: list[str] = []
    for kind in ("markdown", "caption", "info", "warning", "error", "success", "subheader"):
        out += [str(e.value) for e in getattr(at, kind)]
    out += [str(e.label) for e in at.expander]
    out += [str(m.label) for m in at.metric]
    out += [str(m.proto.help) for m in at.metric if m.proto.help]
    return out


def parsed(body: str) -> str:
    """The text a reader sees in `body` (code spans as written)."""
    ast = GFM(body)
    assert isinstance(ast, list)
    return " ".join(_text(n) for n in _nodes(ast)
                    if n["type"] in ("paragraph", "heading", "block_text", "table_cell"))


@pytest.mark.parametrize("page", sorted(PAGES))
def test_every_page_shows_hostile_names_as_written(page: str, hostile_db: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    at = app_test(monkeypatch, hostile_db, page=page, run=RUN_B)
    if page == "compare":
        at.query_params["vs"] = RUN_A
    at.run()
    no_exception(at)
    texts = bodies(at)
    for body in texts:
        bare = CODE_SPAN.sub("", body)  # a code span shows its name as written
        assert HOSTILE not in bare and ":red[" not in bare, (page, body)
        reads = parsed(body)
        for name in NAMES:
            if _escaped(name, body):
                assert name in reads, (page, name, body, reads)
    for name in SHOWN.get(page, []):
        assert any(_escaped(name, b) for b in texts), (page, name, texts)
    charted = [t for spec in chart_specs(at) for t in strings(spec)]
    for text in charted:  # Plotly's HTML subset: no name writes a raw `<` or `>`
        assert "<8, *_" not in text and "`q`>" not in text, (page, text)
    for name in CHARTED.get(page, []):
        assert any(chart_text(name) in t for t in charted), (page, name)


# names a page's charts must show (as entities: chart_text)
CHARTED = {"kernels": [KERNEL], "communication": [GROUP], "ranks": [HOSTS[1]],
           "compare": [RUN_A, RUN_B]}


def chart_specs(at: AppTest) -> list[Any]:
    """The Plotly figures of the page, as the JSON Streamlit sends the browser."""
    return [json.loads(e.proto.spec) for e in at.get("plotly_chart")]


def strings(value: Any) -> list[str]:
    """Every string in a figure's JSON (titles, labels, text, hover values)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


def _escaped(name: str, body: str) -> bool:
    """`name` in `body` as plain() writes it, or inside a code span (a file's path)."""
    return plain(name) in body or any(name in m.group(0) for m in CODE_SPAN.finditer(body))


def test_chart_text_writes_plotlys_tags_and_entities_as_entities() -> None:
    assert chart_text("void gemm<float, 128> <b>x</b> &amp;") == (
        "void gemm&lt;float, 128&gt; &lt;b&gt;x&lt;/b&gt; &amp;amp;")
    assert chart_text("rank 3 · tp_group") == "rank 3 · tp_group"


def test_plain_escapes_what_streamlit_reads_and_reads_back() -> None:
    """plain is md_text plus Streamlit's `$` and a `:` before a character; the parsed
    text is the name."""
    assert plain("aten::_to_copy $x$ :red[y]") == "aten\\:\\:\\_to_copy \\$x\\$ \\:red\\[y\\]"
    assert plain("all_reduce: 3.5 ms") == "all_reduce: 3.5 ms"
    assert plain("a:b: c:") == "a\\:b: c:"
    for name in NAMES:
        assert parsed(plain(name)) == name
        assert parsed(f"- {code(name)}") == name
