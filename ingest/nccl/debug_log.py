"""Read an `NCCL_DEBUG=INFO` log (one `NCCL_DEBUG_FILE` per process, or a job's stdout
with NCCL lines mixed in) into process, communicator, channel, ring and warning tables.

The log is streamed (ingest/nccl/log_stream.py): blocks of whole lines, each matched with
vectorized polars regexes (no Python loop over lines). What spans blocks is carried in
small state keyed by thread, process and communicator; connection lines go to Parquet
block by block, each distinct one once, and WARN lines are counted per distinct message
(ingest/nccl/log_state.py), so memory depends on neither the log's size nor how often a
line repeats. Line shapes (NCCL's own format strings, cited in tests/data/nccl/README.md):

    <host>:<pid>:<tid> [<cudaDev>] NCCL INFO <msg>
    [<time>] <host>:<pid>:<tid> [<cudaDev>] <file>:<line> [(<func>) ]NCCL WARN <msg>
    NCCL version 2.18.3+cuda12.2                                      (bare, <= 2.18)
    ... comm 0x.. rank 1 nRanks 8 nNodes 1 localRanks 8 localRank 1 MNNVL 0
    ... [ncclCommInitRank |ncclCommInitAll ]comm 0x.. rank 6 nranks 16 cudaDev 6
        [nvmlDev 6 ][busId c8000 ][commId 0x49bbd7790311d5eb ]- Init COMPLETE
    ... Channel 07/0 : 0[0] -> 2[0] [receive] via NET/IB/3/GDRDMA
    ... Channel 00/0 : 3[1] -> 2[0] via P2P/direct pointer/read   (Ring 00 : ... <= 2.6)
    ... CollNet 00/0 : 3 [send] via COLLNET/SHARP/0/GDRDMA
    ... NVLS comm 0x.. headRank 0 nHeads 8 ...
    ... GPU Direct RDMA Enabled for GPU 18000 / HCA 0 (distance 4 <= 5), read 1
    ... NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'
    ... Connected all rings, use ring PXN 0 GDR 1

One process may drive several GPUs (nccl-tests `-g 2`, ncclCommInitAll): its lines carry
each GPU's `[cudaDev]` and each communicator's init thread, so `nccl_processes` has one
row per (host, pid, cudaDev), each with its own busId and global rank. Which
communicator a line without a pointer belongs to is worked out per thread and GPU
(ingest/nccl/log_comms.py). Every output is sorted or in line order, so the same log
gives the same rows.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from stepscope.ingest.cancel import CancelToken
from stepscope.ingest.errors import TraceFileError
from stepscope.ingest.limits import max_trace_bytes
from stepscope.ingest.nccl import bench as B
from stepscope.ingest.nccl import log_comms as C
from stepscope.ingest.nccl import log_patterns as P
from stepscope.ingest.nccl import log_stream
from stepscope.ingest.nccl.log_state import MAX_WARNINGS, LogState, resolved_channels
from stepscope.ingest.nccl.log_stream import MAX_LINE_BYTES, LineBlocks, line_blocks, text_chunks

COMM = ["host", "pid", "comm_ptr"]
TABLES = ("nccl_processes", "nccl_comms", "nccl_channels", "nccl_rings", "nccl_warnings",
          "nccl_bench", "nccl_bench_summary")


@dataclass
class NcclLog:
    """One log file's rows, as Parquet files (columns as in docs/schema.md, no `run`)."""

    file: str
    nccl_versions: list[str]
    tables: dict[str, Path]
    n_records: int
    hosts: list[str]
    ranks: list[int]                 # global ranks of its GPUs (rank in the largest comm)
    n_gpus: int                      # nccl_processes rows: (host, pid, cudaDev)
    notes: list[str]                 # what was not stored (overlong lines, WARN overflow)

    def frame(self, table: str) -> pl.DataFrame:
        return pl.read_parquet(self.tables[table])


def read_nccl_log(path: Path, display: str, out_dir: Path, max_bytes: int | None = None,
                  cancel: CancelToken | None = None) -> NcclLog:
    """Parse one log into Parquet files under `out_dir` (an existing folder of its own);
    raises TraceFileError (one line) when it holds no NCCL line at all, cannot be read,
    or has more than the per-file limit of text (`max_bytes`, ingest/limits.py)."""
    state = LogState(out_dir, display)
    cutter = LineBlocks()
    try:
        chunks = text_chunks(path, display, max_trace_bytes(max_bytes))
        for block in line_blocks(chunks, cutter, log_stream.BLOCK_BYTES):
            if cancel is not None:
                cancel.check(display)
            _block(state, block)
        state.close()
        if state.nccl_lines == 0 and not state.versions and not _has_bench(state):
            raise TraceFileError(display, "no NCCL_DEBUG line in it (expected lines like "
                                 "'host:pid:tid [dev] NCCL INFO ...')")
        state.long_lines += cutter.long_lines
        return _finish(state)
    except pl.exceptions.PolarsError as exc:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TraceFileError(display, f"unreadable NCCL log ({detail[:200]})") from None
    finally:
        state.close()


def _lines(block: bytes, offset: int) -> pl.DataFrame:
    """The block's lines, one column: the unit separator (0x1F) splits no line, so one in
    binary garbage is read as a blank (it made a first line of several columns, and the
    read failed with polars' "new_columns does not match")."""
    if b"\x1f" in block:
        block = block.replace(b"\x1f", b" ")
    frame = pl.read_csv(io.BytesIO(block), has_header=False, separator="\x1f", quote_char=None,
                        new_columns=["line"], encoding="utf8-lossy", truncate_ragged_lines=True,
                        schema_overrides={"line": pl.String}, infer_schema=False)
    return frame.with_row_index("line_no", offset).with_columns(
        pl.col("line_no").cast(pl.Int64), pl.col("line").str.strip_chars_end("\r"))


def _block(state: LogState, block: bytes) -> None:
    lines = _lines(block, state.line_no)
    state.line_no += lines.height
    short = pl.col("line").str.len_bytes() <= MAX_LINE_BYTES
    state.long_lines += lines.height - lines.filter(short | pl.col("line").is_null()).height
    lines = lines.filter(short)
    state.bench = pl.concat([state.bench, B.bench_lines(lines)])
    state.versions |= set(lines["line"].str.extract(P.BARE_VERSION).drop_nulls().to_list())
    marked = lines.filter(pl.col("line").str.contains(P.NCCL_MARK))
    devs, n_nccl = P.heads(marked)
    state.nccl_lines += n_nccl
    state.devs = pl.concat([state.devs, devs]).unique(maintain_order=True)
    nccl = P.parse_prefix(marked.filter(pl.col("line").str.contains(P.INTERESTING)))
    if nccl.is_empty():
        return
    nccl, state.carry, segments = C.assign(nccl, state.carry)
    state.segments = _keep_last(state.segments, segments, [*C.THREAD, "seg"])
    state.versions |= set(nccl["msg"].str.extract(P.VERSION).drop_nulls().to_list())
    state.facts = P.merge_facts(state.facts, P.facts(nccl))
    state.gpu_gdr = P.merge_gpu_gdr(state.gpu_gdr, P.gpu_gdr(nccl))
    _check_ranks(nccl, state.display)
    state.done = _keep_last(state.done, P.init_done(nccl), COMM)
    state.topo = _keep_last(state.topo, P.topo(nccl), COMM)
    pending_key = ["host", "pid", "dev", "tid", "seg", "comm_ptr"]
    state.use_gdr = _keep_last(state.use_gdr, P.use_gdr(nccl), pending_key)
    state.rings = _keep_last(state.rings, P.rings(nccl), [*pending_key, "channel"])
    state.add_channels(P.channels(nccl, state.display))
    state.add_warnings(P.warnings(nccl, state.display))


def _check_ranks(nccl: pl.DataFrame, display: str) -> None:
    """A communicator line's rank must lie in [0, nRanks) (`comm 0x.. rank 5 nranks 2 ...
    Init COMPLETE`, `comm 0x.. rank 5 nRanks 2 nNodes ...`): NCCL never writes another,
    and such a rank would be stored as a process of the job, or resolve to a wrong one.
    One line refuses the file with the count in this block, as for an Inspector
    header.rank. (A rank or nRanks with a sign or past 9 digits is no line NCCL writes:
    the patterns leave it out, and the log is stored, as audit rounds 7 and 9 pinned.)"""
    bad = 0
    for pattern in (P.INIT_DONE, P.TOPO):
        ranks = nccl.select(pl.col("msg").str.extract(pattern, 2).cast(pl.Int64).alias("r"),
                            pl.col("msg").str.extract(pattern, 3).cast(pl.Int64).alias("n"))
        bad += ranks.filter(pl.col("r") >= pl.col("n")).height
    if bad:
        raise TraceFileError(display, f"{bad} communicator line(s) with a rank outside "
                             "[0, nRanks) ('comm 0x.. rank R nRanks N')")


def _has_bench(state: LogState) -> bool:
    """Does the log hold an nccl-tests result table (a header line)?"""
    return bool(state.bench["line"].str.contains(B.HEADER).any())


def _keep_last(old: pl.DataFrame, new: pl.DataFrame, key: list[str]) -> pl.DataFrame:
    if new.is_empty():
        return old
    return pl.concat([old, new]).unique(key, keep="last", maintain_order=True)


def _resolved(state: LogState, frame: pl.DataFrame, key: list[str]) -> pl.DataFrame:
    """A small table's rows with their pending communicators resolved; the last row
    (in line order) of each key."""
    rows = C.resolve(frame, state.segments).collect()
    return rows.sort("line_no").unique(key, keep="last", maintain_order=True)


def _notes(state: LogState) -> list[str]:
    notes = []
    if state.long_lines:
        notes.append(f"{state.long_lines} line(s) longer than {MAX_LINE_BYTES} bytes skipped "
                     "(not NCCL's)")
    if state.dropped_warnings:
        notes.append(f"{state.dropped_warnings} WARN line(s) past {MAX_WARNINGS} distinct "
                     "messages not stored")
    return notes


def _finish(state: LogState) -> NcclLog:
    versions = sorted(state.versions)
    use_gdr = _resolved(state, state.use_gdr, COMM).select("host", "pid", "comm_ptr",
                                                            "use_gdr")
    comms = P.comms(state.done, state.topo, use_gdr, state.display)
    processes = P.processes(comms, state.facts, state.devs, state.gpu_gdr, versions,
                            state.display)
    comms = comms.join(processes.select("host", "pid", "nccl_version", "network").unique(
        ["host", "pid"], keep="first", maintain_order=True), on=["host", "pid"], how="left",
        maintain_order="left").select(P.COMM_OUT_COLUMNS)
    rings = _resolved(state, state.rings, [*COMM, "channel"]).sort(
        [*COMM, "channel"]).select(P.RING_OUT_COLUMNS)
    warnings = C.resolve(state.warnings, state.segments, dev="cuda_dev").collect().select(
        P.WARNING_OUT.names())
    tables = {t: state.out_dir / f"{t}.parquet" for t in TABLES}
    bench_rows, bench_summary = B.tables(state.bench, state.display)
    for table, frame in (("nccl_processes", processes), ("nccl_comms", comms),
                         ("nccl_rings", rings), ("nccl_warnings", warnings),
                         ("nccl_bench", bench_rows), ("nccl_bench_summary", bench_summary)):
        frame.write_parquet(tables[table])
    resolved_channels(state, tables["nccl_channels"], comms.select(
        "host", "pid", "cuda_dev", "comm_ptr", "rank", "nranks"))
    ranks = sorted({r for r in processes["global_rank"].to_list() if r is not None})
    n_warn = int(warnings["n_lines"].sum()) + state.dropped_warnings
    return NcclLog(
        file=state.display, nccl_versions=versions, tables=tables,
        n_records=comms.height + state.channel_rows + n_warn + bench_rows.height,
        hosts=sorted(set(processes["host"].to_list())), ranks=ranks, n_gpus=processes.height,
        notes=_notes(state))
