"""Read the NCCL profiler example plugin's dump (NCCL >= 2.27: `${NCCL_PROFILE_DUMP_FILE}_
${commHash}_${rank}.json`): a JSON array of Chrome async events, `ph` "b"/"e" pairs with
an `id`. COLL events carry {SeqNum, CommHash, Rank, Count, Datatype, Algorithm, Protocol,
nChannels}; P2P events {CommHash, Rank, Peer, Count, Datatype, nChannels}
(../shared/reference/trace-formats.md §3c). `ts` is µs on a steady clock from plugin
init, so only durations are used. DuckDB parses the array; begin and end are joined
in SQL. Message bytes = Count x the NCCL datatype's size; bus bandwidth needs the
communicator size, taken as the number of ranks seen for the CommHash (resolved after
all files are in).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa

from stepscope.ingest.db import connect
from stepscope.ingest.errors import TraceFileError
from stepscope.ingest.queries import sql

DTYPE_BYTES = {
    "ncclInt8": 1, "ncclChar": 1, "ncclUint8": 1, "ncclInt32": 4, "ncclInt": 4,
    "ncclUint32": 4, "ncclInt64": 8, "ncclUint64": 8, "ncclFloat16": 2, "ncclHalf": 2,
    "ncclFloat32": 4, "ncclFloat": 4, "ncclFloat64": 8, "ncclDouble": 8, "ncclBfloat16": 2,
    "ncclFloat8e4m3": 1, "ncclFloat8e5m2": 1,
}


def read_profiler_dump(path: Path, display: str) -> pa.Table:
    con = connect()
    try:
        table = con.sql(sql("nccl/profiler_read.sql"), params={"path": str(path)}
                        ).to_arrow_table()
    except duckdb.Error as exc:
        detail = str(exc).strip().splitlines()[0]
        raise TraceFileError(display, "not readable as an NCCL profiler-plugin dump "
                             f"({detail[:200]})") from None
    finally:
        con.close()
    if table.num_rows == 0:
        raise TraceFileError(display, "NCCL profiler-plugin dump without a complete COLL "
                             "or P2P event (a b/e pair)")
    return table
