"""`stepscope diff --format html`: what changed between two runs
(analyzers.results.Diff) as one self-contained HTML file; `diff_sections` is reused by the
nightly report for the change against its baseline."""

from __future__ import annotations

from stepscope.analyzers.results import CollectiveChange, Diff, StragglerChanges
from stepscope.dashboard.render.diff import side_change
from stepscope.dashboard.render.format import EN_DASH, mfu_points, pct, short_names
from stepscope.dashboard.render.html_page import esc, page, section, swatch, table
from stepscope.dashboard.render.html_report import recommendations_section
from stepscope.dashboard.render.labels import CATEGORIES, COMM_SPLIT, STAGE_LABELS, STAGES
from stepscope.dashboard.render.labels import CATEGORY_LABELS as LABELS
from stepscope.dashboard.render.svg_charts import diverging_bars, stacked_bars


def _comparison(d: Diff) -> list[list[str]]:
    a, b = d.a, d.b
    rows = [["MFU", pct(a.mfu, missing=EN_DASH), pct(b.mfu, missing=EN_DASH),
             mfu_points(d.mfu_delta_points, missing=EN_DASH) + " pts"],
            ["step time ms", f"{a.step_time_ms:.2f}", f"{b.step_time_ms:.2f}",
             f"{d.step_time_delta_ms:+.2f}"]]
    rows += [[swatch(c) + esc(LABELS[c]) + " ms", f"{a.breakdown_ms.ms(c):.2f}",
              f"{b.breakdown_ms.ms(c):.2f}", f"{d.breakdown_delta_ms.ms(c):+.2f}"]
             for c in CATEGORIES]
    return rows


def diff_sections(d: Diff, title: str | None = None) -> list[str]:
    """What changed between the baseline (a) and this run (b), and what it cost."""
    a, b = d.a, d.b
    heading = title or f"Diff: {a.run} → {b.run}"
    parts = [f"<p>{esc(d.narrative)}</p>",
             stacked_bars([(f"{a.run} (a)", a.breakdown_ms.as_dict()),
                           (f"{b.run} (b)", b.breakdown_ms.as_dict())], CATEGORIES, LABELS,
                          "Step time by category, baseline vs this run (ms per step)",
                          label_w=180),
             table(["", a.run, b.run, "change"], _comparison(d), numeric=(1, 2, 3))]
    pts = d.mfu_points_by_category
    if pts is None:
        parts.append("<p>MFU points by cause: not available (MFU needs a known peak and "
                     "model FLOPs on both runs).</p>")
    else:
        parts += ["<h3>MFU points by cause</h3>",
                  diverging_bars([(s, STAGE_LABELS[s], pts.points(s)) for s in STAGES],
                                 "MFU change by cause (percentage points)", "pts")]
    parts += _details(d)
    return [section(heading, *parts, anchor="diff")]


def _straggler_items(s: StragglerChanges) -> list[str]:
    return ([f"<li>new: rank {esc(x.rank)} ({esc(x.host)})</li>" for x in s.new]
            + [f"<li>resolved: rank {esc(x.rank)} ({esc(x.host)})</li>" for x in s.resolved]
            + [f"<li>still: rank {esc(x.rank)} ({esc(x.host)})</li>" for x in s.persisting])


def _details(d: Diff) -> list[str]:
    out = ["<h3>Setup changes</h3>"]
    out.append(table(["what", "a", "b"], [[esc(c.what), esc(c.a), esc(c.b)]
                                         for c in d.setup_changes])
               if d.setup_changes else "<p>None.</p>")
    if d.collectives:
        out += ["<h3>Communication (per rank and step)</h3>", f"<p>{esc(COMM_SPLIT)}</p>",
                table(["collective", "group", "exposed ms", "change", "straggler wait ms",
                       "overlapped ms", "bus GB/s", "link"],
                      [_collective_change(c) for c in d.collectives],
                      numeric=(2, 3, 4, 5, 6))]
    items = _straggler_items(d.stragglers)
    out += ["<h3>Stragglers</h3>", f"<ul>{''.join(items)}</ul>" if items
            else "<p>None on either run.</p>"]
    if d.top_ops:
        shown = short_names([o.op for o in d.top_ops], 80)
        rows = [[f"<code title=\"{esc(o.op)}\">{esc(name)}</code>", f"{o.a_ms:.3f}",
                 f"{o.b_ms:.3f}", f"{o.delta_ms:+.3f}"]
                for name, o in zip(shown, d.top_ops, strict=True)]
        out.append("<details><summary>Largest changes per op (ms per rank and step)</summary>"
                   + table(["op", "a", "b", "change"], rows, numeric=(1, 2, 3))
                   + "</details>")
    return out


def _collective_change(c: CollectiveChange) -> list[str]:
    ca, cb = c.a, c.b
    link = (cb.link if cb else None) or (ca.link if ca else None)
    return [esc(c.collective), esc(c.group),
            side_change(c, "exposed_ms", missing=EN_DASH, arrow="→"),
            f"{c.exposed_delta_ms:+.2f}",
            side_change(c, "straggler_wait_ms", missing=EN_DASH, arrow="→"),
            side_change(c, "overlapped_ms", missing=EN_DASH, arrow="→"),
            side_change(c, "bus_bw_gbs", ".0f", EN_DASH, "→"), esc(link or EN_DASH)]


def diff_html(d: Diff) -> str:
    """`stepscope diff --format html`."""
    title = f"stepscope diff: {d.a.run} → {d.b.run}"
    return page(title, [f"<h1>{esc(title)}</h1>", *diff_sections(d, "What changed"),
                        recommendations_section(d.recommendations, d.b.step_time_ms)])
