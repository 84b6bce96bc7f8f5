"""The NCCL_DEBUG line shapes and the polars expressions that turn a block of lines into
rows (ingest/nccl/debug_log.py streams the blocks). Each pattern is NCCL's own format
string (src/debug.cc, init.cc, transport/*.cc of NCCL 2.4-2.28; tests/data/nccl/README.md
cites them). Numbers are matched with bounded digit counts, so every cast to the table's
column type succeeds: a longer number is not NCCL's and the line is not matched.
"""

from __future__ import annotations

import polars as pl

from stepscope.ingest.nccl.log_stream import MAX_LINE_BYTES

__all__ = ["MAX_LINE_BYTES"]

_HEX = r"[0-9a-fA-F]{1,16}"
NCCL_MARK = r"NCCL (?:INFO|WARN) "
# The lines any table below reads (every other NCCL line, e.g. one per collective with
# NCCL_DEBUG_SUBSYS=COLL, only names its process and GPU): a cheap filter before the
# prefix is parsed.
INTERESTING = (r"NCCL WARN |NCCL INFO (?:NCCL version|Using network|NET/|GPU Direct RDMA|"
               r"Channel |Ring |CollNet |NVLS comm|Trees |Connected all rings|comm 0x)|"
               r"Init (?:COMPLETE|START)")
HEAD = r"^(?:\[[^\]]+\] )?([^\s:\[]+):(\d{1,10}):\d{1,10} \[(\d{1,5})\]"
# Lengths are left open where only numbers need bounds (a bounded repetition of a class
# is compiled as that many copies); lines are at most MAX_LINE_BYTES anyway.
PREFIX = (r"^(?:\[(?P<time>[^\]]+)\] )?(?P<host>[^\s:\[]+):(?P<pid>\d{1,10}):"
          r"(?P<tid>\d{1,10}) \[(?P<dev>\d{1,5})\] (?:(?P<src>\S+:\d{1,9})"
          r"(?: \([^)]*\))? )?NCCL (?P<level>INFO|WARN) (?P<msg>.*)$")
VERSION = r"^NCCL version (\d{1,4}\.\d{1,4}\.\d{1,4}\S{0,64})"
BARE_VERSION = VERSION
COMM_PTR = rf"comm (0x{_HEX})\b"
INIT_DONE = (rf"comm (0x{_HEX}) rank (\d{{1,9}}) nranks (\d{{1,9}}) cudaDev (\d{{1,5}})"
             rf"(?: nvmlDev (\d{{1,5}}))?(?: busId ({_HEX}))?(?: commId (0x{_HEX}))?"
             r".*Init COMPLETE")
INIT_START = rf"comm (0x{_HEX}) rank \d{{1,9}} nranks \d{{1,9}} cudaDev .*Init START"  # >= 2.19
TREES = r"^Trees \["
TOPO = (rf"comm (0x{_HEX}) rank (\d{{1,9}}) nRanks (\d{{1,9}}) nNodes (\d{{1,9}}) "
        r"localRanks (\d{1,9}) localRank (\d{1,9})")
# `Channel 07/0 : 0[0] -> 2[0] [receive] via NET/IB/3/GDRDMA`; before 2.7 `Ring 00 : ...`,
# before 2.5 without the [dev]. The transport is the rest of the line: `P2P/direct
# pointer/read`, `NET/AWS Libfabric/0/GDRDMA`, `direct shared memory` hold spaces.
CHANNEL = (rf"^(?:Channel|Ring) (\d{{1,5}})(?:/(\d{{1,5}}))? : (\d{{1,9}})(?:\[({_HEX})\])? -> "
           rf"(\d{{1,9}})(?:\[({_HEX})\])?(?: \[(send|receive)\])? via (.+?)\s*$")
COLLNET = r"^CollNet (\d{1,5})/(\d{1,5}) : (\d{1,9}) \[(send|receive)\] via (COLLNET\S*)\s*$"
NVLS = rf"^NVLS comm (0x{_HEX}) "
RING = r"^Channel (\d{1,5})(?:/(\d{1,5}))? :((?:\s+\d{1,9})+)\s*$"
NETWORK = r"^Using network (.+?)\s*$"
IB_DEVICES = r"^NET/IB ?: Using (\[\d+\].*?)(?: ?; OOB|$)"
NO_IB = r"^NET/IB ?: No device found"
GPU_GDR = rf"GPU Direct RDMA (Enabled|Disabled) for GPU ({_HEX}) / HCA"
HCA_GDR = r"^NET/.+? ?: GPU Direct RDMA (Enabled|Disabled) for HCA"
USE_GDR = r"^Connected all rings, use ring PXN (\d) GDR (\d)"

I32, I64, STR, BOOL = pl.Int32, pl.Int64, pl.String, pl.Boolean
DEVS = pl.Schema({"host": STR, "pid": I64, "dev": I32})
FACTS = pl.Schema({"host": STR, "pid": I64, "nccl_version": STR,
                   "network": STR, "ib_devices": STR, "no_ib_device": BOOL, "hca_on": BOOL,
                   "hca_off": BOOL})
GPU_GDR_ROWS = pl.Schema({"host": STR, "pid": I64, "bus_id": STR, "gdr": BOOL})
DONE = pl.Schema({"host": STR, "pid": I64, "comm_ptr": STR, "rank": I32, "nranks": I32,
                  "cuda_dev": I32, "nvml_dev": I32, "bus_id": STR, "comm_id": STR,
                  "init_line": I64})
TOPO_ROWS = pl.Schema({"host": STR, "pid": I64, "comm_ptr": STR, "nnodes": I32,
                       "local_ranks": I32, "local_rank": I32})
# Rows whose communicator may still be pending carry the line's thread and init segment
# (ingest/nccl/log_comms.py) until the end of the log.
PENDING = [("tid", I64), ("seg", I64), ("pending", BOOL), ("line_no", I64)]
USE_GDR_ROWS = pl.Schema([("host", STR), ("pid", I64), ("dev", I32), ("comm_ptr", STR),
                          ("use_gdr", BOOL), *PENDING])
RING_ROWS = pl.Schema([("host", STR), ("pid", I64), ("dev", I32), ("comm_ptr", STR),
                       ("channel", I32), ("n_channels", I32), ("ring", pl.List(I32)),
                       *PENDING])
CHANNEL_OUT = pl.Schema([
    ("host", STR), ("pid", I64), ("cuda_dev", I32), ("comm_ptr", STR), ("channel", I32),
    ("conn_index", I32), ("src_rank", I32), ("src_dev", STR), ("dst_rank", I32),
    ("dst_dev", STR), ("direction", STR), ("transport", STR), ("tier", STR), ("gdr", BOOL),
    ("source_file", STR)])
WARNING_LINE = [("host", STR), ("pid", I64), ("cuda_dev", I32), ("comm_ptr", STR),
                ("logged_at", STR), ("source_location", STR), ("message", STR),
                ("source_file", STR)]
WARNING_OUT = pl.Schema([*WARNING_LINE[:5], ("last_logged_at", STR), ("n_lines", I64),
                         *WARNING_LINE[5:]])
CHANNEL_ROWS = pl.Schema([*CHANNEL_OUT.items(), *PENDING])
WARNING_ROWS = pl.Schema([*WARNING_LINE, *PENDING])
WARNING_COUNTS = pl.Schema([*WARNING_OUT.items(), *PENDING])
COMM_OUT_COLUMNS = ["comm_id", "comm_ptr", "host", "pid", "rank", "nranks", "nnodes",
                    "local_ranks", "local_rank", "cuda_dev", "nvml_dev", "bus_id", "use_gdr",
                    "init_line", "nccl_version", "network", "source_file"]
RING_OUT_COLUMNS = ["host", "pid", "comm_ptr", "channel", "n_channels", "ring"]
PROCESS_OUT_COLUMNS = ["host", "pid", "cuda_dev", "nvml_dev", "bus_id", "global_rank",
                       "nccl_version", "network", "ib_devices", "no_ib_device", "gdr",
                       "gdr_hca", "source_file"]


def parse_prefix(lines: pl.DataFrame) -> pl.DataFrame:
    """NCCL lines: line_no, time, host, pid, tid, dev, src, level, msg."""
    parsed = lines.with_columns(pl.col("line").str.extract_groups(PREFIX).alias("p")
                                ).unnest("p").drop("line")
    return parsed.filter(pl.col("msg").is_not_null()).with_columns(
        pl.col("pid").cast(I64), pl.col("tid").cast(I64), pl.col("dev").cast(I32))


def _groups(nccl: pl.DataFrame, pattern: str, names: list[str],
            keep: tuple[str, ...] = ("host", "pid")) -> pl.DataFrame:
    """The capture groups of `pattern` in each message, named; matching lines only."""
    out = nccl.select(*keep, pl.col("msg").str.extract_groups(pattern).alias("g")).unnest("g")
    out = out.rename(dict(zip([str(i + 1) for i in range(len(names))], names, strict=True)))
    return out.filter(pl.col(names[0]).is_not_null())


def facts(nccl: pl.DataFrame) -> pl.DataFrame:
    """Per process in this block: NCCL version, network, IB devices,
    no IB device, and whether an HCA reported GPUDirect RDMA Enabled / Disabled."""
    msg = pl.col("msg")
    hca = msg.str.extract(HCA_GDR)
    return nccl.group_by("host", "pid", maintain_order=True).agg(
        msg.str.extract(VERSION).drop_nulls().last().alias("nccl_version"),
        msg.str.extract(NETWORK).drop_nulls().last().alias("network"),
        msg.str.extract(IB_DEVICES).drop_nulls().last().alias("ib_devices"),
        msg.str.contains(NO_IB).any().alias("no_ib_device"),
        (hca == "Enabled").any().alias("hca_on"), (hca == "Disabled").any().alias("hca_off"),
    ).cast(FACTS)


def merge_facts(old: pl.DataFrame, new: pl.DataFrame) -> pl.DataFrame:
    """Facts of earlier blocks and of this one: the last value seen, any flag set."""
    if old.is_empty():
        return new
    both = pl.concat([old, new])
    return both.group_by("host", "pid", maintain_order=True).agg(
        *(pl.col(c).drop_nulls().last() for c in ("nccl_version", "network", "ib_devices")),
        *(pl.col(c).any() for c in ("no_ib_device", "hca_on", "hca_off")))


def gpu_gdr(nccl: pl.DataFrame) -> pl.DataFrame:
    """`GPU Direct RDMA Enabled|Disabled for GPU <busId> / HCA n`: per GPU, enabled for
    some HCA (NCCL 2.10-2.26 prints it as INFO)."""
    rows = _groups(nccl, GPU_GDR, ["state", "bus_id"])
    return rows.group_by("host", "pid", pl.col("bus_id").str.to_lowercase(),
                         maintain_order=True).agg((pl.col("state") == "Enabled").any()
                                                  .alias("gdr"))


def merge_gpu_gdr(old: pl.DataFrame, new: pl.DataFrame) -> pl.DataFrame:
    if new.is_empty():
        return old
    return pl.concat([old, new.cast(GPU_GDR_ROWS)]).group_by(
        "host", "pid", "bus_id", maintain_order=True).agg(pl.col("gdr").any())


def init_done(nccl: pl.DataFrame) -> pl.DataFrame:
    names = ["comm_ptr", "rank", "nranks", "cuda_dev", "nvml_dev", "bus_id", "comm_id"]
    rows = _groups(nccl, INIT_DONE, names, keep=("host", "pid", "line_no"))
    return rows.select(
        "host", "pid", "comm_ptr", "rank", "nranks", "cuda_dev", "nvml_dev",
        pl.col("bus_id").str.to_lowercase(), pl.col("comm_id").str.to_lowercase(),
        pl.col("line_no").alias("init_line")).cast(DONE)


def topo(nccl: pl.DataFrame) -> pl.DataFrame:
    names = ["comm_ptr", "t_rank", "t_nranks", "nnodes", "local_ranks", "local_rank"]
    return _groups(nccl, TOPO, names).select(TOPO_ROWS.names()).cast(
        TOPO_ROWS)


LINE = ("host", "pid", "dev", "comm_ptr", "tid", "seg", "pending", "line_no")


def use_gdr(nccl: pl.DataFrame) -> pl.DataFrame:
    """`Connected all rings, use ring PXN p GDR g` (NCCL >= 2.23): the communicator's
    useGdr, 0 once a network receive connection could not use GPUDirect RDMA."""
    rows = _groups(nccl, USE_GDR, ["pxn", "g"], keep=LINE)
    return rows.with_columns((pl.col("g") == "1").alias("use_gdr")).select(
        USE_GDR_ROWS.names()).cast(USE_GDR_ROWS)


def rings(nccl: pl.DataFrame) -> pl.DataFrame:
    rows = _groups(nccl, RING, ["channel", "n_channels", "order"], keep=LINE)
    return rows.with_columns(
        pl.col("order").str.strip_chars().str.split(" ").list.eval(
            pl.element().filter(pl.element() != "")).alias("ring"),
    ).select(RING_ROWS.names()).cast(RING_ROWS)


TRANSPORT_TIER = (
    pl.when(pl.col("transport").str.starts_with("P2P")).then(pl.lit("p2p"))
    .when(pl.col("transport").str.starts_with("SHM")
          | (pl.col("transport") == "direct shared memory")).then(pl.lit("shm"))
    .when(pl.col("transport").str.starts_with("NET/IB")).then(pl.lit("ib"))
    .when(pl.col("transport").str.starts_with("NET/Socket")).then(pl.lit("socket"))
    .when(pl.col("transport").str.starts_with("NET/")).then(pl.lit("net"))
    .when(pl.col("transport").str.starts_with("COLLNET")).then(pl.lit("collnet"))
    .when(pl.col("transport").str.starts_with("NVLS")).then(pl.lit("nvls"))
    .otherwise(pl.lit("other")))


def channels(nccl: pl.DataFrame, display: str) -> pl.DataFrame:
    """One row per connection line (`Channel`/`Ring`), CollNet connection and NVLS
    buffer setup (`NVLS comm ...`: the communicator uses NVLink SHARP), in line order."""
    names = ["channel", "conn_index", "src_rank", "src_dev", "dst_rank", "dst_dev",
             "direction", "transport"]
    p2p = _groups(nccl, CHANNEL, names, keep=LINE)
    coll = _groups(nccl, COLLNET, ["channel", "conn_index", "src_rank", "direction",
                                   "transport"], keep=LINE)
    nvls = nccl.filter(pl.col("msg").str.contains(NVLS)).select(
        *LINE, pl.lit("NVLS").alias("transport"))
    out = pl.concat([p2p, coll, nvls], how="diagonal_relaxed").sort("line_no")
    return out.with_columns(
        TRANSPORT_TIER.alias("tier"), pl.col("transport").str.contains("/GDRDMA").alias("gdr"),
        pl.lit(display).alias("source_file"), pl.col("dev").alias("cuda_dev"),
    ).select(CHANNEL_ROWS.names()).cast(CHANNEL_ROWS)


def warnings(nccl: pl.DataFrame, display: str) -> pl.DataFrame:
    return nccl.filter(pl.col("level") == "WARN").select(
        "host", "pid", pl.col("dev").alias("cuda_dev"), "comm_ptr",
        pl.col("time").alias("logged_at"), pl.col("src").alias("source_location"),
        pl.col("msg").alias("message"), pl.lit(display).alias("source_file"),
        "tid", "seg", "pending", "line_no",
    ).cast(WARNING_ROWS)


def comms(done: pl.DataFrame, topo_rows: pl.DataFrame, gdr: pl.DataFrame,
          display: str) -> pl.DataFrame:
    """One row per (process, communicator pointer): its last Init COMPLETE line, with
    the topology and useGdr lines of the same pointer; sorted."""
    key = ["host", "pid", "comm_ptr"]
    return done.join(topo_rows, on=key, how="left").join(gdr, on=key, how="left").with_columns(
        pl.lit(display).alias("source_file")).sort("host", "pid", "init_line", "comm_ptr")


def heads(marked: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """(host, pid, [cudaDev]) of every NCCL line, and how many lines have a valid prefix;
    parsed once per distinct `host:pid:tid [dev]` prefix, not per line."""
    line = pl.col("line")
    prefixes = marked.group_by(line.str.slice(0, line.str.find(" NCCL ", literal=True))
                               .alias("head"), maintain_order=True).len()
    parsed = prefixes.with_columns(pl.col("head").str.extract_groups(HEAD).alias("g")).unnest(
        "g").filter(pl.col("1").is_not_null())
    devs = parsed.select(pl.col("1").alias("host"), pl.col("2").cast(I64).alias("pid"),
                         pl.col("3").cast(I32).alias("dev")).unique(maintain_order=True)
    return devs, int(parsed["len"].sum())


def processes(comm_rows: pl.DataFrame, fact_rows: pl.DataFrame, dev_rows: pl.DataFrame,
              gpu_gdr_rows: pl.DataFrame, versions: list[str], display: str) -> pl.DataFrame:
    """One row per GPU a process drives (host, pid, cudaDev of its communicators), with
    the busId and global rank of its largest communicator (earliest initialised among
    equals); a process that initialised none (no Init COMPLETE: a log cut short, NCCL
    2.4's ncclCommInitAll) has one row per [cudaDev] its lines carry."""
    gpus = comm_rows.sort(["nranks", "init_line", "comm_ptr"], descending=[True, False, False]
                          ).group_by("host", "pid", "cuda_dev", maintain_order=True).agg(
        pl.col("nvml_dev").first(), pl.col("bus_id").first(),
        pl.col("rank").first().alias("global_rank"))
    bare = dev_rows.join(gpus, on=["host", "pid"], how="anti").select(
        "host", "pid", pl.col("dev").alias("cuda_dev"), pl.lit(None, I32).alias("nvml_dev"),
        pl.lit(None, STR).alias("bus_id"), pl.lit(None, I32).alias("global_rank"))
    rows = pl.concat([gpus, bare]).join(fact_rows, on=["host", "pid"], how="left")
    rows = rows.join(gpu_gdr_rows, on=["host", "pid", "bus_id"], how="left").with_columns(
        pl.when(pl.col("hca_on")).then(True).when(pl.col("hca_off")).then(False)
        .otherwise(None).alias("gdr_hca"), pl.lit(display).alias("source_file"))
    if len(versions) == 1:  # a bare version line speaks for every process of the file
        rows = rows.with_columns(pl.col("nccl_version").fill_null(versions[0]))
    return rows.sort("host", "pid", "cuda_dev").select(PROCESS_OUT_COLUMNS)
