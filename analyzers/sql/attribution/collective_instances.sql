-- Each instance of the run (attribution/collective_parts.sql's parts, every batch in):
-- how many ranks, the shortest duration, whether every rank called the same collective
-- with the same size (count(DISTINCT collective) = 1 and count(DISTINCT in_nelems) <= 1
-- over its calls, from the parts' least and greatest values, which ignore NULLs as those
-- counts do). Writes the temp table a_inst, drops a_inst_part. No parameters.
CREATE OR REPLACE TEMP TABLE a_inst AS
SELECT instance_key, CAST(sum(n) AS BIGINT) AS n_ranks, min(min_dur_ns) AS min_dur_ns,
    coalesce(min(min_coll) = max(max_coll), false)
        AND coalesce(min(min_nelems) = max(max_nelems), true) AS consistent
FROM a_inst_part GROUP BY instance_key;

DROP TABLE a_inst_part;
