-- Schema version 12 (migration 12, ingest/schema.py): the profiler's settings each trace
-- records at its top level (record_shapes, profile_memory, with_stack, with_flops,
-- with_modules: 1 = on), so the report gives the true reason for missing evidence instead
-- of asking for a setting that was already on (docs/mfu.md, docs/memory.md). NULL for a
-- trace that records none, and for runs ingested before: re-ingest them. No parameters.
-- Idempotent; the column is appended last, so a new file and a migrated one match.
ALTER TABLE ranks ADD COLUMN IF NOT EXISTS profiler_config JSON;
