-- One NCCL Inspector JSONL file ($path; $compression: 'gzip' or 'none'): one row per
-- completed collective (coll_perf) or P2P op (p2p_perf) as the plugin measured it, with the
-- communicator-local rank (the global one is resolved after loading,
-- nccl/resolve_op_ranks.sql). Reads the file; writes nothing.
SELECT header.id AS comm_id, header.comm_name AS comm_name, header.rank AS comm_rank,
       header.n_ranks AS n_ranks, header.nnodes AS n_nodes,
       metadata.hostname AS host, metadata.pid AS pid,
       metadata.inspector_output_format_version AS format_version,
       metadata.dump_timestamp_us AS dump_timestamp_us,
       CASE WHEN coll_perf IS NOT NULL THEN 'coll' ELSE 'p2p' END AS kind,
       coalesce(coll_perf.coll, p2p_perf.p2p) AS nccl_op,
       coalesce(coll_perf.coll_sn, p2p_perf.p2p_sn) AS seq,
       p2p_perf.p2p_peer AS peer_comm_rank,
       coalesce(coll_perf.coll_msg_size_bytes, p2p_perf.p2p_msg_size_bytes) AS msg_bytes,
       coalesce(coll_perf.coll_exec_time_us, p2p_perf.p2p_exec_time_us) AS exec_time_us,
       coalesce(coll_perf.coll_timing_source, p2p_perf.p2p_timing_source) AS timing_source,
       coalesce(coll_perf.coll_algobw_gbs, p2p_perf.p2p_algobw_gbs) AS algo_bw_gbs,
       coalesce(coll_perf.coll_busbw_gbs, p2p_perf.p2p_busbw_gbs) AS bus_bw_gbs
FROM read_json($path, format = 'newline_delimited', columns = {
        'header': 'STRUCT(id VARCHAR, comm_name VARCHAR, rank INTEGER, n_ranks INTEGER,
                          nnodes INTEGER)',
        'metadata': 'STRUCT(inspector_output_format_version VARCHAR,
                            dump_timestamp_us BIGINT, hostname VARCHAR, pid BIGINT)',
        'coll_perf': 'STRUCT(coll VARCHAR, coll_sn BIGINT, coll_msg_size_bytes BIGINT,
                             coll_exec_time_us DOUBLE, coll_timing_source VARCHAR,
                             coll_algobw_gbs DOUBLE, coll_busbw_gbs DOUBLE)',
        'p2p_perf': 'STRUCT(p2p VARCHAR, p2p_sn BIGINT, p2p_peer INTEGER,
                            p2p_msg_size_bytes BIGINT, p2p_exec_time_us DOUBLE,
                            p2p_timing_source VARCHAR, p2p_algobw_gbs DOUBLE,
                            p2p_busbw_gbs DOUBLE)'
    }, compression = $compression, maximum_object_size = 16777216)
