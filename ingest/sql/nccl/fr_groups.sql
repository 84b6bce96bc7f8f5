-- Process groups known only from the Flight Recorder dumps of run $run (not in the Kineto
-- traces' distributedInfo): one row per pg_name with its members as the lowest dumped rank
-- sees them (dumps may disagree: analyzers/hang.py reports it), from fr_groups. Reads
-- fr_groups, process_groups; writes process_groups.
INSERT INTO process_groups BY NAME
SELECT $run AS run, pg_name, first(pg_desc ORDER BY rank) AS pg_desc,
       first(ranks ORDER BY rank) AS ranks,
       CAST(len(first(ranks ORDER BY rank)) AS INTEGER) AS size, 'nccl' AS backend,
       false AS ranks_truncated, 'flight_recorder' AS source
FROM fr_groups
WHERE run = $run AND pg_name NOT IN (SELECT pg_name FROM process_groups WHERE run = $run)
GROUP BY pg_name
ORDER BY pg_name
