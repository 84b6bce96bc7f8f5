"""Markdown lines of the report's `nccl` section (analyzers.model.NcclSection)."""

from __future__ import annotations

from stepscope.analyzers.model import NcclSection
from stepscope.dashboard.render.format import rank_list


def nccl_lines(nccl: NcclSection | None) -> list[str]:
    """Versions, sources, hosts, per-group transports, findings; [] without NCCL data."""
    if nccl is None:
        return []
    sources = ", ".join(f"{s.files} {s.kind.replace('_', ' ')} file(s)" for s in nccl.sources)
    out = ["", "## NCCL", "",
           f"- NCCL {', '.join(nccl.versions) or 'version unknown'}; from {sources}"]
    if nccl.hosts:
        out.append(f"- {len(nccl.hosts)} host(s) in the NCCL logs: " + "; ".join(
            f"{h}: ranks {rank_list(r)}" for h, r in sorted(nccl.hosts.items())))
    if nccl.groups:
        out += ["", "| group | ranks | hosts | transports | link | GPUDirect RDMA |",
                "|---|---|---:|---|---|---|"]
        for g in nccl.groups:
            name = (f"{g.pg_desc or 'group'} ({', '.join(g.pg_names)})"
                    if g.pg_names else g.comm_id)
            gdr = {True: "yes", False: "**no**", None: "-"}[g.gdr]
            out.append(f"| {name} | {rank_list(g.ranks)} | {len(g.hosts)} | "
                       f"{', '.join(g.tiers) or '-'} | {g.link} | {gdr} |")
    if nccl.measured:
        out += ["", "### Measured bus bandwidth (NCCL Inspector)", "",
                "| group | collective | ranks | hosts | ops | median MB | bus GB/s (median) "
                "| p10 | over time (GB/s) |", "|---|---|---|---|---:|---:|---:|---:|---|"]
        for m in nccl.measured:
            name = (f"{m.pg_desc or 'group'} ({', '.join(m.pg_names)})"
                    if m.pg_names else m.comm_id)
            trend = " ".join(f"{p.bus_bw_gbs:.0f}" for p in m.over_time)
            out.append(f"| {name} | {m.collective} | {rank_list(m.ranks)} | "
                       f"{', '.join(m.hosts)} | {m.n_ops} | {m.msg_bytes / 1e6:.1f} | "
                       f"{m.bus_bw_gbs:.1f} | {m.bus_bw_p10_gbs:.1f} | {trend} |")
    if nccl.findings:
        out += ["", "### NCCL findings", ""]
        out += [f"- **{f.kind}** ({f.severity}): {f.message}" for f in nccl.findings]
    return out
