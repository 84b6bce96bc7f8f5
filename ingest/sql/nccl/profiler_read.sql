-- One NCCL profiler example-plugin dump ($path, a JSON array of Chrome async events): each
-- COLL / P2P begin event paired with an end of the same id, cat and pid, the k-th begin
-- (in ts order) with the k-th end, so pairing is one join on a unique key (linear even
-- when every event shares one id). Rows in nccl_ops columns: duration in µs, message
-- bytes = Count x the NCCL datatype's size (NULL when negative or past a BIGINT).
-- Reads the file; writes nothing.
WITH ev AS (
    SELECT name, cat, ph, id, pid, ts,
           args.SeqNum AS seq, CAST(args.CommHash AS VARCHAR) AS comm_hash, args.Rank AS rank,
           args.Peer AS peer, args.Count AS count, args.Datatype AS datatype
    FROM read_json($path, format = 'array', columns = {
        'name': 'VARCHAR', 'cat': 'VARCHAR', 'ph': 'VARCHAR', 'id': 'BIGINT',
        'pid': 'BIGINT', 'tid': 'BIGINT', 'ts': 'DOUBLE',
        'args': 'STRUCT(SeqNum BIGINT, CommHash UBIGINT, Rank INTEGER, Peer INTEGER,
                        Count BIGINT, Datatype VARCHAR, Algorithm VARCHAR, Protocol VARCHAR)'
    }, maximum_object_size = 67108864)
    WHERE cat IN ('COLL', 'P2P') AND ph IN ('b', 'e')
),
numbered AS (
    SELECT *, row_number() OVER (PARTITION BY id, cat, pid, ph
                                 ORDER BY ts, seq, name, rank, peer, count) AS k
    FROM ev
),
sizes (datatype, size) AS (VALUES
    ('ncclInt8', 1), ('ncclChar', 1), ('ncclUint8', 1), ('ncclInt32', 4), ('ncclInt', 4),
    ('ncclUint32', 4), ('ncclInt64', 8), ('ncclUint64', 8), ('ncclFloat16', 2),
    ('ncclHalf', 2), ('ncclFloat32', 4), ('ncclFloat', 4), ('ncclFloat64', 8),
    ('ncclDouble', 8), ('ncclBfloat16', 2), ('ncclFloat8e4m3', 1), ('ncclFloat8e5m2', 1)
)
SELECT b.rank AS comm_rank, b.comm_hash AS comm_id, b.pid, lower(b.cat) AS kind,
       b.name AS nccl_op, b.seq, b.peer AS peer_comm_rank,
       CASE WHEN b.count >= 0 AND b.count <= 9223372036854775807 // s.size
            THEN b.count * s.size END AS msg_bytes,
       e.ts - b.ts AS exec_time_us
FROM numbered b
JOIN numbered e ON e.id = b.id AND e.cat = b.cat AND e.pid = b.pid AND e.k = b.k
                AND e.ph = 'e'
LEFT JOIN sizes s ON s.datatype = b.datatype
WHERE b.ph = 'b'
ORDER BY b.pid, b.cat, b.seq, b.id, b.k
