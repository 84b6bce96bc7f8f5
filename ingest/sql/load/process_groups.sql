-- Each process group of run $run once: of the rows the ranks' traces gave
-- (staged_process_groups, load/stage_groups.sql), the lowest rank's, whatever the batches
-- were; then the staging table goes. Writes process_groups. Parameter: $run.
INSERT INTO process_groups BY NAME
SELECT * EXCLUDE (rank) FROM staged_process_groups
WHERE run = $run
QUALIFY row_number() OVER (PARTITION BY pg_name ORDER BY rank) = 1
ORDER BY rank, pg_name;

DROP TABLE staged_process_groups;
