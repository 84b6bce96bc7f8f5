-- stepscope database schema (public API: documented column by column in docs/schema.md):
-- the ingest's tables. Every table carries `run`; a run is replaced as a whole by
-- re-ingesting it. Times are absolute int64 nanoseconds since the Unix epoch on the clock
-- of the rank's host.
-- Schema version 1 (migration 1, ingest/schema.py): frozen; a later change is a new
-- migration in ingest/sql/migrations/. Idempotent (IF NOT EXISTS): a database stamped 1
-- runs it again to complete its layout. Writes the tables below; no parameters.

CREATE TABLE IF NOT EXISTS schema_info (
    key VARCHAR PRIMARY KEY,
    value VARCHAR
);

CREATE TABLE IF NOT EXISTS runs (
    run VARCHAR PRIMARY KEY,
    ingested_at TIMESTAMP,
    status VARCHAR,              -- complete | partial
    world_size INTEGER,
    n_ranks INTEGER,
    n_files INTEGER,
    sources JSON,                -- the paths given to `stepscope ingest`
    failed_files JSON,           -- [{"file": ..., "error": ...}]
    stepscope_version VARCHAR,
    rank_subset VARCHAR          -- `--ranks` as given (canonical), NULL when all ranks
);

CREATE TABLE IF NOT EXISTS ranks (
    run VARCHAR,
    rank INTEGER,
    rank_source VARCHAR,         -- distributedInfo | file_name | single_file
    world_size INTEGER,
    host VARCHAR,
    host_source VARCHAR,         -- host_name | file_name | trace_name | inferred (ingest/sql/load/hosts.sql)
    node_gpus INTEGER,           -- len(deviceProperties): the GPUs visible on the rank's node
    trace_name VARCHAR,          -- top-level traceName (tensorboard_trace_handler's output path)
    step_source VARCHAR,         -- how steps were found (docs/attribution.md, "Steps")
    pid BIGINT,
    device INTEGER,
    device_name VARCHAR,
    device_properties JSON,
    backend VARCHAR,
    nccl_version VARCHAR,
    distributed_info JSON,
    source_file VARCHAR,
    trace_format VARCHAR,        -- legacy_2021 | int_us | absolute_ns | relative_ns
    base_time_ns BIGINT,
    trace_start_ns BIGINT,
    trace_end_ns BIGINT,
    n_events BIGINT,
    category_counts JSON,
    unknown_categories JSON,
    PRIMARY KEY (run, rank)
);

CREATE TABLE IF NOT EXISTS process_groups (
    run VARCHAR,
    pg_name VARCHAR,
    pg_desc VARCHAR,
    ranks INTEGER[],
    size INTEGER,
    backend VARCHAR,
    ranks_truncated BOOLEAN,
    source VARCHAR               -- pg_config | collective_args
);

CREATE TABLE IF NOT EXISTS threads (
    run VARCHAR,
    rank INTEGER,
    pid BIGINT,
    tid BIGINT,
    thread_name VARCHAR
);

CREATE TABLE IF NOT EXISTS cpu_ops (
    run VARCHAR,
    rank INTEGER,
    op_id BIGINT,
    pid BIGINT,
    tid BIGINT,
    name VARCHAR,
    category VARCHAR,
    start_ns BIGINT,
    end_ns BIGINT,
    dur_ns BIGINT,
    external_id BIGINT,
    correlation BIGINT,
    sequence_number BIGINT,
    fwd_thread_id BIGINT,
    record_function_id BIGINT,
    input_dims JSON,
    input_types JSON,
    concrete_inputs JSON,
    parent_id BIGINT,
    depth INTEGER,
    step INTEGER
);

CREATE TABLE IF NOT EXISTS gpu_ops (
    run VARCHAR,
    rank INTEGER,
    gpu_op_id BIGINT,
    device INTEGER,
    stream BIGINT,
    name VARCHAR,
    kind VARCHAR,                -- compute | comm | memcpy | memset
    category VARCHAR,
    start_ns BIGINT,
    end_ns BIGINT,
    dur_ns BIGINT,
    correlation BIGINT,
    external_id BIGINT,
    bytes BIGINT,
    launch_op_id BIGINT,         -- cpu_ops.op_id of the runtime call (same correlation)
    cpu_op_id BIGINT,            -- cpu_ops.op_id of the op with the same External id
    step INTEGER
);

CREATE TABLE IF NOT EXISTS gpu_annotations (
    run VARCHAR,
    rank INTEGER,
    device INTEGER,
    stream BIGINT,
    name VARCHAR,
    start_ns BIGINT,
    end_ns BIGINT,
    external_id BIGINT
);

CREATE TABLE IF NOT EXISTS steps (
    run VARCHAR,
    rank INTEGER,
    step INTEGER,
    tid BIGINT,
    start_ns BIGINT,
    end_ns BIGINT,
    dur_ns BIGINT,
    n_gpu_ops BIGINT,
    gpu_start_ns BIGINT,         -- first start of a GPU op launched inside the step
    gpu_end_ns BIGINT            -- last end of a GPU op launched inside the step
);

CREATE TABLE IF NOT EXISTS collectives (
    run VARCHAR,
    rank INTEGER,
    coll_id BIGINT,
    collective VARCHAR,          -- canonical: all_reduce, all_gather, reduce_scatter, ...
    collective_raw VARCHAR,
    source VARCHAR,              -- record_param_comms | nccl_annotation | nccl_kernel | gloo
    pg_name VARCHAR,
    pg_desc VARCHAR,
    pg_ranks VARCHAR,
    group_size INTEGER,
    dtype VARCHAR,
    in_nelems BIGINT,
    out_nelems BIGINT,
    in_bytes BIGINT,
    out_bytes BIGINT,
    is_p2p BOOLEAN,
    peer_rank INTEGER,
    nccl_seq BIGINT,
    seq_in_group BIGINT,
    cpu_op_id BIGINT,
    cpu_tid BIGINT,
    cpu_start_ns BIGINT,
    cpu_end_ns BIGINT,
    kernel_name VARCHAR,
    kernel_count INTEGER,
    device INTEGER,
    stream BIGINT,
    kernel_start_ns BIGINT,
    kernel_end_ns BIGINT,
    work_start_ns BIGINT,        -- the transfer: kernel interval (GPU) or gloo span (CPU)
    work_end_ns BIGINT,
    work_tid BIGINT,             -- gloo: thread that ran the transfer
    step INTEGER
);

-- Columns that stepscope builds added while the version stayed 1: a database written
-- before them gains them here (NULL in its old rows; they are appended last).
ALTER TABLE runs ADD COLUMN IF NOT EXISTS rank_subset VARCHAR;
ALTER TABLE ranks ADD COLUMN IF NOT EXISTS host_source VARCHAR;
ALTER TABLE ranks ADD COLUMN IF NOT EXISTS node_gpus INTEGER;
ALTER TABLE ranks ADD COLUMN IF NOT EXISTS trace_name VARCHAR;
ALTER TABLE ranks ADD COLUMN IF NOT EXISTS step_source VARCHAR;
