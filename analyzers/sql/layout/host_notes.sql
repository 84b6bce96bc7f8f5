-- Why file-name hosts were passed over in run $run (ranks.host_note, ingest/sql/load/hosts.sql):
-- the note of the lowest rank that has one, and how many ranks have one. No row when none.
-- Reads ranks. Parameter: $run.
SELECT arg_min(host_note, rank) AS note, count(*) AS n
FROM ranks WHERE run = $run AND host_note IS NOT NULL
HAVING count(*) > 0;
