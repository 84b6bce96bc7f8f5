"""`stepscope hang` output: JSON (schema: docs/hang.schema.json) and Markdown, pure
functions of one analyzers.results.HangReport."""

from __future__ import annotations

from datetime import UTC, datetime

from stepscope.analyzers.results import HangReport, StuckCollective, to_json
from stepscope.dashboard.render.format import md_code, md_text, rank_list


def hang_json(report: HangReport) -> str:
    return to_json(report)


def _shape(sizes: list[list[int]] | None) -> str:
    """[[4027, 5120]] -> '4027x5120' (the form torch's and NVRx's tables print)."""
    if not sizes:
        return "-"
    return ", ".join("x".join(str(d) for d in shape) or "scalar" for shape in sizes)


def _when(ns: int | None) -> str:
    if not ns:
        return "-"
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _group(desc: str, name: str) -> str:
    """'desc (name)' of a process group, escaped for a table cell."""
    return f"{md_text(desc, cell=True)} ({md_text(name, cell=True)})"


def _stuck_table(stuck: list[StuckCollective]) -> list[str]:
    lines = ["| group | description | op | seq | sizes | dtype | state | missing ranks "
             "| waiting ranks | enqueued (UTC) |", "|---|---|---|---:|---|---|---|---|---|---|"]
    for s in stuck:
        lines.append(
            f"| {md_text(s.pg_name)} | {md_text(s.pg_desc, cell=True)} | "
            f"{md_text(s.profiling_name or s.op or '?')} | {s.seq} | "
            f"{_shape(s.sizes)} | {md_text(s.dtype or '-', cell=True)} | "
            f"{md_text(s.state or '-', cell=True)} | "
            f"**{_missing(s)}** | {rank_list(s.waiting_ranks)} | "
            f"{_when(s.first_created_ns)} |")
    return lines


def _missing(s: StuckCollective) -> str:
    """The ranks that never entered, then the members that wrote no dump ('12 (no
    dump)'): what they did is unknown, and a crashed rank writes none."""
    parts = [rank_list(s.missing_ranks)] if s.missing_ranks else []
    if s.ranks_without_dump:
        parts.append(f"{rank_list(s.ranks_without_dump)} (no dump)")
    return ", ".join(parts) or rank_list([])


def _suspect_lines(report: HangReport) -> list[str]:
    lines = ["", "## Suspect ranks", ""]
    if not report.suspects:
        return [*lines, "None."]
    for s in report.suspects:
        lines.append(f"* **rank {s.rank}**" + (" (nothing in flight)" if s.idle else ""))
        lines += [f"  * {md_text(reason)}" for reason in s.reasons]
    return lines


def _mismatch_lines(report: HangReport) -> list[str]:
    if not report.mismatches:
        return []
    lines = ["", "## Desync: same sequence number, different collective", "",
             "| group | seq | differs in | rank | ops | sizes | dtypes |",
             "|---|---:|---|---:|---|---|---|"]
    for m in report.mismatches:
        for r in m.ranks:
            sizes = "; ".join(_shape(s) for s in r.sizes)
            dtypes = md_text("; ".join(",".join(d or []) for d in r.dtypes), cell=True)
            lines.append(f"| {_group(m.pg_desc, m.pg_name)} | {m.seq} | "
                         f"{', '.join(m.fields)} | {r.rank} | "
                         f"{md_text(', '.join(r.ops), cell=True)} | {sizes} | {dtypes} |")
    return lines


def _lag_lines(report: HangReport) -> list[str]:
    if not report.completion_lags:
        return []
    lines = ["", "## Completion lag (peers completed, these ranks did not see it)", "",
             "| group | lagging ranks | ahead ranks | collectives |", "|---|---|---|---|"]
    for lag in report.completion_lags:
        lines.append(f"| {_group(lag.pg_desc, lag.pg_name)} | "
                     f"**{rank_list(lag.lagging_ranks)}** | "
                     f"{rank_list(lag.ahead_ranks)} | #{lag.first_seq}-#{lag.last_seq} |")
    return lines


def _p2p_lines(report: HangReport) -> list[str]:
    if not report.p2p_waits:
        return []
    lines = ["", "## P2P ops left open", "",
             "| group | rank | op | peer | sizes | dtype | state | peer posted its side |",
             "|---|---:|---|---:|---|---|---|---|"]
    posted = {True: "yes", False: "**no**", None: "unknown (no dump)"}
    for w in report.p2p_waits:
        lines.append(f"| {_group(w.pg_desc, w.pg_name)} | {w.rank} | {md_text(w.op)} | "
                     f"{'-' if w.peer_rank is None else w.peer_rank} | {_shape(w.sizes)} | "
                     f"{md_text(w.dtype or '-', cell=True)} | {md_text(w.state, cell=True)} | "
                     f"{posted[w.peer_posted]} |")
    return lines


def _group_lines(report: HangReport) -> list[str]:
    lines = ["", "## Process groups", "",
             "| group | description | members | last completed by all | last enqueued |",
             "|---|---|---|---:|---:|"]
    for g in report.groups:
        done = "-" if g.last_completed_by_all is None else str(g.last_completed_by_all)
        enq = "-" if g.last_enqueued_max is None else str(g.last_enqueued_max)
        lines.append(f"| {md_text(g.pg_name)} | {md_text(g.pg_desc, cell=True)} | "
                     f"{rank_list(g.ranks)} | {done} | {enq} |")
    return lines


def hang_markdown(report: HangReport) -> str:
    versions = md_text(", ".join(report.fr_versions) or "?")
    nccl = md_text(", ".join(report.nccl_versions) or "?")
    lines = [f"# Why did {md_code(report.run, table=False)} hang?", "",
             md_text(report.verdict), "",
             f"Flight Recorder dumps from {len(report.dump_ranks)} rank(s); format "
             f"{versions}, NCCL {nccl}."]
    lines += _suspect_lines(report)
    lines += ["", "## Stuck collectives (first to hang first)", ""]
    lines += _stuck_table(report.stuck) if report.stuck else ["None."]
    lines += _lag_lines(report) + _mismatch_lines(report) + _p2p_lines(report)
    lines += _group_lines(report)
    if report.notes:
        lines += ["", "## Notes", ""] + [f"* {md_text(n)}" for n in report.notes]
    return "\n".join(lines) + "\n"
