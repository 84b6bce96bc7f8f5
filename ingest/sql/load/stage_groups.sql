-- The temp table staged_process_groups of one ingest: one process_groups row per group,
-- the lowest appended rank's so far, with that rank (load/append_ranks.sql keeps it batch
-- by batch, load/process_groups.sql moves the rows into process_groups). Reads nothing
-- but the layout of process_groups; no parameters.
CREATE OR REPLACE TEMP TABLE staged_process_groups AS
SELECT CAST(NULL AS INTEGER) AS rank, * FROM process_groups LIMIT 0;
