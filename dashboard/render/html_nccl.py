"""The NCCL section of the HTML run report: what NCCL's own evidence says (logs, Flight
Recorder, Inspector) over analyzers.results.NcclSection; nothing without it."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from stepscope.analyzers.results import NcclSection
from stepscope.dashboard.render.format import EN_DASH, rank_list_short
from stepscope.dashboard.render.html_page import esc, folded, section
from stepscope.dashboard.render.nccl import bench_sentence, launch_line, launches_sentence

NCCL_ROWS_OPEN = 16  # more communicators / measurements: the rest folded


def _group_name(pg_desc: str | None, pg_names: Sequence[str], comm_id: str) -> str:
    return f"{pg_desc or 'group'} (pg {', '.join(pg_names)})" if pg_names else comm_id


def _groups(nccl: NcclSection) -> str:
    gdr = {True: "yes", False: '<b class="bad">no</b>', None: EN_DASH}
    rows = [[esc(_group_name(g.pg_desc, g.pg_names, g.comm_id)), esc(rank_list_short(g.ranks)),
             str(len(g.hosts)), esc(", ".join(g.tiers) or EN_DASH), esc(g.link), gdr[g.gdr]]
            for g in nccl.groups]
    return ("<h3>Communicators and their transports</h3>"
            + folded(["group", "ranks", "hosts", "transports", "link", "GPUDirect RDMA"],
                     rows, (2,), "communicators", NCCL_ROWS_OPEN))


def _measured(nccl: NcclSection) -> str:
    rows = [[esc(_group_name(m.pg_desc, m.pg_names, m.comm_id)), esc(m.collective),
             esc(rank_list_short(m.ranks)), str(m.n_ops), f"{m.msg_bytes / 1e6:.1f}",
             f"{m.bus_bw_gbs:.1f}", f"{m.bus_bw_p10_gbs:.1f}",
             esc(" ".join(f"{p.bus_bw_gbs:.0f}" for p in m.over_time) or EN_DASH)]
            for m in nccl.measured]
    return ("<h3>Bus bandwidth NCCL measured (Inspector)</h3>"
            + folded(["group", "collective", "ranks", "ops", "median MB",
                      "bus GB/s (median)", "p10", "over time (GB/s)"],
                     rows, (3, 4, 5, 6), "measurements", NCCL_ROWS_OPEN))


def nccl_section(nccl: NcclSection | None) -> str:
    """Versions, sources, hosts, findings, communicators and measured bandwidth; "" when
    the run has no NCCL evidence."""
    if nccl is None:
        return ""
    sources = ", ".join(f"{s.files} {s.kind.replace('_', ' ')} file(s)"
                        + (f" ({s.ranks} ranks)" if s.ranks else "") for s in nccl.sources)
    parts = [f"<p>NCCL {esc(', '.join(nccl.versions) or 'version unknown')}; from "
             f"{esc(sources)}.</p>"]
    if not isinstance(nccl.launches, msgspec.UnsetType) and nccl.launches:
        parts.append(f"<p>{esc(launches_sentence(nccl.launches))}:</p><ul>" + "".join(
            f"<li>{esc(launch_line(lau))}</li>" for lau in nccl.launches) + "</ul>")
    elif nccl.hosts:
        hosts = "; ".join(f"{h}: ranks {rank_list_short(r)}"
                          for h, r in sorted(nccl.hosts.items()))
        parts.append(f"<p>{len(nccl.hosts)} host(s) in the NCCL logs: {esc(hosts)}</p>")
    parts += [f'<div class="rec {esc(f.severity)}"><b>[{esc(f.severity)}] {esc(f.kind)}</b>: '
              f"{esc(f.message)}</div>" for f in nccl.findings]
    if nccl.groups:
        parts.append(_groups(nccl))
    if nccl.measured:
        parts.append(_measured(nccl))
    if not isinstance(nccl.bench, msgspec.UnsetType) and nccl.bench:
        parts.append("<h3>nccl-tests results</h3><ul>" + "".join(
            f"<li>{esc(bench_sentence(b))}</li>" for b in nccl.bench) + "</ul>")
    return section("NCCL", *parts, anchor="nccl")
