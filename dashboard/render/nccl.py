"""Markdown lines of the report's `nccl` section (analyzers.results.NcclSection)."""

from __future__ import annotations

import msgspec

from stepscope.analyzers.results import NcclBench, NcclLaunch, NcclSection
from stepscope.dashboard.render.format import md_text, rank_list


def _group(desc: str | None, names: list[str], comm_id: str) -> str:
    """'desc (pg names)' of a communicator, or its id when no process group matches."""
    shown = f"{desc or 'group'} ({', '.join(names)})" if names else comm_id
    return md_text(shown, cell=True)


def nccl_lines(nccl: NcclSection | None) -> list[str]:
    """Versions, sources, hosts, per-group transports, findings; [] without NCCL data."""
    if nccl is None:
        return []
    sources = ", ".join(f"{s.files} {md_text(s.kind.replace('_', ' '))} file(s)"
                        for s in nccl.sources)
    out = ["", "## NCCL", "",
           f"- NCCL {md_text(', '.join(nccl.versions) or 'version unknown')}; from {sources}"]
    if not isinstance(nccl.launches, msgspec.UnsetType) and nccl.launches:
        out.append(f"- {md_text(launches_sentence(nccl.launches))}:")
        out += [f"  - {md_text(launch_line(lau))}" for lau in nccl.launches]
    elif nccl.hosts:
        out.append(f"- {len(nccl.hosts)} host(s) in the NCCL logs: " + "; ".join(
            f"{md_text(h)}: ranks {rank_list(r)}" for h, r in sorted(nccl.hosts.items())))
    if nccl.groups:
        out += ["", "| group | ranks | hosts | transports | link | GPUDirect RDMA |",
                "|---|---|---:|---|---|---|"]
        for g in nccl.groups:
            gdr = {True: "yes", False: "**no**", None: "-"}[g.gdr]
            out.append(f"| {_group(g.pg_desc, g.pg_names, g.comm_id)} | {rank_list(g.ranks)} "
                       f"| {len(g.hosts)} | {md_text(', '.join(g.tiers) or '-', cell=True)} | "
                       f"{md_text(g.link, cell=True)} | {gdr} |")
    if nccl.measured:
        out += ["", "### Measured bus bandwidth (NCCL Inspector)", "",
                "| group | collective | ranks | hosts | ops | median MB | bus GB/s (median) "
                "| p10 | over time (GB/s) |", "|---|---|---|---|---:|---:|---:|---:|---|"]
        for m in nccl.measured:
            trend = " ".join(f"{p.bus_bw_gbs:.0f}" for p in m.over_time)
            out.append(f"| {_group(m.pg_desc, m.pg_names, m.comm_id)} | "
                       f"{md_text(m.collective)} | {rank_list(m.ranks)} | "
                       f"{md_text(', '.join(m.hosts), cell=True)} | {m.n_ops} | "
                       f"{m.msg_bytes / 1e6:.1f} | "
                       f"{m.bus_bw_gbs:.1f} | {m.bus_bw_p10_gbs:.1f} | {trend} |")
    if not isinstance(nccl.bench, msgspec.UnsetType) and nccl.bench:
        out += ["", "### nccl-tests results", ""]
        out += [f"- {md_text(bench_sentence(b))}" for b in nccl.bench]
    if nccl.findings:
        out += ["", "### NCCL findings", ""]
        out += [f"- **{md_text(f.kind)}** ({md_text(f.severity)}): {md_text(f.message)}"
                for f in nccl.findings]
    return out


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} B"


def bench_sentence(b: NcclBench) -> str:
    """One nccl-tests table in words: what ran where, the printed average, the best bus
    bandwidth and its share of the link's peak (plain text; the caller escapes it)."""
    name = b.test or "nccl-tests"
    where = (f"{b.ranks} rank(s)" if b.ranks else "ranks unknown") + (
        f" on {len(b.hosts)} host(s)" if b.hosts else "") + (
        f" ({', '.join(b.devices)})" if b.devices else "")
    link = f"link {b.link} ({'NCCL log' if b.link_source == 'nccl_log' else 'assumed'})"
    avg = ("avg bus bandwidth not printed" if b.avg_bus_bw_gbs is None else
           f"avg bus bandwidth {b.avg_bus_bw_gbs:.2f} GB/s as printed")
    if b.mean_bus_bw_gbs is not None:
        avg += f" (mean of the {len(b.rows)} values {b.mean_bus_bw_gbs:.2f})"
    best = ""
    if b.best_bus_bw_gbs is not None and b.best_size_bytes is not None:
        best = (f"; best {b.best_bus_bw_gbs:.2f} GB/s at {_size(b.best_size_bytes)} "
                f"{'in-place' if b.best_in_place else 'out-of-place'}")
        if b.best_of_peak is not None and b.link_peak_gbs is not None:
            best += (f", {b.best_of_peak:.0%} of the {b.link_peak_gbs:.0f} GB/s peak "
                     f"({b.peak_source})")
        elif b.peak_source:
            best += f"; no peak to hold it against ({b.peak_source})"
    table = f" table {b.bench}" if b.bench > 1 else ""
    return f"{name} in {b.source_file}{table}: {where}; {link}; {avg}{best}"


def launches_sentence(launches: list[NcclLaunch]) -> str:
    """'2 launches in the NCCL logs (...)': the logs hold several runs, listed apart
    (plain text; the caller escapes it)."""
    claimed: dict[int, int] = {}
    for lau in launches:
        for r in {r for ranks in lau.hosts.values() for r in ranks}:
            claimed[r] = claimed.get(r, 0) + 1
    twice = sum(1 for n in claimed.values() if n > 1)
    return (f"{len(launches)} launches in the NCCL logs: their processes share no "
            "communicator" + (f", and {twice} rank(s) are claimed by processes of more than "
                              "one launch (different pids)" if twice else "")
            + "; each launch is listed on its own")


def launch_line(lau: NcclLaunch) -> str:
    """'launch 1: communicator 0x… of 16 ranks (2 communicators); gpu-a: ranks 0-7
    (pids 177787-177794); …' (plain text)."""
    hosts = "; ".join(f"{h}: ranks {spans(r)} (pid(s) {spans(lau.pids.get(h, []))})"
                      for h, r in sorted(lau.hosts.items()))
    logged = sum(len(r) for r in lau.hosts.values())
    return (f"launch {lau.launch}: communicator {lau.comm_id} of {lau.nranks} ranks "
            f"({logged} logged, {lau.communicators} communicator(s)); {hosts or 'no ranks'}")


def spans(values: list[int]) -> str:
    """[0, 1, 2, 3, 7] -> '0-3, 7': sorted integers as runs of consecutive values."""
    runs: list[list[int]] = []
    for v in sorted(set(values)):
        if runs and v == runs[-1][1] + 1:
            runs[-1][1] = v
        else:
            runs.append([v, v])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs) or "-"
