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

from ingest.errors import TraceFileError

DTYPE_BYTES = {
    "ncclInt8": 1, "ncclChar": 1, "ncclUint8": 1, "ncclInt32": 4, "ncclInt": 4,
    "ncclUint32": 4, "ncclInt64": 8, "ncclUint64": 8, "ncclFloat16": 2, "ncclHalf": 2,
    "ncclFloat32": 4, "ncclFloat": 4, "ncclFloat64": 8, "ncclDouble": 8, "ncclBfloat16": 2,
    "ncclFloat8e4m3": 1, "ncclFloat8e5m2": 1,
}
_SELECT = """
WITH ev AS (
    SELECT name, cat, ph, id, pid, tid, ts,
           args.SeqNum AS seq, CAST(args.CommHash AS VARCHAR) AS comm_hash, args.Rank AS rank,
           args.Peer AS peer, args.Count AS count, args.Datatype AS datatype,
           args.Algorithm AS algorithm, args.Protocol AS protocol
    FROM read_json($path, format = 'array', columns = {
        'name': 'VARCHAR', 'cat': 'VARCHAR', 'ph': 'VARCHAR', 'id': 'BIGINT',
        'pid': 'BIGINT', 'tid': 'BIGINT', 'ts': 'DOUBLE',
        'args': 'STRUCT(SeqNum BIGINT, CommHash UBIGINT, Rank INTEGER, Peer INTEGER,
                        Count BIGINT, Datatype VARCHAR, Algorithm VARCHAR, Protocol VARCHAR)'
    }, maximum_object_size = 67108864)
    WHERE cat IN ('COLL', 'P2P')
)
SELECT b.cat, b.name AS nccl_op, b.seq, b.comm_hash, b.rank, b.peer, b.count, b.datatype,
       b.algorithm, b.protocol, b.pid, e.ts - b.ts AS exec_time_us
FROM ev b JOIN ev e ON e.id = b.id AND e.cat = b.cat AND e.pid = b.pid AND e.ph = 'e'
WHERE b.ph = 'b'
"""


def read_profiler_dump(path: Path, display: str) -> pa.Table:
    con = duckdb.connect()
    try:
        table = con.sql(_SELECT, params={"path": str(path)}).to_arrow_table()
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
