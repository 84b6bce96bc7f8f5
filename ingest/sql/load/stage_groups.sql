-- The temp table staged_process_groups of one ingest: the process_groups rows of every
-- appended rank, with that rank (load/append_ranks.sql fills it batch by batch,
-- load/process_groups.sql moves one row per group into process_groups). Reads nothing
-- but the layout of process_groups; no parameters.
CREATE OR REPLACE TEMP TABLE staged_process_groups AS
SELECT CAST(NULL AS INTEGER) AS rank, * FROM process_groups LIMIT 0;
