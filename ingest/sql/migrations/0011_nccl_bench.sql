-- Schema version 11 (migration 11, ingest/schema.py): nccl-tests output read from the
-- logs (ingest/nccl/bench.py; docs/schema.md, "nccl-tests results"): nccl_bench, one row
-- per message size and placement (out-of-place, in-place) of each result table, and
-- nccl_bench_summary, one row per table with the `# Avg bus bandwidth` nccl-tests printed
-- and the ranks, hosts and GPUs of its `# Using devices` lines. Registered as owned, per
-- run; empty for the runs of older versions (re-ingest a run to fill them); no parameters.
CREATE TABLE IF NOT EXISTS nccl_bench (
    run VARCHAR,
    source_file VARCHAR,
    bench INTEGER,               -- the table's number in its file (1, 2, ...)
    test VARCHAR,                -- all_reduce_perf, sendrecv_perf, ... (NULL: not named)
    size_bytes BIGINT,
    count BIGINT,                -- elements
    dtype VARCHAR,
    redop VARCHAR,
    root INTEGER,                -- NULL before nccl-tests 2.10 (no root column)
    in_place BOOLEAN,
    time_us DOUBLE,
    algbw_gbs DOUBLE,
    busbw_gbs DOUBLE,
    n_wrong BIGINT,              -- NULL: N/A (not checked)
    line_no BIGINT
);
CREATE TABLE IF NOT EXISTS nccl_bench_summary (
    run VARCHAR,
    source_file VARCHAR,
    bench INTEGER,
    test VARCHAR,
    test_source VARCHAR,         -- log (`# Collective test starting`) | file_name | NULL
    n_rows BIGINT,
    avg_busbw_gbs DOUBLE,        -- `# Avg bus bandwidth` as printed (NULL: not printed)
    n_ranks INTEGER,             -- `#  Rank N Group G Pid P on HOST device D [bus] NAME` lines
    hosts VARCHAR[],
    pids BIGINT[],
    devices VARCHAR[],           -- the GPUs' names as nccl-tests printed them
    line_no BIGINT               -- the table header's line
);
INSERT OR REPLACE INTO stepscope_tables VALUES ('nccl_bench', 'ingest.nccl', true, 10);
INSERT OR REPLACE INTO stepscope_tables VALUES ('nccl_bench_summary', 'ingest.nccl', true, 10);
