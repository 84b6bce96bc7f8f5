-- Schema version 6 (migration 6, ingest/schema.py): the allocator's `[memory]` events
-- (profile_memory=True; docs/memory.md) and the split sizes of all_to_all calls
-- (docs/alltoall.md). Adds the table memory_events (registered as owned, per run) and
-- columns of collectives, NULL in the rows of older runs (re-ingest a run to fill them);
-- no parameters.
CREATE TABLE IF NOT EXISTS memory_events (
    run VARCHAR,
    rank INTEGER,
    event_id BIGINT,             -- the event's position in traceEvents (id within the rank)
    ts_ns BIGINT,                -- when the allocator reported it (CPU clock of the host)
    pid BIGINT,
    tid BIGINT,                  -- the thread that allocated or freed
    device_type INTEGER,         -- c10 DeviceType: 0 CPU, 1 CUDA (and ROCm's HIP)
    device_id INTEGER,           -- device index (-1 for CPU)
    addr BIGINT,                 -- block address (pairs an allocation with its free)
    bytes BIGINT,                -- > 0 allocated, < 0 freed
    total_allocated BIGINT,      -- allocator's allocated bytes after the event (NULL before torch 1.10)
    total_reserved BIGINT,       -- allocator's reserved (cached) bytes after the event
    op_id BIGINT,                -- cpu_ops.op_id of the innermost op open on the thread
    step INTEGER                 -- the step whose CPU interval holds the event
);
ALTER TABLE collectives ADD COLUMN IF NOT EXISTS in_splits BIGINT[];     -- all_to_all rows sent per member
ALTER TABLE collectives ADD COLUMN IF NOT EXISTS out_splits BIGINT[];    -- ... received per member
ALTER TABLE collectives ADD COLUMN IF NOT EXISTS splits_truncated BOOLEAN;  -- the args cut the list
INSERT OR REPLACE INTO stepscope_tables VALUES ('memory_events', 'ingest', true, 6);
