"""Read the NCCL profiler example plugin's dump (NCCL >= 2.27: `${NCCL_PROFILE_DUMP_FILE}_
${commHash}_${rank}.json`): a JSON array of Chrome async events, `ph` "b"/"e" pairs with
an `id`. COLL events carry {SeqNum, CommHash, Rank, Count, Datatype, Algorithm, Protocol,
nChannels}; P2P events {CommHash, Rank, Peer, Count, Datatype, nChannels}
(../shared/reference/trace-formats.md §3c). `ts` is µs on a steady clock from plugin
init, so only durations are used. DuckDB parses the array and pairs begin and end in SQL
(ingest/sql/nccl/profiler_read.sql): the k-th begin of an (id, cat, pid) with its k-th
end, a join on a unique key, so a file whose events all share one id stays linear.
Message bytes = Count x the NCCL datatype's size (NULL past a BIGINT); bus bandwidth
needs the communicator size, taken as the number of ranks seen for the CommHash
(resolved after all files are in).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import duckdb
import pyarrow as pa

from stepscope.ingest.db import connect
from stepscope.ingest.errors import TraceFileError
from stepscope.ingest.limits import max_trace_bytes
from stepscope.ingest.nccl.log_stream import text_chunks
from stepscope.ingest.read_errors import first_line, without_paths
from stepscope.ingest.sql_files import sql

# A private connection's memory: DuckDB spills past it to a temporary folder.
READER_MEMORY = "512MB"


def check_text_size(path: Path, display: str, max_bytes: int | None) -> None:
    """TraceFileError when the file holds more than the per-file limit of text
    (decompressed, for gzip), counted in a stream before DuckDB reads it."""
    limit = max_trace_bytes(max_bytes)
    for _ in text_chunks(path, display, limit):
        pass


def private_connection(tmp: str) -> duckdb.DuckDBPyConnection:
    return connect(config={"memory_limit": READER_MEMORY, "temp_directory": tmp,
                           "threads": 1})


def read_profiler_ops(path: Path, display: str, max_bytes: int | None = None) -> pa.Table:
    """The ops of one dump, in nccl_ops columns; TraceFileError (one line) otherwise."""
    check_text_size(path, display, max_bytes)
    with tempfile.TemporaryDirectory(prefix="stepscope-nccl-") as tmp:
        con = private_connection(tmp)
        try:
            table = con.sql(sql("nccl/profiler_read.sql"), params={"path": str(path)}
                            ).to_arrow_table()
        except duckdb.Error as exc:
            detail = without_paths(first_line(exc))
            raise TraceFileError(display, "not readable as an NCCL profiler-plugin dump "
                                 f"({detail[:200]})") from None
        finally:
            con.close()
    if table.num_rows == 0:
        raise TraceFileError(display, "NCCL profiler-plugin dump without a complete COLL "
                             "or P2P event (a b/e pair)")
    return table
