-- Schema version 2 (migration 2, ingest/schema.py): the registry of the tables stepscope
-- owns (docs/schema.md, "Owned tables"). Writes stepscope_tables; no parameters.
-- stepscope writes, replaces and deletes rows only in the tables listed here, never in a
-- table found by its column names: a user's own table in the file is never touched.
-- A later migration that adds a table registers it here too.
CREATE TABLE IF NOT EXISTS stepscope_tables (
    table_name VARCHAR PRIMARY KEY,
    owner VARCHAR,               -- who writes its rows: ingest | ingest.nccl | analyzers.attribution | nightly
    per_run BOOLEAN,             -- rows belong to one run: replaced by a re-ingest, deleted with the run
    since_version INTEGER        -- the schema version that added the table
);

INSERT OR REPLACE INTO stepscope_tables VALUES
    ('schema_info', 'ingest', false, 1),
    ('runs', 'ingest', true, 1),
    ('ranks', 'ingest', true, 1),
    ('process_groups', 'ingest', true, 1),
    ('threads', 'ingest', true, 1),
    ('cpu_ops', 'ingest', true, 1),
    ('gpu_ops', 'ingest', true, 1),
    ('gpu_annotations', 'ingest', true, 1),
    ('steps', 'ingest', true, 1),
    ('collectives', 'ingest', true, 1),
    ('nccl_sources', 'ingest.nccl', true, 1),
    ('fr_groups', 'ingest.nccl', true, 1),
    ('fr_entries', 'ingest.nccl', true, 1),
    ('nccl_processes', 'ingest.nccl', true, 1),
    ('nccl_comms', 'ingest.nccl', true, 1),
    ('nccl_channels', 'ingest.nccl', true, 1),
    ('nccl_rings', 'ingest.nccl', true, 1),
    ('nccl_warnings', 'ingest.nccl', true, 1),
    ('nccl_ops', 'ingest.nccl', true, 1),
    ('recompute_ops', 'analyzers.attribution', true, 1),
    ('collective_waits', 'analyzers.attribution', true, 1),
    ('collective_exposure', 'analyzers.attribution', true, 1),
    ('step_attribution', 'analyzers.attribution', true, 1),
    ('history', 'nightly', false, 1),
    ('stepscope_tables', 'ingest', false, 2);
