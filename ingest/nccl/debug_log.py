"""Read an `NCCL_DEBUG=INFO` log (one `NCCL_DEBUG_FILE` per process, or a job's stdout
with NCCL lines mixed in) into process, communicator, channel, ring and warning tables.

The log is streamed (ingest/nccl/log_stream.py): blocks of whole lines, each matched with
vectorized polars regexes (no Python loop over lines). What spans blocks is carried in
small state keyed by thread, process and communicator; channel and warning rows go to
Parquet block by block, so memory depends on neither the log's size nor its line count.
Line shapes (NCCL's own format strings, cited in tests/data/nccl/README.md):

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
row per (host, pid, cudaDev), each with its own busId and global rank. Lines without a
communicator pointer (channels, rings, warnings) belong to the communicator the same
thread on the same GPU (host, pid, tid, cudaDev) named last. Every output is sorted, so
the same log gives the same rows.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from stepscope.ingest.errors import TraceFileError
from stepscope.ingest.limits import max_trace_bytes
from stepscope.ingest.nccl import log_comms as C
from stepscope.ingest.nccl import log_patterns as P
from stepscope.ingest.nccl import log_stream
from stepscope.ingest.nccl.log_stream import MAX_LINE_BYTES, LineBlocks, line_blocks, text_chunks
from stepscope.ingest.reader import CancelToken

COMM = ["host", "pid", "comm_ptr"]
STREAMED: dict[str, pl.Schema] = {"nccl_channels": P.CHANNEL_ROWS,
                                  "nccl_warnings": P.WARNING_ROWS}
FINAL: dict[str, pl.Schema] = {"nccl_channels": P.CHANNEL_OUT, "nccl_warnings": P.WARNING_OUT}
TABLES = ("nccl_processes", "nccl_comms", "nccl_channels", "nccl_rings", "nccl_warnings")


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
    long_lines: int = 0              # lines past MAX_LINE_BYTES, skipped
    max_line_bytes: int = MAX_LINE_BYTES

    def frame(self, table: str) -> pl.DataFrame:
        return pl.read_parquet(self.tables[table])


@dataclass
class _State:
    """What the blocks seen so far leave for the next ones and for the end."""

    out_dir: Path
    display: str
    line_no: int = 0
    nccl_lines: int = 0
    long_lines: int = 0
    versions: set[str] = field(default_factory=set)
    carry: pl.DataFrame = field(default_factory=lambda: _empty(C.CARRY))
    segments: pl.DataFrame = field(default_factory=lambda: _empty(C.SEGMENTS))
    facts: pl.DataFrame = field(default_factory=lambda: _empty(P.FACTS))
    devs: pl.DataFrame = field(default_factory=lambda: _empty(P.DEVS))
    gpu_gdr: pl.DataFrame = field(default_factory=lambda: _empty(P.GPU_GDR_ROWS))
    done: pl.DataFrame = field(default_factory=lambda: _empty(P.DONE))
    topo: pl.DataFrame = field(default_factory=lambda: _empty(P.TOPO_ROWS))
    use_gdr: pl.DataFrame = field(default_factory=lambda: _empty(P.USE_GDR_ROWS))
    rings: pl.DataFrame = field(default_factory=lambda: _empty(P.RING_ROWS))
    writers: dict[str, pq.ParquetWriter] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STREAMED, 0))

    def staged(self, table: str) -> Path:
        return self.out_dir / f"{table}.rows.parquet"

    def write(self, table: str, frame: pl.DataFrame) -> None:
        """Append rows to a streamed table's staging Parquet file."""
        arrow = frame.to_arrow()
        if table not in self.writers:
            self.writers[table] = pq.ParquetWriter(self.staged(table), arrow.schema)
        if frame.height:
            self.writers[table].write_table(arrow)
            self.rows[table] += frame.height

    def close(self) -> None:
        for writer in self.writers.values():
            writer.close()
        self.writers.clear()


def _empty(schema: pl.Schema) -> pl.DataFrame:
    return pl.DataFrame(schema=schema)


def read_nccl_log(path: Path, display: str, out_dir: Path, max_bytes: int | None = None,
                  cancel: CancelToken | None = None) -> NcclLog:
    """Parse one log into Parquet files under `out_dir` (an existing folder of its own);
    raises TraceFileError (one line) when it holds no NCCL line at all, cannot be read,
    or has more than the per-file limit of text (`max_bytes`, ingest/limits.py)."""
    state = _State(out_dir, display)
    cutter = LineBlocks()
    try:
        chunks = text_chunks(path, display, max_trace_bytes(max_bytes))
        for block in line_blocks(chunks, cutter, log_stream.BLOCK_BYTES):
            if cancel is not None:
                cancel.check(display)
            _block(state, block)
        for table, schema in STREAMED.items():
            state.write(table, _empty(schema))
        state.close()
        if state.nccl_lines == 0 and not state.versions:
            raise TraceFileError(display, "no NCCL_DEBUG line in it (expected lines like "
                                 "'host:pid:tid [dev] NCCL INFO ...')")
        return _finish(state, cutter.long_lines + state.long_lines)
    except pl.exceptions.PolarsError as exc:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TraceFileError(display, f"unreadable NCCL log ({detail[:200]})") from None
    finally:
        state.close()


def _lines(block: bytes, offset: int) -> pl.DataFrame:
    frame = pl.read_csv(io.BytesIO(block), has_header=False, separator="\x1f", quote_char=None,
                        new_columns=["line"], encoding="utf8-lossy", truncate_ragged_lines=True,
                        schema_overrides={"line": pl.String}, infer_schema=False)
    return frame.with_row_index("line_no", offset).with_columns(
        pl.col("line_no").cast(pl.Int64), pl.col("line").str.strip_chars_end("\r"))


def _block(state: _State, block: bytes) -> None:
    lines = _lines(block, state.line_no)
    state.line_no += lines.height
    short = pl.col("line").str.len_bytes() <= P.MAX_LINE_BYTES
    state.long_lines += lines.height - lines.filter(short | pl.col("line").is_null()).height
    lines = lines.filter(short)
    state.versions |= set(lines["line"].str.extract(P.BARE_VERSION).drop_nulls().to_list())
    nccl = P.parse_prefix(lines.filter(pl.col("line").str.contains(P.NCCL_MARK)))
    if nccl.is_empty():
        return
    state.nccl_lines += nccl.height
    nccl, state.carry, segments = C.assign(nccl, state.carry)
    state.segments = pl.concat([state.segments, segments])
    state.versions |= set(nccl["msg"].str.extract(P.VERSION).drop_nulls().to_list())
    state.facts = P.merge_facts(state.facts, P.facts(nccl))
    state.devs = pl.concat([state.devs, P.devs(nccl)]).unique(maintain_order=True)
    state.gpu_gdr = P.merge_gpu_gdr(state.gpu_gdr, P.gpu_gdr(nccl))
    state.done = _keep_last(state.done, P.init_done(nccl), COMM)
    state.topo = _keep_last(state.topo, P.topo(nccl), COMM)
    pending_key = ["host", "pid", "dev", "tid", "seg", "comm_ptr"]
    state.use_gdr = _keep_last(state.use_gdr, P.use_gdr(nccl), pending_key)
    state.rings = _keep_last(state.rings, P.rings(nccl), [*pending_key, "channel"])
    state.write("nccl_channels", P.channels(nccl, state.display))
    state.write("nccl_warnings", P.warnings(nccl, state.display))


def _keep_last(old: pl.DataFrame, new: pl.DataFrame, key: list[str]) -> pl.DataFrame:
    if new.is_empty():
        return old
    return pl.concat([old, new]).unique(key, keep="last", maintain_order=True)


def _resolved(state: _State, frame: pl.DataFrame, key: list[str]) -> pl.DataFrame:
    """A small table's rows with their pending communicators resolved; the last row
    (in line order) of each key."""
    rows = C.resolve(frame, state.segments).collect()
    return rows.sort("line_no").unique(key, keep="last", maintain_order=True)


def _finish(state: _State, long_lines: int) -> NcclLog:
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
    tables: dict[str, Path] = {}
    for table, frame in (("nccl_processes", processes), ("nccl_comms", comms),
                         ("nccl_rings", rings)):
        tables[table] = state.out_dir / f"{table}.parquet"
        frame.write_parquet(tables[table])
    for table, schema in FINAL.items():
        tables[table] = state.out_dir / f"{table}.parquet"
        C.resolve(pl.scan_parquet(state.staged(table)), state.segments, dev="cuda_dev").select(
            schema.names()).sink_parquet(tables[table])
        state.staged(table).unlink()
    ranks = sorted({r for r in processes["global_rank"].to_list() if r is not None})
    return NcclLog(
        file=state.display, nccl_versions=versions, tables=tables,
        n_records=comms.height + state.rows["nccl_channels"] + state.rows["nccl_warnings"],
        hosts=sorted(set(processes["host"].to_list())), ranks=ranks, n_gpus=processes.height,
        long_lines=long_lines)
