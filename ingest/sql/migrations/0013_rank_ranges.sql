-- Schema version 13 (migration 13, ingest/schema.py): ranks.distributed_info stores each
-- process group's rank list of 64 or more ranks that steps evenly as
-- {"stepscope_range": [first, step, count]} in its place (ingest/rank_lists.py): the
-- trace's list holds every rank of the job for the default group, so the column grew with
-- the square of the ranks and held the writer's memory at the commit (issue 44). The
-- export puts the lists back (analyzers/sql/export/rank_meta.sql). Runs ingested before
-- keep the lists as written, which read the same. The version tells an older stepscope,
-- which would not expand the ranges, to refuse the file. No parameters; idempotent.
COMMENT ON COLUMN ranks.distributed_info IS
    'the trace''s distributedInfo; a pg_config rank list of 64+ evenly stepping ranks is {"stepscope_range": [first, step, count]} (docs/schema.md)';
