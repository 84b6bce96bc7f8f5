-- Tables derived by the analyzers at ingest time (analyzers/sql/attribution/attribution.sql;
-- documented in docs/schema.md and docs/attribution.md), and the views every mean reads.
-- Replaced per run together with the run's raw tables.
-- Schema version 1 (migration 1, ingest/schema.py): frozen; a later change is a new
-- migration in ingest/sql/migrations/. Idempotent (IF NOT EXISTS): a database stamped 1
-- runs it again to complete its layout. Writes the tables below; no parameters.

CREATE TABLE IF NOT EXISTS recompute_ops (
    run VARCHAR,
    rank INTEGER,
    op_id BIGINT                 -- cpu_ops.op_id re-executed for activation checkpointing
);

CREATE TABLE IF NOT EXISTS collective_waits (
    run VARCHAR,
    rank INTEGER,
    coll_id BIGINT,              -- collectives.coll_id
    instance_key VARCHAR,        -- same value on every rank for one collective instance
    match_method VARCHAR,        -- nccl_seq | group_order | step_order | unmatched
    n_ranks INTEGER,             -- ranks that took part (that were matched)
    consistent BOOLEAN,          -- same collective name and element count on every rank
    dur_ns BIGINT,               -- this rank's transfer duration d
    min_dur_ns BIGINT,           -- d_min over the ranks of the instance
    wait_ns BIGINT,              -- d - d_min: waiting for the last rank to arrive
    arrived_last BOOLEAN         -- this rank has the shortest duration: the others waited for it
);

CREATE TABLE IF NOT EXISTS step_attribution (
    run VARCHAR,
    rank INTEGER,
    step INTEGER,
    timeline VARCHAR,            -- gpu | cpu (CPU-only traces)
    window_start_ns BIGINT,
    window_end_ns BIGINT,
    has_successor BOOLEAN,       -- false for the rank's last profiled step
    step_ns BIGINT,              -- window_end_ns - window_start_ns
    compute_ns BIGINT,
    recompute_ns BIGINT,
    exposed_comm_ns BIGINT,
    straggler_wait_ns BIGINT,
    bubble_ns BIGINT,
    memory_ns BIGINT,
    idle_ns BIGINT
);

CREATE TABLE IF NOT EXISTS collective_exposure (
    run VARCHAR,
    rank INTEGER,
    coll_id BIGINT,              -- collectives.coll_id
    step INTEGER,                -- the step window the time fell in
    exposed_ns BIGINT,           -- time of its interval attributed to exposed_comm
    straggler_wait_ns BIGINT,    -- ... to straggler_wait
    bubble_ns BIGINT             -- ... to bubble (point-to-point)
);

-- THE definition of a complete step (docs/attribution.md, "Complete steps"); every mean
-- over steps (report, MFU, collectives, pipeline, summary, diff) reads it. A rank's
-- complete steps are those with a successor (their window ends where the next step's
-- work starts, so it holds the whole step); a rank with no such step (one profiled step,
-- or the whole window taken as one step) counts every step it has. A step needs both
-- ends: with `Optimizer.step#` as the step source, the rank's first step runs from the
-- start of the trace (no optimizer step before it: warm-up, the first DataLoader fetch),
-- so it has no start boundary and is not complete either. A step that captures a CUDA/HIP
-- graph (window_source 'capture') records its launches without running them: it is not a
-- step of the work either: migration 10 (migrations/0010_capture_steps.sql) re-creates the
-- view with that rule, as step_attribution.window_source only exists from migration 3 on.
CREATE OR REPLACE VIEW complete_steps AS
SELECT run, rank, step FROM (
    SELECT run, rank, step, bounded,
        bool_or(bounded) OVER (PARTITION BY run, rank) AS rank_has_complete
    FROM (
        SELECT a.run, a.rank, a.step,
            a.has_successor AND NOT (coalesce(r.step_source, '') = 'optimizer_step'
                AND a.step = min(a.step) OVER (PARTITION BY a.run, a.rank)) AS bounded
        FROM step_attribution a
        LEFT JOIN ranks r ON r.run = a.run AND r.rank = a.rank
    )
) WHERE bounded OR NOT rank_has_complete;

-- Nodes of each run (docs/attribution.md, "Hosts and nodes"): hosts seen, GPUs per node
-- (the GPUs each rank's trace lists in deviceProperties, else the most ranks on one host)
-- and where the hosts came from (ranks.host_source; 'mixed' when ranks differ).
CREATE OR REPLACE VIEW run_nodes AS
SELECT run,
    count(DISTINCT host) AS nodes,
    coalesce(mode(node_gpus), max(per_host)) AS gpus_per_node,
    CASE WHEN count(DISTINCT host_source) > 1 THEN 'mixed' ELSE any_value(host_source) END
        AS host_source
FROM (SELECT run, host, host_source, node_gpus,
             count(*) OVER (PARTITION BY run, host) AS per_host FROM ranks)
GROUP BY run;
