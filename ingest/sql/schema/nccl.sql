-- NCCL evidence outside Kineto (documented column by column in docs/schema.md):
-- PyTorch Flight Recorder dumps (fr_*), NCCL_DEBUG=INFO logs (nccl_*), NCCL Inspector /
-- profiler-plugin output (nccl_ops). Every table carries `run`.
-- Schema version 1 (migration 1, ingest/schema.py): frozen; a later change is a new
-- migration in ingest/sql/migrations/. Idempotent (IF NOT EXISTS): a database stamped 1
-- runs it again to complete its layout. Writes the tables below; no parameters.

CREATE TABLE IF NOT EXISTS nccl_sources (
    run VARCHAR,
    source_file VARCHAR,
    kind VARCHAR,                -- flight_recorder | nccl_log | nccl_inspector | nccl_profiler
    format VARCHAR,              -- pickle | json | text | jsonl
    rank INTEGER,                -- the rank the file speaks for, when it is one rank's
    rank_source VARCHAR,
    version VARCHAR,             -- FR format version / Inspector output format version
    nccl_version VARCHAR,
    host VARCHAR,
    n_records BIGINT,
    note VARCHAR                 -- identity conflicts and other warnings, or NULL
);

CREATE TABLE IF NOT EXISTS fr_groups (
    run VARCHAR,
    rank INTEGER,
    pg_name VARCHAR,
    pg_desc VARCHAR,
    ranks INTEGER[],
    pg_id BIGINT,
    pg_id_source VARCHAR,        -- entries | creation_order | NULL (unknown)
    last_enqueued_seq BIGINT,
    last_started_seq BIGINT,
    last_completed_seq BIGINT
);

CREATE TABLE IF NOT EXISTS fr_entries (
    run VARCHAR,
    rank INTEGER,
    record_id BIGINT,
    pg_id BIGINT,
    pg_name VARCHAR,
    pg_desc VARCHAR,
    collective_seq_id BIGINT,
    p2p_seq_id BIGINT,
    op_id BIGINT,
    profiling_name VARCHAR,
    backend VARCHAR,
    op VARCHAR,
    is_p2p BOOLEAN,
    peer_local_rank INTEGER,
    peer_rank INTEGER,
    state VARCHAR,
    retired BOOLEAN,
    time_created_ns BIGINT,
    time_started_ns BIGINT,
    time_completed_ns BIGINT,
    duration_ms DOUBLE,
    timeout_ms BIGINT,
    input_sizes BIGINT[][],
    output_sizes BIGINT[][],
    input_dtypes VARCHAR[],
    output_dtypes VARCHAR[],
    thread_id VARCHAR,
    thread_name VARCHAR,
    frames JSON
);

CREATE TABLE IF NOT EXISTS nccl_processes (
    run VARCHAR,
    host VARCHAR,
    pid BIGINT,
    cuda_dev INTEGER,
    global_rank INTEGER,         -- its rank in the largest communicator it joined
    nccl_version VARCHAR,
    network VARCHAR,             -- `Using network IB | Socket | ...`
    ib_devices VARCHAR,          -- `NET/IB : Using [0]mlx5_0:1/IB ...`
    no_ib_device BOOLEAN,        -- `NET/IB : No device found.`
    source_file VARCHAR
);

CREATE TABLE IF NOT EXISTS nccl_comms (
    run VARCHAR,
    comm_id VARCHAR,
    comm_ptr VARCHAR,
    host VARCHAR,
    pid BIGINT,
    rank INTEGER,
    nranks INTEGER,
    nnodes INTEGER,
    local_ranks INTEGER,
    local_rank INTEGER,
    cuda_dev INTEGER,
    nvml_dev INTEGER,
    bus_id VARCHAR,
    nccl_version VARCHAR,
    network VARCHAR,
    source_file VARCHAR
);

CREATE TABLE IF NOT EXISTS nccl_channels (
    run VARCHAR,
    comm_id VARCHAR,
    host VARCHAR,
    pid BIGINT,
    comm_ptr VARCHAR,
    channel INTEGER,
    conn_index INTEGER,
    src_rank INTEGER,
    src_dev VARCHAR,
    dst_rank INTEGER,
    dst_dev VARCHAR,
    direction VARCHAR,
    transport VARCHAR,
    tier VARCHAR,
    gdr BOOLEAN,
    source_file VARCHAR
);

CREATE TABLE IF NOT EXISTS nccl_rings (
    run VARCHAR,
    comm_id VARCHAR,
    host VARCHAR,
    pid BIGINT,
    comm_ptr VARCHAR,
    channel INTEGER,
    n_channels INTEGER,
    ring INTEGER[]
);

CREATE TABLE IF NOT EXISTS nccl_warnings (
    run VARCHAR,
    host VARCHAR,
    pid BIGINT,
    cuda_dev INTEGER,
    comm_id VARCHAR,
    comm_ptr VARCHAR,
    global_rank INTEGER,
    logged_at VARCHAR,
    source_location VARCHAR,
    message VARCHAR,
    source_file VARCHAR
);

CREATE TABLE IF NOT EXISTS nccl_ops (
    run VARCHAR,
    rank INTEGER,                -- global rank (resolved after loading), NULL if unknown
    comm_id VARCHAR,             -- Inspector header.id (the communicator hash)
    comm_name VARCHAR,
    comm_rank INTEGER,
    n_ranks INTEGER,
    n_nodes INTEGER,
    host VARCHAR,
    pid BIGINT,
    format_version VARCHAR,
    dump_timestamp_us BIGINT,
    kind VARCHAR,                -- coll | p2p
    nccl_op VARCHAR,             -- AllReduce, AllGather, ReduceScatter, Send, Recv, ...
    collective VARCHAR,          -- canonical: all_reduce, all_gather, ...
    seq BIGINT,                  -- coll_sn / p2p_sn (per communicator)
    peer_comm_rank INTEGER,
    msg_bytes BIGINT,
    exec_time_us DOUBLE,
    timing_source VARCHAR,       -- kernel_gpu | kernel_cpu | collective_cpu ...
    algo_bw_gbs DOUBLE,
    bus_bw_gbs DOUBLE,
    source VARCHAR,              -- nccl_inspector
    source_file VARCHAR
);
