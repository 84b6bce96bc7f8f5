"""Read NCCL Inspector plugin output (NCCL >= 2.28, `plugins/profiler/inspector`): one JSON
object per completed collective or P2P op per rank, with its message size, execution
time and bandwidths as the plugin measured them.

    {"header": {"id": "0x7f8c496ae9f661", "comm_name": "", "rank": 2, "n_ranks": 8,
                "nnodes": 1},
     "metadata": {"inspector_output_format_version": "v4.0", "git_rev": "",
                  "rec_mechanism": "nccl_profiler_interface",
                  "dump_timestamp_us": 1748030377748202, "hostname": "node0", "pid": 1639453},
     "coll_perf": {"coll": "AllReduce", "coll_sn": 1407, "coll_msg_size_bytes": 17179869184,
                   "coll_exec_time_us": 61974, "coll_timing_source": "kernel_gpu",
                   "coll_algobw_gbs": 277.21, "coll_busbw_gbs": 485.12}}

P2P ops carry `p2p_perf` {p2p, p2p_sn, p2p_peer, p2p_msg_size_bytes, p2p_exec_time_us,
p2p_timing_source, p2p_algobw_gbs, p2p_busbw_gbs}. DuckDB's JSON reader parses the lines
(no Python loop); header.rank is communicator-local, so the global rank is resolved
after loading (nccl_processes, else the Kineto rank of the same host and pid).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from stepscope.ingest.errors import TraceFileError
from stepscope.ingest.nccl.inspector_seq import check_sequence_numbers
from stepscope.ingest.nccl.profiler_plugin import check_text_size, private_connection
from stepscope.ingest.sql_files import sql


def read_inspector(path: Path, display: str, max_bytes: int | None = None) -> pa.Table:
    """The ops of one Inspector file; TraceFileError (one line) for anything unreadable
    or larger than the per-file limit of text (`max_bytes`, ingest/limits.py)."""
    try:
        with open(path, "rb") as fh:
            magic = fh.read(2)
    except OSError as exc:
        raise TraceFileError(display, f"cannot read ({exc.strerror or exc})") from None
    check_text_size(path, display, max_bytes)
    with tempfile.TemporaryDirectory(prefix="stepscope-nccl-") as tmp:
        con = private_connection(tmp)
        try:
            table = con.sql(sql("nccl/inspector_read.sql"), params={
                "path": str(path), "compression": "gzip" if magic == b"\x1f\x8b" else "none",
            }).to_arrow_table()
        except duckdb.Error as exc:
            detail = str(exc).strip().splitlines()[0]
            raise TraceFileError(display, "not readable as NCCL Inspector JSONL "
                                 f"({detail[:200]})") from None
        finally:
            con.close()
    _check(table, display)
    check_sequence_numbers(table, display)
    return table


def _check(table: pa.Table, display: str) -> None:
    if table.num_rows == 0:
        raise TraceFileError(display, "NCCL Inspector file without any op")
    for column, what in (("comm_id", "header.id"), ("nccl_op", "coll_perf.coll / p2p_perf.p2p"),
                         ("exec_time_us", "the execution time")):
        nulls = table.column(column).null_count
        if nulls:
            raise TraceFileError(display, f"{nulls} NCCL Inspector line(s) without {what}")
    _check_ranks(table, display)
    _check_values(table, display)


# An op's execution time above a day is no measurement (NCCL's watchdog aborts a
# collective after 10 minutes by default): 1e308 us would sum to inf in a report.
MAX_EXEC_TIME_US = 86_400e6
_VALUES = (("exec_time_us", "an execution time", MAX_EXEC_TIME_US),
           ("msg_bytes", "a message size", None), ("algo_bw_gbs", "an algorithm bandwidth", None),
           ("bus_bw_gbs", "a bus bandwidth", None))


def _check_values(table: pa.Table, display: str) -> None:
    """Measured values must be numbers >= 0, finite (and an execution time at most a
    day): a negative, NaN or infinite one is no measurement, and one line refuses the
    file with the count of such lines, as for a rank outside the communicator."""
    for column, what, most in _VALUES:
        values = pc.cast(table.column(column), pa.float64())
        bad = pc.or_(pc.invert(pc.is_finite(values)), pc.less(values, 0))
        if most is not None:
            bad = pc.or_(bad, pc.greater(values, most))
        count = pc.sum(pc.cast(pc.fill_null(bad, False), pa.int64())).as_py() or 0
        if count:
            limit = f", or over {most / 86_400e6:g} day" if most is not None else ""
            raise TraceFileError(display, f"{count} NCCL Inspector line(s) with {what} that "
                                 f"is negative or not finite{limit}")


def _check_ranks(table: pa.Table, display: str) -> None:
    """header.rank must lie in [0, header.n_ranks): a negative or too large rank would be
    resolved to no process, or to a wrong one."""
    rank, size = table.column("comm_rank"), table.column("n_ranks")
    bad = pc.or_(pc.less(rank, 0), pc.greater_equal(rank, pc.if_else(pc.is_null(size),
                                                                        rank, size)))
    count = pc.sum(pc.cast(pc.fill_null(bad, False), pa.int64())).as_py() or 0
    if count:
        raise TraceFileError(display, f"{count} NCCL Inspector line(s) with header.rank outside "
                             "[0, header.n_ranks)")
