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
(no Python loop) and checks every field's JSON type and range in bulk (inspector_fields.py);
header.rank is communicator-local, so the global rank is resolved after loading
(nccl_processes, else the Kineto rank of the same host and pid).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import duckdb
import pyarrow as pa

from stepscope.ingest.errors import TraceFileError
from stepscope.ingest.limits import max_trace_bytes
from stepscope.ingest.nccl.inspector_fields import check_params, raise_first_problem
from stepscope.ingest.nccl.jsonl_errors import jsonl_problem
from stepscope.ingest.nccl.profiler_plugin import check_text_size, private_connection
from stepscope.ingest.sql_files import sql


def read_inspector(path: Path, display: str, max_bytes: int | None = None) -> pa.Table:
    """The ops of one Inspector file; TraceFileError (one line) for anything unreadable,
    a value of a type or range its field does not take (inspector_fields.py), or a file
    larger than the per-file limit of text (`max_bytes`, ingest/limits.py)."""
    try:
        with open(path, "rb") as fh:
            magic = fh.read(2)
    except OSError as exc:
        raise TraceFileError(display, f"cannot read ({exc.strerror or exc})") from None
    check_text_size(path, display, max_bytes)
    with tempfile.TemporaryDirectory(prefix="stepscope-nccl-") as tmp:
        con = private_connection(tmp)
        try:
            con.execute(sql("nccl/inspector_lines.sql"), {
                "path": str(path), "compression": "gzip" if magic == b"\x1f\x8b" else "none"})
            problems = con.execute(sql("nccl/inspector_check.sql"),
                                   check_params()).fetchall()
            raise_first_problem(problems, display)
            table = con.sql(sql("nccl/inspector_read.sql")).to_arrow_table()
        except duckdb.Error as exc:
            detail = jsonl_problem(exc, path, display, max_trace_bytes(max_bytes))
            raise TraceFileError(display, "not readable as NCCL Inspector JSONL "
                                 f"({detail[:200]})") from None
        finally:
            con.close()
    _check(table, display)
    return table


def _check(table: pa.Table, display: str) -> None:
    """Lines without a field the reader needs fail the file (types and ranges were
    checked before: inspector_fields.py)."""
    if table.num_rows == 0:
        raise TraceFileError(display, "NCCL Inspector file without any op")
    for column, what in (("comm_id", "header.id"), ("n_ranks", "header.n_ranks"),
                         ("comm_rank", "header.rank"),
                         ("nccl_op", "coll_perf.coll / p2p_perf.p2p"),
                         ("exec_time_us", "the execution time")):
        nulls = table.column(column).null_count
        if nulls:
            raise TraceFileError(display, f"{nulls} NCCL Inspector line(s) without {what}")
