"""Read an `NCCL_DEBUG=INFO` log (one `NCCL_DEBUG_FILE` per process, or a job's stdout
with NCCL lines mixed in) into communicator, channel and warning tables.

Every line is matched with vectorized polars regexes; nothing loops over lines in
Python. Line shapes (../shared/reference/trace-formats.md §3b; real excerpts and the
NCCL source they come from are cited in tests/data/nccl/README.md):

    <host>:<pid>:<tid> [<cudaDev>] NCCL INFO <msg>
    [<time>] <host>:<pid>:<tid> [<cudaDev>] <file>:<line> NCCL WARN <msg>   (time: >= 2.26)
    NCCL version 2.18.3+cuda12.2                                              (bare, <= 2.18)
    ... NCCL INFO comm 0x.. rank 1 nRanks 8 nNodes 1 localRanks 8 localRank 1 MNNVL 0
    ... NCCL INFO [ncclCommInitRank ]comm 0x.. rank 6 nranks 16 cudaDev 6 [nvmlDev 6 ]busId c8000
        [commId 0x49bbd7790311d5eb ]- Init COMPLETE
    ... NCCL INFO Channel 07/0 : 0[0] -> 2[0] [receive] via NET/IB/3/GDRDMA
    ... NCCL INFO Channel 00/0 : 3[1] -> 2[0] via P2P/CUMEM
    ... NCCL INFO Using network IB | NET/IB : Using [0]mlx5_0:1/IB ... | NET/IB : No device found.

Channel lines do not name their communicator: they belong to the communicator the same
thread (host, pid, tid) last initialised, the way NCCL's init thread prints them.
"""

from __future__ import annotations

import gzip
import io
import zlib
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from stepscope.ingest.errors import TraceFileError

PREFIX = (r"^(?:\[(?P<time>[^\]]*)\] )?(?P<host>[^\s:\[]+):(?P<pid>\d+):(?P<tid>\d+) "
          r"\[(?P<dev>\d+)\] (?:(?P<src>\S+:\d+) )?NCCL (?P<level>INFO|WARN) (?P<msg>.*)$")
VERSION = r"NCCL version (\d+\.\d+\.\d+\S*)"
INIT_DONE = (r"comm (0x[0-9a-fA-F]+) rank (\d+) nranks (\d+) cudaDev (\d+)"
             r"(?: nvmlDev (\d+))? busId ([0-9a-fA-F]+)(?: commId (0x[0-9a-fA-F]+))?"
             r".*Init COMPLETE")
TOPO = (r"comm (0x[0-9a-fA-F]+) rank (\d+) nRanks (\d+) nNodes (\d+) localRanks (\d+) "
        r"localRank (\d+)")
CHANNEL = (r"^Channel (\d+)(?:/(\d+))? : (\d+)\[([0-9a-fA-F]+)\] -> (\d+)\[([0-9a-fA-F]+)\]"
           r"(?: \[(send|receive)\])? via (\S+(?: pointer)?)")
RING = r"^Channel (\d+)/(\d+) :((?:\s+\d+)+)\s*$"
NETWORK = r"^Using network (\S+)"
IB_DEVICES = r"^NET/IB ?: Using (\[\d+\].*?)(?: ?; OOB|$)"
COMM_PTR = r"comm (0x[0-9a-fA-F]+)"


@dataclass
class NcclLog:
    """One log file's rows (polars frames; columns as in docs/schema.md)."""

    file: str
    nccl_versions: list[str]
    processes: pl.DataFrame      # host, pid, cuda_dev, nccl_version, network, ib_devices
    comms: pl.DataFrame          # one row per (process, communicator)
    channels: pl.DataFrame       # one row per channel connection line
    rings: pl.DataFrame          # ring order per communicator and channel
    warnings: pl.DataFrame       # WARN lines


def _read_lines(path: Path, display: str) -> pl.DataFrame:
    try:
        data = path.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise TraceFileError(display, f"cannot read the NCCL log ({exc})") from None
    if not data.strip():
        raise TraceFileError(display, "empty NCCL log")
    frame = pl.read_csv(io.BytesIO(data), has_header=False, separator="\x1f", quote_char=None,
                        new_columns=["line"], encoding="utf8-lossy", truncate_ragged_lines=True,
                        schema_overrides={"line": pl.String}, infer_schema=False)
    return frame.with_row_index("line_no")


def read_nccl_log(path: Path, display: str) -> NcclLog:
    """Parse one log; raises TraceFileError (one line) when it holds no NCCL line at all
    or cannot be parsed."""
    try:
        return _parse(_read_lines(path, display), display)
    except pl.exceptions.PolarsError as exc:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TraceFileError(display, f"unreadable NCCL log ({detail[:200]})") from None


def _parse(lines: pl.DataFrame, display: str) -> NcclLog:
    parsed = lines.with_columns(
        pl.col("line").str.extract_groups(PREFIX).alias("p")).unnest("p")
    nccl = parsed.filter(pl.col("msg").is_not_null()).with_columns(
        pl.col("pid").cast(pl.Int64), pl.col("tid").cast(pl.Int64),
        pl.col("dev").cast(pl.Int32))
    bare = parsed.filter(pl.col("msg").is_null())["line"].str.extract(r"^" + VERSION)
    if nccl.is_empty() and bare.drop_nulls().is_empty():
        raise TraceFileError(display, "no NCCL_DEBUG line in it (expected lines like "
                             "'host:pid:tid [dev] NCCL INFO ...')")
    nccl = _with_comm(nccl)
    versions = sorted(set(bare.drop_nulls().to_list())
                      | set(nccl["msg"].str.extract(r"^" + VERSION).drop_nulls().to_list()))
    processes = _processes(nccl, versions)
    return NcclLog(file=display, nccl_versions=versions, processes=processes,
                   comms=_comms(nccl, processes, display), channels=_channels(nccl, display),
                   rings=_rings(nccl), warnings=_warnings(nccl, display))


def _with_comm(nccl: pl.DataFrame) -> pl.DataFrame:
    """The communicator pointer each line belongs to: its own, else the one its thread
    named last."""
    return nccl.with_columns(
        pl.col("msg").str.extract(COMM_PTR).alias("comm_ptr_own"),
    ).with_columns(
        pl.col("comm_ptr_own").forward_fill().over(["host", "pid", "tid"], order_by="line_no")
        .alias("comm_ptr"))


def _processes(nccl: pl.DataFrame, versions: list[str]) -> pl.DataFrame:
    msg = pl.col("msg")
    per_line = nccl.select(
        "host", "pid", "dev",
        msg.str.extract(r"^" + VERSION).alias("version"),
        msg.str.extract(NETWORK).alias("network"),
        msg.str.extract(IB_DEVICES).alias("ib_devices"),
        msg.str.contains(r"^NET/IB ?: No device found").alias("no_ib"))
    out = per_line.group_by("host", "pid").agg(
        pl.col("dev").filter(pl.col("dev").is_not_null()).first().alias("cuda_dev"),
        pl.col("version").drop_nulls().last().alias("nccl_version"),
        pl.col("network").drop_nulls().last().alias("network"),
        pl.col("ib_devices").drop_nulls().last().alias("ib_devices"),
        pl.col("no_ib").any().alias("no_ib_device"))
    if len(versions) == 1:  # a bare version line speaks for every process of the file
        out = out.with_columns(pl.col("nccl_version").fill_null(versions[0]))
    return out.sort("host", "pid")


def _comms(nccl: pl.DataFrame, processes: pl.DataFrame, display: str) -> pl.DataFrame:
    done = nccl.select("host", "pid", pl.col("msg").str.extract_groups(INIT_DONE).alias("g")
                       ).unnest("g").rename({
                           "1": "comm_ptr", "2": "rank", "3": "nranks", "4": "cuda_dev",
                           "5": "nvml_dev", "6": "bus_id", "7": "comm_id"}).filter(
        pl.col("comm_ptr").is_not_null())
    topo = nccl.select("host", "pid", pl.col("msg").str.extract_groups(TOPO).alias("g")
                       ).unnest("g").rename({
                           "1": "comm_ptr", "2": "t_rank", "3": "t_nranks", "4": "nnodes",
                           "5": "local_ranks", "6": "local_rank"}).filter(
        pl.col("comm_ptr").is_not_null()).unique(["host", "pid", "comm_ptr"], keep="last")
    ints = ["rank", "nranks", "cuda_dev", "nvml_dev", "nnodes", "local_ranks", "local_rank"]
    comms = done.unique(["host", "pid", "comm_ptr"], keep="last").join(
        topo, on=["host", "pid", "comm_ptr"], how="left").with_columns(
        [pl.col(c).cast(pl.Int32) for c in ints]).with_columns(
        pl.col("bus_id").str.to_lowercase(), pl.col("comm_id").str.to_lowercase())
    return comms.join(processes.select("host", "pid", "nccl_version", "network"),
                      on=["host", "pid"], how="left").select(
        "comm_id", "comm_ptr", "host", "pid", "rank", "nranks", "nnodes", "local_ranks",
        "local_rank", "cuda_dev", "nvml_dev", "bus_id", "nccl_version", "network",
        pl.lit(display).alias("source_file"))


TRANSPORT_TIER = (
    pl.when(pl.col("transport").str.starts_with("P2P")).then(pl.lit("p2p"))
    .when(pl.col("transport").str.starts_with("SHM")).then(pl.lit("shm"))
    .when(pl.col("transport").str.starts_with("NET/IB")).then(pl.lit("ib"))
    .when(pl.col("transport").str.starts_with("NET/Socket")).then(pl.lit("socket"))
    .when(pl.col("transport").str.starts_with("NET")).then(pl.lit("net"))
    .when(pl.col("transport").str.starts_with("COLLNET")).then(pl.lit("collnet"))
    .when(pl.col("transport").str.starts_with("NVLS")).then(pl.lit("nvls"))
    .otherwise(pl.lit("other")))


def _channels(nccl: pl.DataFrame, display: str) -> pl.DataFrame:
    groups = nccl.select("host", "pid", "comm_ptr",
                         pl.col("msg").str.extract_groups(CHANNEL).alias("g")).unnest("g")
    out = groups.rename({"1": "channel", "2": "conn_index", "3": "src_rank", "4": "src_dev",
                         "5": "dst_rank", "6": "dst_dev", "7": "direction", "8": "transport"}
                        ).filter(pl.col("transport").is_not_null())
    return out.with_columns(
        [pl.col(c).cast(pl.Int32) for c in ("channel", "conn_index", "src_rank", "dst_rank")],
    ).with_columns(
        TRANSPORT_TIER.alias("tier"),
        pl.col("transport").str.contains("GDRDMA").alias("gdr"),
        pl.lit(display).alias("source_file"),
    ).select("host", "pid", "comm_ptr", "channel", "conn_index", "src_rank", "src_dev",
             "dst_rank", "dst_dev", "direction", "transport", "tier", "gdr", "source_file")


def _rings(nccl: pl.DataFrame) -> pl.DataFrame:
    groups = nccl.select("host", "pid", "comm_ptr",
                         pl.col("msg").str.extract_groups(RING).alias("g")).unnest("g")
    return groups.rename({"1": "channel", "2": "n_channels", "3": "order"}).filter(
        pl.col("order").is_not_null()).with_columns(
        pl.col("channel").cast(pl.Int32), pl.col("n_channels").cast(pl.Int32),
        pl.col("order").str.strip_chars().str.split(" ").list.eval(
            pl.element().filter(pl.element() != "").cast(pl.Int32)).alias("ring"),
    ).unique(["host", "pid", "comm_ptr", "channel"], keep="last").select(
        "host", "pid", "comm_ptr", "channel", "n_channels", "ring")


def _warnings(nccl: pl.DataFrame, display: str) -> pl.DataFrame:
    return nccl.filter(pl.col("level") == "WARN").select(
        "host", "pid", pl.col("dev").alias("cuda_dev"), "comm_ptr",
        pl.col("time").alias("logged_at"), pl.col("src").alias("source_location"),
        pl.col("msg").alias("message"), pl.lit(display).alias("source_file"))
