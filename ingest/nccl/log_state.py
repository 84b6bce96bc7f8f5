"""What an NCCL_DEBUG log's blocks leave for the next ones (ingest/nccl/debug_log.py),
kept small whatever the log's size:

* small tables keyed by process, thread and communicator (facts, GPUs, init lines,
  rings, the init-segment map), where a repeated line only overwrites its key;
* connection lines go to a Parquet file as they come, each distinct one once: a
  connection is remembered by a 64-bit hash of its fields (8 bytes, at most
  MAX_SEEN of them), so a log of one line repeated a billion times stores one row;
* WARN lines are counted per distinct (process, GPU, thread, communicator, source,
  message): one row with the count and the first and last time, at most MAX_WARNINGS
  distinct ones (further distinct messages are only counted, in the source's note).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from stepscope.ingest.nccl import bench as B
from stepscope.ingest.nccl import log_comms as C
from stepscope.ingest.nccl import log_patterns as P

MAX_SEEN = 1 << 22
MAX_WARNINGS = 100_000
BATCH_ROWS = 1 << 16
CHANNEL_KEY = [c for c in P.CHANNEL_ROWS.names() if c not in ("pending", "line_no")]
WARNING_KEY = ["host", "pid", "cuda_dev", "tid", "seg", "comm_ptr", "source_location",
               "message", "source_file", "pending"]


def _empty(schema: pl.Schema) -> pl.DataFrame:
    return pl.DataFrame(schema=schema)


@dataclass
class LogState:
    out_dir: Path
    display: str
    line_no: int = 0
    nccl_lines: int = 0
    long_lines: int = 0
    dropped_warnings: int = 0
    channel_rows: int = 0
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
    warnings: pl.DataFrame = field(default_factory=lambda: _empty(P.WARNING_COUNTS))
    seen: pl.Series = field(default_factory=lambda: pl.Series("h", [], pl.UInt64))
    writer: pq.ParquetWriter | None = None
    # candidate nccl-tests lines (ingest/nccl/bench.py): a few per message size
    bench: pl.DataFrame = field(default_factory=lambda: _empty(B.LINES))

    @property
    def staged(self) -> Path:
        return self.out_dir / "nccl_channels.rows.parquet"

    def add_channels(self, rows: pl.DataFrame) -> None:
        """Append the connection lines not seen before (by hash) to the staging file."""
        rows = rows.with_columns(pl.struct(CHANNEL_KEY).hash(seed=0).alias("h")).unique(
            "h", keep="first", maintain_order=True).join(
            self.seen.to_frame(), on="h", how="anti", maintain_order="left")
        if len(self.seen) < MAX_SEEN:
            self.seen = pl.concat([self.seen, rows["h"]])
        self._write(rows.drop("h"))

    def _write(self, rows: pl.DataFrame) -> None:
        arrow = rows.to_arrow()
        if self.writer is None:
            self.writer = pq.ParquetWriter(self.staged, arrow.schema)
        if rows.height:
            self.writer.write_table(arrow)
            self.channel_rows += rows.height

    def add_warnings(self, rows: pl.DataFrame) -> None:
        """Count the WARN lines per distinct message; keep at most MAX_WARNINGS."""
        if rows.is_empty():
            return
        both = pl.concat([self.warnings, _counted(rows)]).group_by(
            WARNING_KEY, maintain_order=True).agg(
            pl.col("n_lines").sum(), pl.col("logged_at").drop_nulls().first(),
            pl.col("last_logged_at").drop_nulls().last(), pl.col("line_no").first())
        if both.height > MAX_WARNINGS:
            self.dropped_warnings += int(both["n_lines"].slice(MAX_WARNINGS).sum())
            both = both.head(MAX_WARNINGS)
        self.warnings = both.select(P.WARNING_COUNTS.names()).cast(P.WARNING_COUNTS)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def _counted(rows: pl.DataFrame) -> pl.DataFrame:
    return rows.group_by(WARNING_KEY, maintain_order=True).agg(
        pl.len().cast(pl.Int64).alias("n_lines"), pl.col("logged_at").drop_nulls().first(),
        pl.col("logged_at").drop_nulls().last().alias("last_logged_at"),
        pl.col("line_no").first()).select(P.WARNING_COUNTS.names()).cast(P.WARNING_COUNTS)


def resolved_channels(state: LogState, target: Path,
                      comms: pl.DataFrame | None = None) -> None:
    """The staged connection rows with pending communicators resolved, batch by batch
    (memory of one batch), into `target`; rows still without one are matched to `comms`
    (host, pid, cuda_dev, comm_ptr, rank, nranks) by their own rank (C.by_own_rank)."""
    schema = _empty(P.CHANNEL_OUT).to_arrow().schema
    with pq.ParquetWriter(target, schema) as out:
        if state.staged.exists():
            for batch in pq.ParquetFile(state.staged).iter_batches(BATCH_ROWS):
                frame = pl.from_arrow(batch)
                assert isinstance(frame, pl.DataFrame)
                rows = C.resolve(frame, state.segments, dev="cuda_dev").collect()
                if comms is not None:
                    rows = C.by_own_rank(rows, comms)
                out.write_table(rows.select(P.CHANNEL_OUT.names()).cast(
                    P.CHANNEL_OUT).to_arrow())
    state.staged.unlink(missing_ok=True)
