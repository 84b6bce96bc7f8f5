-- Process groups that only collective arguments name (traces without pg_config): one row
-- per group of run $run not already in process_groups, its ranks parsed from the
-- "Process Group Ranks" text (marked truncated when the profiler cut it with "...").
-- Reads collectives, process_groups; writes process_groups. Parameter: $run.
INSERT INTO process_groups BY NAME
SELECT run, pg_name, any_value(pg_desc) AS pg_desc,
       CAST(regexp_extract_all(any_value(pg_ranks), '-?\d+') AS INTEGER[]) AS ranks,
       max(group_size) AS size, NULL AS backend,
       bool_or(pg_ranks LIKE '%...%') AS ranks_truncated, 'collective_args' AS source
FROM collectives
WHERE run = $run AND pg_name IS NOT NULL
  AND pg_name NOT IN (SELECT pg_name FROM process_groups WHERE run = $run)
GROUP BY run, pg_name
