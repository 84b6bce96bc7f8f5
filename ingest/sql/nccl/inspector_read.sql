-- One row per completed collective (coll_perf) or P2P op (p2p_perf) of inspector_lines
-- (nccl/inspector_lines.sql, checked by nccl/inspector_check.sql), as the plugin measured
-- it, with the communicator-local rank (the global one is resolved after loading,
-- nccl/resolve_op_ranks.sql). Reads inspector_lines; writes nothing.
SELECT header->>'$.id' AS comm_id, header->>'$.comm_name' AS comm_name,
       CAST(header->'$.rank' AS INTEGER) AS comm_rank,
       CAST(header->'$.n_ranks' AS INTEGER) AS n_ranks,
       CAST(header->'$.nnodes' AS INTEGER) AS n_nodes,
       metadata->>'$.hostname' AS host, CAST(metadata->'$.pid' AS BIGINT) AS pid,
       metadata->>'$.inspector_output_format_version' AS format_version,
       CAST(metadata->'$.dump_timestamp_us' AS BIGINT) AS dump_timestamp_us,
       CASE WHEN coll THEN 'coll' ELSE 'p2p' END AS kind,
       CASE WHEN coll THEN coll_perf->>'$.coll' ELSE p2p_perf->>'$.p2p' END AS nccl_op,
       CAST(CASE WHEN coll THEN coll_perf->'$.coll_sn' ELSE p2p_perf->'$.p2p_sn' END
            AS BIGINT) AS seq,
       CAST(p2p_perf->'$.p2p_peer' AS INTEGER) AS peer_comm_rank,
       CAST(CASE WHEN coll THEN coll_perf->'$.coll_msg_size_bytes'
                 ELSE p2p_perf->'$.p2p_msg_size_bytes' END AS BIGINT) AS msg_bytes,
       CAST(CASE WHEN coll THEN coll_perf->'$.coll_exec_time_us'
                 ELSE p2p_perf->'$.p2p_exec_time_us' END AS DOUBLE) AS exec_time_us,
       CASE WHEN coll THEN coll_perf->>'$.coll_timing_source'
            ELSE p2p_perf->>'$.p2p_timing_source' END AS timing_source,
       CAST(CASE WHEN coll THEN coll_perf->'$.coll_algobw_gbs'
                 ELSE p2p_perf->'$.p2p_algobw_gbs' END AS DOUBLE) AS algo_bw_gbs,
       CAST(CASE WHEN coll THEN coll_perf->'$.coll_busbw_gbs'
                 ELSE p2p_perf->'$.p2p_busbw_gbs' END AS DOUBLE) AS bus_bw_gbs
FROM (SELECT *, coalesce(json_type(coll_perf) = 'OBJECT', false) AS coll
      FROM inspector_lines)
ORDER BY line
