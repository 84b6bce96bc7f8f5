"""Which communicator each NCCL_DEBUG line belongs to, when the line does not say.

Channel, ring and many warning lines carry no communicator pointer; NCCL prints them
from the thread that initialises (or runs) the communicator, on that communicator's GPU.
So lines are followed per thread and GPU (host, pid, tid, cudaDev: one thread may
initialise the communicators of several GPUs one after the other, ncclCommInitAll in
NCCL <= 2.8) through *init segments*: a segment opens at the first init line of a
communicator (`comm 0x.. rank .. nRanks ..` >= 2.20, `... Init START` >= 2.19, a ring
order `Channel 00/02 : 0 1 ..` or a `Trees [0] ..` line in every version) and closes at
its `... Init COMPLETE`.

* A line inside a segment belongs to the pointer that opened it, or, when the opening
  line names none (NCCL <= 2.19 names the communicator only at Init COMPLETE), to the
  pointer of the Init COMPLETE that closes it. That one may come blocks later: such a
  line is *pending*, resolved at the end from the segment map (thread, segment) ->
  pointer, which holds one row per initialisation.
* A line outside every segment (a connection made at run time, a warning after init)
  belongs to the last communicator its thread named.

A thread starts inside an implicit segment, so channel lines followed by Init COMPLETE
(a log cut to those lines) still find their communicator. Everything is vectorized per
block; what one block leaves open is carried per thread in a small table.
"""

from __future__ import annotations

import polars as pl

from stepscope.ingest.nccl import log_patterns as P

THREAD = ["host", "pid", "tid", "dev"]
CARRY = pl.Schema([("host", pl.String), ("pid", pl.Int64), ("tid", pl.Int64),
                   ("dev", pl.Int32), ("c_kind", pl.String), ("c_seg", pl.Int64),
                   ("c_start", pl.String), ("c_anchor", pl.String)])
SEGMENTS = pl.Schema([("host", pl.String), ("pid", pl.Int64), ("tid", pl.Int64),
                      ("dev", pl.Int32), ("seg", pl.Int64), ("done_ptr", pl.String)])


def _over(expr: pl.Expr, keys: list[str] = THREAD) -> pl.Expr:
    return expr.over(keys, order_by="line_no")


def assign(nccl: pl.DataFrame, carry: pl.DataFrame
           ) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(lines with comm_ptr, seg and pending; the carry for the next block; this block's
    segment map rows). `nccl` holds one block's NCCL lines."""
    msg = pl.col("msg")
    ptr = msg.str.extract(P.COMM_PTR)
    is_done = msg.str.contains(P.INIT_DONE)
    names_start = msg.str.contains(P.INIT_START) | msg.str.contains(P.TOPO)
    is_start = names_start | msg.str.contains(P.RING) | msg.str.contains(P.TREES)
    lines = nccl.with_columns(
        ptr.alias("own_ptr"),
        pl.when(names_start).then(ptr).alias("start_ptr"),
        pl.when(is_done | names_start | msg.str.contains(P.NVLS)).then(ptr).alias("anchor_ptr"),
        pl.when(is_done).then(ptr).alias("done_ptr"),
        pl.when(is_done).then(pl.lit("c")).when(is_start).then(pl.lit("s")).alias("kind"),
    ).join(carry, on=THREAD, how="left", maintain_order="left").with_columns(
        pl.col("c_kind").fill_null("s"), pl.col("c_seg").fill_null(0))
    kind = pl.col("kind")
    lines = lines.with_columns(
        _over(kind.forward_fill().shift(1)).fill_null(pl.col("c_kind")).alias("prev_kind"),
        _over(kind.forward_fill()).fill_null(pl.col("c_kind")).alias("cur_kind"),
    ).with_columns(
        (pl.col("c_seg") + _over(((kind == "s") & (pl.col("prev_kind") != "s"))
                                 .fill_null(False).cast(pl.Int64).cum_sum())).alias("seg"))
    lines = lines.with_columns(
        pl.coalesce(_over(pl.col("start_ptr").forward_fill(), [*THREAD, "seg"]),
                    pl.when(pl.col("seg") == pl.col("c_seg")).then(pl.col("c_start"))
                    ).alias("seg_start"),
        pl.coalesce(_over(pl.col("anchor_ptr").forward_fill()), pl.col("c_anchor")
                    ).alias("last_anchor"),
        (pl.col("cur_kind") == "s").alias("in_init"),
    ).with_columns(
        pl.coalesce("own_ptr", pl.when(pl.col("in_init")).then(pl.col("seg_start"))
                    .otherwise(pl.col("last_anchor"))).alias("comm_ptr"),
    ).with_columns((pl.col("comm_ptr").is_null() & pl.col("in_init")).alias("pending"))
    return (lines.drop("own_ptr", "start_ptr", "anchor_ptr", "kind", "c_kind", "c_seg",
                       "c_start", "c_anchor", "prev_kind", "in_init", "seg_start",
                       "last_anchor", "cur_kind", "done_ptr"),
            _next_carry(carry, lines), _segments(lines))


def _next_carry(carry: pl.DataFrame, lines: pl.DataFrame) -> pl.DataFrame:
    last = lines.sort("line_no").group_by(THREAD, maintain_order=True).agg(
        pl.col("cur_kind").last().alias("c_kind"), pl.col("seg").last().alias("c_seg"),
        pl.when(pl.col("cur_kind") == "s").then(pl.col("seg_start")).last().alias("c_start"),
        pl.col("last_anchor").last().alias("c_anchor"))
    return pl.concat([carry, last.cast(CARRY)]).unique(THREAD, keep="last",
                                                       maintain_order=True)


def _segments(lines: pl.DataFrame) -> pl.DataFrame:
    return lines.filter(pl.col("done_ptr").is_not_null()).select(
        *THREAD, "seg", "done_ptr").cast(SEGMENTS)


def resolve(frame: pl.LazyFrame | pl.DataFrame, segments: pl.DataFrame,
            dev: str = "dev") -> pl.LazyFrame:
    """Pending rows get the pointer of the Init COMPLETE that closed their segment."""
    seg_map = segments.unique([*THREAD, "seg"], keep="last").rename({"dev": dev}).lazy()
    return frame.lazy().join(seg_map, on=["host", "pid", "tid", dev, "seg"], how="left",
                             maintain_order="left").with_columns(
        pl.coalesce("comm_ptr", pl.when(pl.col("pending")).then(pl.col("done_ptr")))
        .alias("comm_ptr")).drop("done_ptr")


def by_own_rank(rows: pl.DataFrame, comms: pl.DataFrame) -> pl.DataFrame:
    """Connection lines no thread attributes get the communicator of their own process
    and GPU in which one end of the line has its rank, where exactly one fits.

    Since NCCL 2.22 connections are made at a communicator's first collective (runtime
    connection, the default), by threads that never named it, after its Init COMPLETE
    (nccl-tests issue #331: `[0] Channel 00/1 : 0[0] -> 1[1] via P2P/direct pointer/read`
    from threads 4063882/4063883, the communicators initialised by 4063871/4063872). A
    line with two fitting communicators (the same rank in two of them) stays unattributed:
    nothing in it tells them apart."""
    lost = pl.col("comm_ptr").is_null() & pl.col("src_rank").is_not_null()
    if comms.is_empty() or rows.filter(lost).is_empty():
        return rows
    rows = rows.with_row_index("_row")
    own = comms.select("host", "pid", "cuda_dev", pl.col("comm_ptr").alias("_ptr"), "rank",
                       "nranks")
    fits = rows.filter(lost).select("_row", "host", "pid", "cuda_dev", "src_rank",
                                    "dst_rank").join(own, on=["host", "pid", "cuda_dev"])
    fits = fits.filter(((pl.col("rank") == pl.col("src_rank"))
                        | (pl.col("rank") == pl.col("dst_rank")))
                       & (pl.max_horizontal("src_rank", "dst_rank") < pl.col("nranks")))
    unique = fits.group_by("_row").agg(pl.col("_ptr").unique()).filter(
        pl.col("_ptr").list.len() == 1).select("_row", pl.col("_ptr").list.first())
    return rows.join(unique, on="_row", how="left", maintain_order="left").with_columns(
        pl.coalesce("comm_ptr", "_ptr").alias("comm_ptr")).drop("_row", "_ptr")
