-- Nightly history: one row per (job, run), kept when the run's traces are pruned
-- (`stepscope nightly --keep N`). Documented column by column in docs/schema.md.
-- Schema version 1 (migration 1, ingest/schema.py): frozen; a later change is a new
-- migration in ingest/sql/migrations/. Idempotent (IF NOT EXISTS): a database stamped 1
-- runs it again to complete its layout. Writes the tables below; no parameters.
CREATE TABLE IF NOT EXISTS history (
    job VARCHAR,
    run VARCHAR,
    trace_start TIMESTAMP,        -- UTC, earliest event of the run's traces
    ingested_at TIMESTAMP,        -- UTC, when this nightly ran
    status VARCHAR,               -- complete | partial (the ingest)
    checks VARCHAR,               -- pass | fail | none (no --fail-if)
    checks_failed INTEGER,
    world_size INTEGER,
    n_ranks INTEGER,
    device VARCHAR,
    step_time_ms DOUBLE,
    mfu DOUBLE,                   -- fraction 0-1; NULL when not computable
    hfu DOUBLE,
    compute_ms DOUBLE,
    recompute_ms DOUBLE,
    exposed_comm_ms DOUBLE,
    straggler_wait_ms DOUBLE,
    bubble_ms DOUBLE,
    memory_ms DOUBLE,
    idle_ms DOUBLE,
    largest_loss VARCHAR,         -- the non-compute category with most ms per step
    largest_loss_ms DOUBLE,
    baseline VARCHAR,             -- run the nightly diffed against, NULL if none
    mfu_delta_points DOUBLE,      -- vs baseline, percentage points
    step_time_delta_ms DOUBLE,    -- vs baseline
    top_cause VARCHAR,            -- the diff's first cause, else the largest loss
    PRIMARY KEY (job, run)
);
