-- One row per completed collective (coll_perf) or P2P op (p2p_perf) of inspector_lines
-- (nccl/inspector_lines.sql, checked by nccl/inspector_check.sql: every value has its
-- field's type and range, so the casts below cannot fail nor change a value), as the
-- plugin measured it, with the communicator-local rank (the global one is resolved after
-- loading, nccl/resolve_op_ranks.sql). Each part is parsed once (json_transform).
-- Reads inspector_lines; writes nothing.
WITH typed AS (
    SELECT line,
           json_transform(header, '{"id": "VARCHAR", "comm_name": "VARCHAR",
               "rank": "INTEGER", "n_ranks": "INTEGER", "nnodes": "INTEGER"}') AS h,
           json_transform(metadata, '{"inspector_output_format_version": "VARCHAR",
               "dump_timestamp_us": "BIGINT", "hostname": "VARCHAR", "pid": "BIGINT"}') AS m,
           json_transform(coll_perf, '{"coll": "VARCHAR", "coll_sn": "BIGINT",
               "coll_msg_size_bytes": "BIGINT", "coll_exec_time_us": "DOUBLE",
               "coll_timing_source": "VARCHAR", "coll_algobw_gbs": "DOUBLE",
               "coll_busbw_gbs": "DOUBLE"}') AS c,
           json_transform(p2p_perf, '{"p2p": "VARCHAR", "p2p_sn": "BIGINT",
               "p2p_peer": "INTEGER", "p2p_msg_size_bytes": "BIGINT",
               "p2p_exec_time_us": "DOUBLE", "p2p_timing_source": "VARCHAR",
               "p2p_algobw_gbs": "DOUBLE", "p2p_busbw_gbs": "DOUBLE"}') AS p
    FROM inspector_lines
)
SELECT h.id AS comm_id, h.comm_name, h.rank AS comm_rank, h.n_ranks, h.nnodes AS n_nodes,
       m.hostname AS host, m.pid, m.inspector_output_format_version AS format_version,
       m.dump_timestamp_us,
       CASE WHEN c IS NOT NULL THEN 'coll' ELSE 'p2p' END AS kind,
       coalesce(c.coll, p.p2p) AS nccl_op,
       coalesce(c.coll_sn, p.p2p_sn) AS seq,
       p.p2p_peer AS peer_comm_rank,
       coalesce(c.coll_msg_size_bytes, p.p2p_msg_size_bytes) AS msg_bytes,
       coalesce(c.coll_exec_time_us, p.p2p_exec_time_us) AS exec_time_us,
       coalesce(c.coll_timing_source, p.p2p_timing_source) AS timing_source,
       coalesce(c.coll_algobw_gbs, p.p2p_algobw_gbs) AS algo_bw_gbs,
       coalesce(c.coll_busbw_gbs, p.p2p_busbw_gbs) AS bus_bw_gbs
FROM typed
ORDER BY line
