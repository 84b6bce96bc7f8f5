"""Self-contained HTML reports: `stepscope report --format html`, `stepscope diff --format
html` and the nightly report.html.

One file, everything inline: CSS, static SVG charts (dashboard/svg_charts.py) and a
three-line print helper; no request of any kind, so it opens from file://, as an email
attachment and on paper. Big tables are aggregated (slowest ranks, per host) and long
details folded into <details>, so 1,024 ranks stay a few hundred KB.

Pure functions over the report / diff / nightly models; each section is one function.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from stepscope.analyzers.model import (
    Breakdown,
    CollectiveChange,
    Diff,
    Mfu,
    NcclSection,
    RankTimes,
    Recommendation,
    Report,
    StragglerChanges,
)
from stepscope.analyzers.nightly import NightlyReport
from stepscope.dashboard.labels import CATEGORIES, STAGE_LABELS, STAGES
from stepscope.dashboard.labels import CATEGORY_LABELS as LABELS
from stepscope.dashboard.svg_charts import COLORS, diverging_bars, stacked_bars, waterfall

FULL_RANK_TABLE_MAX = 256   # more ranks: slowest ranks and per-host tables only
RANK_CHART_MAX = 32         # more ranks: percentile ranks and the slowest in the chart
SLOWEST_SHOWN = 16
STEP_ROWS_OPEN = 20

CSS = """
:root { color-scheme: light; }
body { -webkit-print-color-adjust: exact; print-color-adjust: exact;
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       color: #212121; margin: 24px auto; max-width: 1000px; padding: 0 16px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px;
     border-bottom: 1px solid #e0e0e0; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 16px 0 6px; }
.meta { color: #616161; margin: 0 0 12px; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 12px 0; }
.card { border: 1px solid #e0e0e0; border-radius: 6px; padding: 8px 12px; min-width: 140px; }
.card .k { color: #616161; font-size: 12px; } .card .v { font-size: 20px; font-weight: 600; }
.card .d { font-size: 12px; } .bad { color: #c62828; } .good { color: #2e7d32; }
.verdict { display: inline-block; padding: 2px 10px; border-radius: 4px; color: #fff;
           font-weight: 700; } .verdict.FAIL { background: #c62828; }
.verdict.OK { background: #2e7d32; } .verdict.PARTIAL { background: #ef6c00; }
table { border-collapse: collapse; margin: 8px 0; font-size: 13px; }
th, td { border: 1px solid #e0e0e0; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f5f5f5; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 6px; }
svg.chart { max-width: 100%; height: auto; display: block; margin: 8px 0; }
svg.chart text { fill: #212121; }
details { margin: 8px 0; } summary { cursor: pointer; color: #1565c0; }
.rec { border-left: 4px solid #1565c0; padding: 4px 10px; margin: 8px 0; background: #fafafa; }
.rec.high { border-color: #c62828; } .rec.medium { border-color: #ef6c00; }
code { background: #f5f5f5; padding: 0 3px; border-radius: 3px; }
footer { color: #9e9e9e; font-size: 12px; margin-top: 32px; }
@media print { body { margin: 0; max-width: none; } h2 { break-after: avoid; }
  svg.chart, table, .card { break-inside: avoid; } summary { display: none; }
  details::details-content { content-visibility: visible; display: block; } }
"""
# Printing shows folded details too (browsers without ::details-content).
PRINT_JS = ("addEventListener('beforeprint',function(){document.querySelectorAll('details')"
            ".forEach(function(d){d.open=true})});")


# -- building blocks -----------------------------------------------------------------


def _e(value: object) -> str:
    return escape(str(value))


def _num(v: float | None, fmt: str = ".2f") -> str:
    return "–" if v is None else format(v, fmt)


def _pct(v: float | None, fmt: str = ".1f") -> str:
    return "–" if v is None else f"{100 * v:{fmt}}%"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]],
           numeric: Sequence[int] = ()) -> str:
    """A table from already-escaped cells; `numeric` columns right-aligned."""
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>"
                         for i, c in enumerate(row)) + "</tr>"
        for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _card(key: str, value: str, delta: str = "", cls: str = "") -> str:
    d = f'<div class="d {cls}">{delta}</div>' if delta else ""
    return f'<div class="card"><div class="k">{_e(key)}</div><div class="v">{value}</div>{d}</div>'


def _section(title: str, *parts: str, anchor: str = "") -> str:
    ident = f' id="{anchor}"' if anchor else ""
    return f"<section{ident}><h2>{_e(title)}</h2>{''.join(parts)}</section>"


def _swatch(cat: str) -> str:
    return f'<span class="swatch" style="background:{COLORS[cat]}"></span>'


def _page(title: str, sections: Sequence[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title><style>{CSS}</style></head><body>"
            + "".join(sections)
            + "<footer>stepscope: self-contained report (no external resources).</footer>"
            + f"<script>{PRINT_JS}</script></body></html>\n")


# -- the run report ------------------------------------------------------------------


def _header(report: Report) -> str:
    run, lay = report.run, report.layout
    meta = (f"{run.ranks} of {run.world_size} ranks on {len(run.hosts) or '?'} "
            f"host(s) · {run.device} · TP {lay.tp} × PP {lay.pp} × DP {lay.dp} "
            f"(CP {lay.cp}, EP {lay.ep}) · timeline {run.timeline or '–'} · "
            f"status {run.status}")
    notes = "".join(f"<li>{_e(n)}</li>" for n in report.notes)
    return (f"<h1>stepscope report: {_e(run.name)}</h1><p class=\"meta\">{_e(meta)}</p>"
            + (f"<ul>{notes}</ul>" if notes else ""))


def _largest_loss(breakdown: Breakdown) -> tuple[str, float] | None:
    losses = [(breakdown.ms(c), c) for c in CATEGORIES
              if c != "compute" and breakdown.ms(c) > 0]
    if not losses:
        return None
    ms, cat = max(losses)
    return cat, ms


def _cards(report: Report) -> str:
    step = report.step_time_ms
    cards = [_card("step time", f"{step:.2f} ms"),
             _card("MFU", _pct(report.mfu.mfu)), _card("HFU", _pct(report.mfu.hfu))]
    loss = _largest_loss(report.breakdown_ms)
    if loss:
        share = f"{100 * loss[1] / step:.1f}% of the step" if step else ""
        cards.append(_card("largest loss", _e(LABELS[loss[0]]), f"{loss[1]:.2f} ms · {share}"))
    cards.append(_card("stragglers", str(len(report.stragglers))))
    return f'<div class="cards">{"".join(cards)}</div>'


def _breakdown(report: Report) -> str:
    step, bd = report.step_time_ms, report.breakdown_ms.as_dict()
    chart = stacked_bars([("mean step", bd)], CATEGORIES, LABELS,
                         "Where the step time went (mean over ranks, ms per step)")
    rows = [[_swatch(c) + _e(LABELS[c]), f"{bd[c]:.2f}", _pct(bd[c] / step if step else None)]
            for c in CATEGORIES]
    rows.append(["<b>step</b>", f"<b>{step:.2f}</b>", "100%"])
    return _section(f"Where the step time went ({step:.2f} ms/step)", chart,
                    _table(["category", "ms/step", "share"], rows, numeric=(1, 2)),
                    anchor="breakdown")


def _mfu_facts(mfu: Mfu) -> list[str]:
    facts = [f"<b>MFU {_pct(mfu.mfu)}</b>, HFU {_pct(mfu.hfu)} of "
             f"{(mfu.peak_flops_per_gpu or 0.0) / 1e12:.1f} TFLOP/s {_e(mfu.dtype)} per GPU "
             f"({_e(mfu.device)}; peak table {_e(mfu.peak_table_version)})",
             f"model FLOPs per step: {_num(mfu.model_flops_per_step, '.4g')} (from the "
             f"{_e(mfu.flops_source)})"]
    if mfu.peak_reason:
        facts.append(f"peak: {_e(mfu.peak_reason)}")
    if mfu.achieved_tflops_per_gpu is not None:
        facts.append(f"achieved {mfu.achieved_tflops_per_gpu:.1f} TFLOP/s per GPU while "
                     "computing")
    if mfu.message:
        facts.append(f"note: {_e(mfu.message)}")
    return facts


def _mfu(report: Report) -> str:
    mfu = report.mfu
    if mfu.mfu is None:
        return _section("MFU", f"<p>Not computed: {_e(mfu.message)}</p>", anchor="mfu")
    stages = [(w.name, STAGE_LABELS[w.name], w.points) for w in mfu.waterfall]
    chart = waterfall(stages, 100 * mfu.mfu, "MFU waterfall: points of peak lost per cause")
    items = "".join(f"<li>{f}</li>" for f in _mfu_facts(mfu))
    return _section("MFU", f"<ul>{items}</ul>", chart, anchor="mfu")


def _recommendations(recs: Sequence[Recommendation]) -> str:
    if not recs:
        return _section("Recommendations",
                        "<p>None: no category costs enough for a fix to pay off.</p>",
                        anchor="recommendations")
    parts = []
    for r in recs:
        pts = (f", about +{r.expected_mfu_points:.1f} MFU points"
               if r.expected_mfu_points is not None else "")
        parts.append(f'<div class="rec {_e(r.severity)}"><b>[{_e(r.severity)}] '
                     f"{_e(r.title)}</b> (<code>{_e(r.id)}</code>): expected gain "
                     f"{r.expected_gain_ms:.2f} ms/step{pts}.<br>evidence: "
                     f"{_e(r.evidence)}<br>{_e(r.detail)}</div>")
    return _section("Recommendations", *parts, anchor="recommendations")


def _stragglers(report: Report) -> str:
    rows = report.stragglers
    if not rows:
        return _section("Stragglers", "<p>None: no rank is consistently the last to arrive.</p>",
                        anchor="stragglers")
    headers = ["rank", "host", "waited on ms/step", "slowdown", "evidence"]
    cells = [[_e(s.rank), _e(s.host or "–"), f"{s.waited_on_ms:.2f}", _num(s.slowdown),
              _e(s.evidence)] for s in rows]
    parts = [_table(headers, cells[:SLOWEST_SHOWN], numeric=(0, 2, 3))]
    if len(cells) > SLOWEST_SHOWN:  # most severe first: the rest folded
        parts.append(f"<details><summary>{len(cells) - SLOWEST_SHOWN} more stragglers"
                     f"</summary>{_table(headers, cells[SLOWEST_SHOWN:], numeric=(0, 2, 3))}"
                     "</details>")
    return _section("Stragglers", *parts, anchor="stragglers")


def _communication(report: Report) -> str:
    rows = report.collectives
    if not rows:
        return ""
    table = _table(
        ["collective", "group", "size", "calls", "MB", "time ms", "exposed ms", "bus GB/s",
         "link (peak GB/s)"],
        [[_e(c.collective), _e(c.group_label), _e(c.group_size),
          f"{c.calls_per_step:.1f}", f"{c.bytes_per_step / 1e6:.1f}",
          f"{c.time_ms:.2f}", f"{c.exposed_ms:.2f}", _num(c.bus_bw_gbs, ".1f"),
          f"{_e(c.link)} ({_num(c.link_peak_gbs, '.0f')})"] for c in rows],
        numeric=(2, 3, 4, 5, 6, 7))
    return _section("Communication (per rank and step)", table, anchor="communication")


NCCL_ROWS_OPEN = 16  # more communicators / measurements: the rest folded


def _folded(headers: list[str], rows: list[list[str]], numeric: Sequence[int],
            what: str) -> str:
    """A table of the first NCCL_ROWS_OPEN rows, the rest in a <details> below it."""
    table = _table(headers, rows[:NCCL_ROWS_OPEN], numeric)
    if len(rows) <= NCCL_ROWS_OPEN:
        return table
    rest = _table(headers, rows[NCCL_ROWS_OPEN:], numeric)
    return (f"{table}<details><summary>{len(rows) - NCCL_ROWS_OPEN} more {what}</summary>"
            f"{rest}</details>")


def _group_name(pg_desc: str | None, pg_names: Sequence[str], comm_id: str) -> str:
    return f"{pg_desc or 'group'} (pg {', '.join(pg_names)})" if pg_names else comm_id


def _nccl_groups(nccl: NcclSection) -> str:
    gdr = {True: "yes", False: '<b class="bad">no</b>', None: "–"}
    rows = [[_e(_group_name(g.pg_desc, g.pg_names, g.comm_id)), _e(_ranks_text(g.ranks)),
             str(len(g.hosts)), _e(", ".join(g.tiers) or "–"), _e(g.link), gdr[g.gdr]]
            for g in nccl.groups]
    return ("<h3>Communicators and their transports</h3>"
            + _folded(["group", "ranks", "hosts", "transports", "link", "GPUDirect RDMA"],
                      rows, (2,), "communicators"))


def _nccl_measured(nccl: NcclSection) -> str:
    rows = [[_e(_group_name(m.pg_desc, m.pg_names, m.comm_id)), _e(m.collective),
             _e(_ranks_text(m.ranks)), str(m.n_ops), f"{m.msg_bytes / 1e6:.1f}",
             f"{m.bus_bw_gbs:.1f}", f"{m.bus_bw_p10_gbs:.1f}",
             _e(" ".join(f"{p.bus_bw_gbs:.0f}" for p in m.over_time) or "–")]
            for m in nccl.measured]
    return ("<h3>Bus bandwidth NCCL measured (Inspector)</h3>"
            + _folded(["group", "collective", "ranks", "ops", "median MB",
                       "bus GB/s (median)", "p10", "over time (GB/s)"],
                      rows, (3, 4, 5, 6), "measurements"))


def _nccl(report: Report) -> str:
    """What NCCL's own evidence says (logs, Flight Recorder, Inspector); nothing without it."""
    nccl = report.nccl
    if nccl is None:
        return ""
    sources = ", ".join(f"{s.files} {s.kind.replace('_', ' ')} file(s)"
                        + (f" ({s.ranks} ranks)" if s.ranks else "") for s in nccl.sources)
    parts = [f"<p>NCCL {_e(', '.join(nccl.versions) or 'version unknown')}; from "
             f"{_e(sources)}.</p>"]
    if nccl.hosts:
        hosts = "; ".join(f"{h}: ranks {_ranks_text(r)}" for h, r in sorted(nccl.hosts.items()))
        parts.append(f"<p>{len(nccl.hosts)} host(s) in the NCCL logs: {_e(hosts)}</p>")
    parts += [f'<div class="rec {_e(f.severity)}"><b>[{_e(f.severity)}] {_e(f.kind)}</b>: '
              f"{_e(f.message)}</div>" for f in nccl.findings]
    if nccl.groups:
        parts.append(_nccl_groups(nccl))
    if nccl.measured:
        parts.append(_nccl_measured(nccl))
    return _section("NCCL", *parts, anchor="nccl")


def _pipeline(report: Report) -> str:
    pipe = report.pipeline
    if pipe is None:
        return _section("Pipeline", "<p>No pipeline parallelism (no point-to-point traffic "
                                    "between stages).</p>", anchor="pipeline")
    head = (f"<p>{pipe.stages} stages × {pipe.microbatches} microbatches "
            f"({pipe.pipelines} pipeline(s)); bubble measured "
            f"{_pct(pipe.bubble_fraction)} of the step, 1F1B theory (S-1)/(S-1+M) = "
            f"{_pct(pipe.bubble_theory)}.</p>")
    table = _table(["stage", "ranks", "bubble ms", "idle ms"],
                   [[_e(s.stage), _e(_ranks_text(s.ranks)), f"{s.bubble_ms:.2f}",
                     f"{s.idle_ms:.2f}"] for s in pipe.per_stage], numeric=(0, 2, 3))
    return _section("Pipeline", head, table, anchor="pipeline")


def _ranks_text(ranks: Sequence[int], limit: int = 12) -> str:
    shown = ", ".join(map(str, ranks[:limit]))
    return shown + (f", … ({len(ranks)} ranks)" if len(ranks) > limit else "")


def _rank_row(r: RankTimes) -> list[str]:
    return [_e(r.rank), _e(r.host or "–"), f"{r.step_time_ms:.2f}",
            *[f"{r.breakdown_ms.ms(c):.2f}" for c in CATEGORIES]]


RANK_HEADERS = ["rank", "host", "step ms", *[LABELS[c] for c in CATEGORIES]]
RANK_NUMERIC = (0, *range(2, 3 + len(CATEGORIES)))


def _chart_ranks(per_rank: Sequence[RankTimes]) -> list[tuple[str, dict[str, float]]]:
    """All ranks when few; else the fastest, median, p90 and the slowest ranks."""
    if len(per_rank) <= RANK_CHART_MAX:
        return [(f"rank {r.rank}", r.breakdown_ms.as_dict()) for r in per_rank]
    ordered = sorted(per_rank, key=lambda r: r.step_time_ms)
    n = len(ordered)
    picks = [("fastest", 0), ("median", n // 2), ("p90", int(0.9 * (n - 1)))]
    rows = [(f"rank {ordered[i].rank} ({tag})", ordered[i].breakdown_ms.as_dict())
            for tag, i in picks]
    rows += [(f"rank {r.rank}", r.breakdown_ms.as_dict()) for r in ordered[::-1][:10]]
    return rows


def _host_rows(per_rank: Sequence[RankTimes]) -> list[list[str]]:
    hosts: dict[str, list[RankTimes]] = {}
    for r in per_rank:
        hosts.setdefault(r.host or "–", []).append(r)
    rows = []
    for host, ranks in sorted(hosts.items()):
        mean = {c: sum(r.breakdown_ms.ms(c) for r in ranks) / len(ranks) for c in CATEGORIES}
        step = sum(r.step_time_ms for r in ranks) / len(ranks)
        rows.append([_e(host), str(len(ranks)), f"{step:.2f}",
                     f"{max(r.step_time_ms for r in ranks):.2f}",
                     *[f"{mean[c]:.2f}" for c in CATEGORIES]])
    return rows


def _per_rank(report: Report) -> str:
    per_rank = report.per_rank
    if not per_rank:
        return ""
    n = len(per_rank)
    title = ("Per rank (ms/step)" if n <= RANK_CHART_MAX else
             f"Per rank (ms/step): fastest, median, p90 and the 10 slowest of {n} ranks")
    parts = [stacked_bars(_chart_ranks(per_rank), CATEGORIES, LABELS, title)]
    if n > SLOWEST_SHOWN:
        slow = sorted(per_rank, key=lambda r: -r.step_time_ms)[:SLOWEST_SHOWN]
        parts += [f"<h3>The {SLOWEST_SHOWN} slowest ranks</h3>",
                  _table(RANK_HEADERS, [_rank_row(r) for r in slow], RANK_NUMERIC)]
    if len({r.host for r in per_rank}) > 1:
        parts += ["<h3>Per host (mean over its ranks)</h3>",
                  _table(["host", "ranks", "step ms", "slowest ms",
                          *[LABELS[c] for c in CATEGORIES]], _host_rows(per_rank),
                         (1, *range(2, 4 + len(CATEGORIES))))]
    if n <= FULL_RANK_TABLE_MAX:
        table = _table(RANK_HEADERS, [_rank_row(r) for r in per_rank], RANK_NUMERIC)
        parts.append(table if n <= SLOWEST_SHOWN else
                     f"<details><summary>All {n} ranks</summary>{table}</details>")
    else:
        parts.append(f"<p>All {n} ranks: see <code>per_rank</code> in the JSON report.</p>")
    return _section("Per rank", *parts, anchor="per-rank")


def _per_step(report: Report) -> str:
    steps = report.per_step
    if not steps:
        return ""
    rows = [[_e(s.step), "yes" if s.complete else "no (last)", _e(s.n_ranks),
             f"{s.step_time_ms:.2f}", *[f"{s.breakdown_ms.ms(c):.2f}" for c in CATEGORIES]]
            for s in steps]
    headers = ["step", "complete", "ranks", "step ms", *[LABELS[c] for c in CATEGORIES]]
    numeric = (0, 2, *range(3, 4 + len(CATEGORIES)))
    table = _table(headers, rows, numeric)
    if len(rows) > STEP_ROWS_OPEN:
        table = f"<details><summary>All {len(rows)} steps</summary>{table}</details>"
    return _section("Per step (ms, mean over ranks)", table, anchor="per-step")


def report_sections(report: Report) -> list[str]:
    """The run report's sections, headline first, detail tables last."""
    return [_header(report), _cards(report), _breakdown(report), _mfu(report),
            _recommendations(report.recommendations), _stragglers(report),
            _communication(report), _nccl(report), _pipeline(report), _per_rank(report),
            _per_step(report)]


def report_html(report: Report) -> str:
    """`stepscope report --format html`."""
    return _page(f"stepscope report: {report.run.name}", report_sections(report))


# -- the diff ------------------------------------------------------------------------


def _delta_cls(v: float | None, good_when_positive: bool) -> str:
    if v is None or abs(v) < 1e-12:
        return ""
    return "good" if (v > 0) == good_when_positive else "bad"


def _comparison(d: Diff) -> list[list[str]]:
    a, b = d.a, d.b
    rows = [["MFU", _pct(a.mfu), _pct(b.mfu), _num(d.mfu_delta_points, "+.1f") + " pts"],
            ["step time ms", f"{a.step_time_ms:.2f}", f"{b.step_time_ms:.2f}",
             f"{d.step_time_delta_ms:+.2f}"]]
    rows += [[_swatch(c) + _e(LABELS[c]) + " ms", f"{a.breakdown_ms.ms(c):.2f}",
              f"{b.breakdown_ms.ms(c):.2f}", f"{d.breakdown_delta_ms.ms(c):+.2f}"]
             for c in CATEGORIES]
    return rows


def diff_sections(d: Diff, title: str | None = None) -> list[str]:
    """What changed between the baseline (a) and this run (b), and what it cost."""
    a, b = d.a, d.b
    heading = title or f"Diff: {a.run} → {b.run}"
    parts = [f"<p>{_e(d.narrative)}</p>",
             stacked_bars([(f"{a.run} (a)", a.breakdown_ms.as_dict()),
                           (f"{b.run} (b)", b.breakdown_ms.as_dict())], CATEGORIES, LABELS,
                          "Step time by category, baseline vs this run (ms per step)",
                          label_w=180),
             _table(["", _e(a.run), _e(b.run), "change"], _comparison(d), numeric=(1, 2, 3))]
    pts = d.mfu_points_by_category
    if pts is None:
        parts.append("<p>MFU points by cause: not available (MFU needs a known peak and "
                     "model FLOPs on both runs).</p>")
    else:
        parts += ["<h3>MFU points by cause</h3>",
                  diverging_bars([(s, STAGE_LABELS[s], pts.points(s)) for s in STAGES],
                                 "MFU change by cause (percentage points)", "pts")]
    parts += _diff_details(d)
    return [_section(heading, *parts, anchor="diff")]


def _straggler_items(s: StragglerChanges) -> list[str]:
    return ([f"<li>new: rank {_e(x.rank)} ({_e(x.host)})</li>" for x in s.new]
            + [f"<li>resolved: rank {_e(x.rank)} ({_e(x.host)})</li>" for x in s.resolved]
            + [f"<li>still: rank {_e(x.rank)} ({_e(x.host)})</li>" for x in s.persisting])


def _diff_details(d: Diff) -> list[str]:
    out = ["<h3>Setup changes</h3>"]
    out.append(_table(["what", "a", "b"], [[_e(c.what), _e(c.a), _e(c.b)]
                                          for c in d.setup_changes])
               if d.setup_changes else "<p>None.</p>")
    if d.collectives:
        out += ["<h3>Communication (per rank and step)</h3>",
                _table(["collective", "group", "exposed ms", "change", "bus GB/s", "link"],
                       [_collective_change(c) for c in d.collectives], numeric=(2, 3, 4))]
    items = _straggler_items(d.stragglers)
    out += ["<h3>Stragglers</h3>", f"<ul>{''.join(items)}</ul>" if items
            else "<p>None on either run.</p>"]
    if d.top_ops:
        rows = [[f"<code>{_e(o.op[:80])}</code>", f"{o.a_ms:.3f}", f"{o.b_ms:.3f}",
                 f"{o.delta_ms:+.3f}"] for o in d.top_ops]
        out.append("<details><summary>Largest changes per op (ms per rank and step)</summary>"
                   + _table(["op", "a", "b", "change"], rows, numeric=(1, 2, 3))
                   + "</details>")
    return out


def _collective_change(c: CollectiveChange) -> list[str]:
    ca, cb = c.a, c.b
    link = (cb.link if cb else None) or (ca.link if ca else None)
    return [_e(c.collective), _e(c.group),
            f"{_num(ca.exposed_ms if ca else None)} → {_num(cb.exposed_ms if cb else None)}",
            f"{c.exposed_delta_ms:+.2f}",
            f"{_num(ca.bus_bw_gbs if ca else None, '.0f')} → "
            f"{_num(cb.bus_bw_gbs if cb else None, '.0f')}",
            _e(link or "–")]


def diff_html(d: Diff) -> str:
    """`stepscope diff --format html`."""
    title = f"stepscope diff: {d.a.run} → {d.b.run}"
    return _page(title, [f"<h1>{_e(title)}</h1>", *diff_sections(d, "What changed"),
                         _recommendations(d.recommendations)])


# -- the nightly report --------------------------------------------------------------


def _nightly_cards(night: NightlyReport) -> str:
    r, d = night.report, night.diff
    mfu = r.mfu.mfu
    mfu_delta = d.mfu_delta_points if d else None
    step_delta = d.step_time_delta_ms if d else None
    cards = [
        _card("MFU", _pct(mfu), "" if mfu_delta is None else f"{mfu_delta:+.1f} pts",
              _delta_cls(mfu_delta, True)),
        _card("step time", f"{r.step_time_ms:.2f} ms",
              "" if step_delta is None else f"{step_delta:+.2f} ms",
              _delta_cls(step_delta, False)),
        _card("checks", f"{len(night.checks) - len(night.failed_checks)}/{len(night.checks)}"
              " pass" if night.checks else "none"),
        _card("ranks", f"{r.run.ranks}/{r.run.world_size}",
              night.status, "bad" if night.status != "complete" else ""),
    ]
    return f'<div class="cards">{"".join(cards)}</div>'


def _checks(night: NightlyReport) -> str:
    if not night.checks:
        return ""
    rows = [[f"<code>{_e(c.threshold.text)}</code>", _num(c.value, ".4g"),
             f'<span class="{"bad" if c.failed else "good"}">{_e(c.status)}</span>']
            for c in night.checks]
    return _section("Checks", _table(["fail if", "value", "result"], rows, numeric=(1,)),
                    anchor="checks")


def nightly_html(night: NightlyReport) -> str:
    """report.html of `stepscope nightly`: verdict, checks, the diff vs the baseline,
    then the full report."""
    base = night.baseline
    against = (f"baseline {base.run} ({base.selected_by})" if base
               else night.baseline_note or "no baseline")
    causes = night.top_causes()
    started = f"{night.trace_start:%Y-%m-%d %H:%M:%S} UTC" if night.trace_start else "–"
    head = (f'<h1>Nightly: {_e(night.job)} <span class="verdict {night.verdict}">'
            f"{night.verdict}</span></h1><p class=\"meta\">run {_e(night.run)} · traces from "
            f"{_e(started)} · {_e(against)}</p>"
            + (f"<p><b>Top cause:</b> {_e(causes[0])}</p>" if causes else ""))
    failed = "".join(f"<li><code>{_e(c.threshold.text)}</code>: {_e(c.value_text())}</li>"
                     for c in night.failed_checks)
    if failed:
        head += f'<p class="bad"><b>Failed checks:</b></p><ul class="bad">{failed}</ul>'
    if night.failed_files:
        files = "".join(f"<li>{_e(f)}: {_e(e)}</li>" for f, e in night.failed_files[:20])
        head += f"<p class=\"bad\"><b>Partial ingest</b>: {len(night.failed_files)} file(s) " \
                f"failed</p><ul>{files}</ul>"
    sections = [head, _nightly_cards(night), _checks(night)]
    if night.diff is not None:
        sections += diff_sections(night.diff, f"Change vs baseline {night.diff.a.run}")
    sections += report_sections(night.report)
    return _page(f"stepscope nightly: {night.job} {night.verdict}", sections)
