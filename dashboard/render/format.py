"""Number formatting of every renderer and page: the one place a percentage, a share, a
number or a rank list becomes text (labels live in labels.py).

The rule for digits (`decimals`, `fixed`) lives in analyzers/numbers.py, shared with the
analyzers' own sentences (the MFU coverage headline, the diff narrative): a value is shown
with the usual number of decimals, and with more when that would misstate it by more than
a tenth of itself, so an MFU of 0.0312 percent reads "0.03%", never "0.0%", and a gain
of 0.004 points "+0.004", never "+0.0". Zero stays "0.0", and nothing is ever "-0.0".

`missing` is what a format shows for a value that could not be computed: "-" in
Markdown and plain text, "–" in HTML, "n/a" in the nightly summaries.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from stepscope.analyzers.numbers import MAX_DECIMALS as MAX_DECIMALS  # the shared rule,
from stepscope.analyzers.numbers import TOLERANCE as TOLERANCE  # re-exported
from stepscope.analyzers.numbers import decimals as decimals
from stepscope.analyzers.numbers import fixed as fixed
from stepscope.analyzers.numbers import mfu_percent
from stepscope.analyzers.results import Layout
from stepscope.dashboard.render.kernel_names import ELLIPSIS, fitted, forms, middle_cut

DASH = "-"       # Markdown and plain text
EN_DASH = "–"    # HTML


def pct(fraction: float | None, digits: int = 1, missing: str = DASH) -> str:
    """0.4213 -> '42.1%', 0.000312 -> '0.03%'; None -> `missing`."""
    return missing if fraction is None else f"{fixed(100 * fraction, digits)}%"


def mfu_pct(fraction: float | None, lower_bound: bool = False, missing: str = DASH) -> str:
    """An MFU as a headline shows it: '≥ 1.8%' when it counts only the shaped work
    (Mfu.lower_bound, docs/mfu.md "What the MFU covers"), else as pct."""
    return missing if fraction is None else mfu_percent(fraction, lower_bound)


def share(part: float, whole: float, digits: int = 1, missing: str = DASH) -> str:
    """`part` as a percentage of `whole`: (3, 12) -> '25.0%'; `missing` when whole is 0."""
    return f"{fixed(100 * part / whole, digits)}%" if whole else missing


def num(value: float | None, spec: str = ".2f", missing: str = DASH) -> str:
    """`value` in format `spec` ('.2f', '+.1f', '.4g'); None -> `missing`."""
    return missing if value is None else format(value, spec)


def mb(nbytes: float | None, missing: str = DASH) -> str:
    """Bytes as MB with one decimal; None (no call recorded a size) -> `missing`."""
    return missing if nbytes is None else f"{nbytes / 1e6:.1f}"


def points(value: float, digits: int = 1, signed: bool = False) -> str:
    """MFU points (percentage points) with the digits rule: -2.345 -> '-2.3', -0.04 ->
    '-0.04', 0.0 -> '0.0' ('+0.004' / '-2.35' with signed=True, digits=2)."""
    return fixed(value, digits, signed)


def mfu_points(value: float | None, digits: int = 1, missing: str = DASH) -> str:
    """A change of MFU in points, signed, with the digits rule: '+1.5', '+0.004'."""
    return missing if value is None else fixed(value, digits, signed=True)


def rank_list(ranks: Sequence[int], missing: str = DASH) -> str:
    """[0, 1, 3] -> '0, 1, 3'; no ranks -> `missing`."""
    return ", ".join(str(r) for r in ranks) if ranks else missing


def rank_list_short(ranks: Sequence[int], limit: int = 12) -> str:
    """The first `limit` ranks, then how many there are when that is not all of them:
    '0, 1, 2' or (64 ranks, limit 2) '0, 1, … (64 ranks)'."""
    shown = ", ".join(map(str, ranks[:limit]))
    return shown + (f", … ({len(ranks)} ranks)" if len(ranks) > limit else "")


def short_name(name: str, width: int = 80) -> str:
    """A kernel or op name shortened for display (render/kernel_names.py): templates'
    `(anonymous namespace)` reads `(anon)`, then the parameter list, nested template
    arguments, the return type, outer namespaces and the template arguments give way
    in that order until it fits, and only then the middle is cut. JSON keeps full names."""
    return fitted(name, width)


def short_names(names: list[str], width: int = 80) -> list[str]:
    """`short_name` of each; where two distinct names would read the same, each shows
    its most shortened form in which it differs from the others, cut around a
    difference, so distinct kernels never show as one ('internode::dispatch<false, 8,
    false, 8>(…)' and '<false, 8, true, 8>(…)' stay two). Groups that still read alike
    are told apart together (ln_fwd's and ln_bwd's tile sizes), any left: full names."""
    out = [short_name(n, width) for n in names]
    group_of = {i: set(idx) for idx in _alike(out, names) for i in idx}
    for _ in range(3):  # a group told apart may now read like another: both together
        groups = _alike(out, names)
        if not groups:
            break
        for idx in groups:
            members = sorted(set().union(*(group_of.get(i, {i}) for i in idx)))
            for i, shown in zip(members, _told_apart([names[i] for i in members], width),
                                strict=True):
                out[i] = shown
                group_of[i] = set(members)
    while groups := _alike(out, names):
        for idx in groups:
            for i in idx:
                out[i] = names[i]
    return out


def _alike(shown: list[str], names: list[str]) -> list[list[int]]:
    """Indexes of the distinct names that show as the same text, grouped by that text."""
    groups: dict[str, list[int]] = {}
    for i, text in enumerate(shown):
        groups.setdefault(text, []).append(i)
    return [idx for idx in groups.values() if len({names[i] for i in idx}) > 1]


def _told_apart(names: list[str], width: int) -> list[str]:
    """Each of `names` (a group that shortens to one text) at its most shortened step
    where it differs from every other distinct name of the group at that step, kept
    around its first difference from each of them (_keep_spans)."""
    steps = [forms(n) for n in names]
    out = []
    for i, mine in enumerate(steps):
        others = [s for j, s in enumerate(steps) if names[j] != names[i]]
        level = next((k for k in range(len(mine) - 1, -1, -1)
                      if all(o[k] != mine[k] for o in others)), 0)
        at = [_first_difference(mine[level], o[level]) for o in others]
        out.append(_keep_spans(mine[level], width, at))
    return out


def numbered_names(names: list[str], width: int = 40) -> list[str]:
    """'1. name', '2. name'... for a ranked list (chart bars, table rows): `short_names`
    keeps distinct names distinct where it can within `width`, and the number does the
    rest, so no name is ever longer than `width` (the full names go in the hover)."""
    return [f"{i}. {middle_cut(n, width)}"
            for i, n in enumerate(short_names(names, width), start=1)]


def _first_difference(a: str, b: str) -> int:
    return next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                min(len(a), len(b)))


MAX_SPANS = 3  # differences kept in a name shortened to tell it apart


def _keep_spans(name: str, width: int, at: list[int]) -> str:
    """`name` in at most `width` characters: its start, the text around each index of
    `at` (up to MAX_SPANS of them, the earliest first), its end, '…' between."""
    if len(name) <= width:
        return name
    where = sorted(set(at))[:MAX_SPANS]
    parts = len(where) + 2
    piece = max(3, (width - parts + 1) // parts)
    spans = [(0, piece), *[(max(0, a - piece // 2), max(0, a - piece // 2) + piece)
                           for a in where], (len(name) - piece, len(name))]
    merged: list[list[int]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, min(hi, len(name))])
    return ELLIPSIS.join(name[lo:hi] for lo, hi in merged)


def layout_degrees(lay: Layout, times: str = "x") -> str:
    """'TP 2 x PP 4 x DP 2 (CP 1, EP 4)', never a product that is not the world size."""
    if not lay.consistent:
        return (f"degrees do not multiply out to the world size (groups say TP {lay.tp}, "
                f"PP {lay.pp}, CP {lay.cp}, EP {lay.ep})")
    return (f"TP {lay.tp} {times} PP {lay.pp} {times} DP {lay.dp} "
            f"(CP {lay.cp}, EP {lay.ep})")


def layout_nodes(lay: Layout) -> str:
    """'8 per node, 2 node(s)'; only the nodes when the ranks per node differ."""
    if lay.nodes and lay.gpus_per_node:
        return f"{lay.gpus_per_node} per node, {lay.nodes} node(s)"
    if lay.nodes:
        return f"{lay.nodes} node(s)"
    return "nodes unknown"



# -- Plotly text --------------------------------------------------------------------
# Plotly reads its own HTML subset in every text it draws (titles, tick labels, bar and
# marker text, hover values): `<br>`, `<b>`, `<a href=...>`... and entities. A name from
# a trace or a user ('void gemm<float, 128>', a run called '<b>a</b>') goes in with `&`,
# `<` and `>` as entities, which Plotly shows as the characters themselves.
_CHART_ENTITIES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def chart_text(text: object) -> str:
    """`text` (a name from a trace or a user) shown literally in a Plotly figure: '&',
    '<' and '>' as entities, so no tag or entity of Plotly's HTML subset acts."""
    return str(text).translate(_CHART_ENTITIES)


# -- Markdown escaping ---------------------------------------------------------------
# Text from the traces (op, kernel, group and host names, and the analyzers' sentences
# that quote them) goes into Markdown through md_text or md_code, so `<128, 4>` is not
# taken for an HTML tag, `*`/`_` for emphasis, `|` for a table's column border.
# always: \ ` * [ ] < | ~; `_` unless inside a word (a_b cannot emphasize); `&` where
# it would start an entity (&lt;); `>` only at the start (a quote: `<` is escaped, so no
# tag or autolink can end at a later one)
_MD_INLINE = re.compile(r"[\\`*\[\]<|~]|_(?<![^\W_]_)|_(?![^\W_])|&(?=#?\w+;)")
_MD_MARKER = re.compile(r"^(?:#{1,6}(?=\s|$)|[-+](?=\s|$)|>)")  # heading, bullet, quote
_MD_ORDERED = re.compile(r"^(\d{1,9})([.)])(?=\s|$)")  # an ordered-list item at the start
_MD_CLOSING = re.compile(r"(\s)(#+)$")  # would close an ATX heading
_BACKTICKS = re.compile(r"`+")


def md_text(text: object, cell: bool = False) -> str:
    """`text` as literal Markdown (CommonMark/GFM): what inline Markdown acts on is
    backslash-escaped (_MD_INLINE), so is a start that would open a heading, a list item
    or a quote and an end that would close a heading, except in a table `cell` (inline
    only: '-' stays '-'); line breaks become spaces, the ends are trimmed. `a<T>*_b|c`
    shows as written and stays in its table cell or bullet. Any other value is written
    as str() writes it (None -> 'None', as an f-string would)."""
    flat = _MD_INLINE.sub(r"\\\g<0>", " ".join(str(text).splitlines()).strip())
    if cell:
        return flat
    flat = _MD_CLOSING.sub(r"\1\\\2", flat)
    if _MD_MARKER.match(flat):
        return "\\" + flat
    return _MD_ORDERED.sub(r"\1\\\2", flat, count=1)


def md_code(name: str, table: bool = True) -> str:
    """`name` as a Markdown code span shown exactly as written: the fence is one backtick
    longer than the longest run of backticks in it, padded with a space where the name
    starts or ends with a backtick (or a space, which CommonMark would strip); line breaks
    become spaces. In a table cell (`table`) each `|` is written `\\|` outside the code
    spans, between one span per piece (`a|b` -> `` `a`\\|`b` ``): the cell keeps its
    column, and no renderer shows a backslash (GFM unescapes `\\|` inside a code span in a
    table cell, but mistune and CommonMark renderers keep it there). '' for an empty name."""
    flat = " ".join(name.splitlines())
    if table and "|" in flat:
        return "\\|".join(_code_span(piece) for piece in flat.split("|"))
    return _code_span(flat)


def _code_span(text: str) -> str:
    """One code span of `text` (no line breaks), '' for empty text (md_code)."""
    if not text:
        return ""
    fence = "`" * (1 + max((len(m) for m in _BACKTICKS.findall(text)), default=0))
    pad = " " if (text[0] in "` " or text[-1] in "` ") and text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"
