-- One NCCL profiler example-plugin dump ($path, a JSON array of Chrome async events): each
-- COLL / P2P begin event joined with its end (same id, cat and pid) into one op with its
-- duration in µs; message bytes and bandwidth follow in ingest/nccl/load.py and
-- nccl/profiler_bandwidth.sql. Reads the file; writes nothing.
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
