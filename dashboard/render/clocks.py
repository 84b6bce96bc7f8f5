"""The report's "Clocks" section (docs/timeline.md, "Clocks") as a block for the Markdown
and HTML reports: the one-line summary and per host its offset, drift and residual."""

from __future__ import annotations

from stepscope.analyzers.results import Clocks
from stepscope.dashboard.render.blocks import Section, Table


def clocks_block(clocks: Clocks | None) -> Section | None:
    """None for a run on one host (nothing to align)."""
    if clocks is None:
        return None
    how = ("the Timeline and `stepscope export` put every rank on the clock of the lowest "
           "rank's host (stragglers and the critical path need no clock: they compare "
           "durations)" if clocks.aligned else
           "hosts not aligned keep their own clock: times of different hosts do not "
           "compare there")
    rows = tuple((c.host if c.rank is None else f"{c.host} rank {c.rank}",
                  f"{c.offset_us:+,.1f}", f"{c.drift_ppm:+.2f}",
                  "-" if c.residual_us is None else f"{c.residual_us:,.1f}",
                  str(c.matched), "yes" if c.aligned else f"no: {c.note}")
                 for c in clocks.hosts)
    return Section("Clocks", "clocks", lines=(clocks.summary, how),
                   tables=(Table(("host", "offset µs", "drift ppm", "residual µs",
                                  "instances", "aligned"), rows, numeric=(1, 2, 3, 4)),))


__all__ = ["clocks_block"]
