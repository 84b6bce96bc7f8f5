-- all_to_all calls of run $run with known sizes, over complete steps (docs/alltoall.md), as
-- the temp table a2a_calls: one row per call and rank with its group label (as
-- collectives/stats.sql), bytes sent (In msg) and received (Out msg), the tokens (rows)
-- received when the split sizes are given, and its instance across ranks
-- (collective_waits): the busiest member's bytes (the larger of what it sends and
-- receives), the mean bytes per member, the instance's transfer time d_min (the call's own
-- duration when it was not matched across ranks) and this
-- rank's wait for the last member. An instance counts for the imbalance only when every
-- member of its group took part. Reads collectives, collective_waits, complete_steps
-- and the group_label macro (collectives/macros.sql).
-- Parameter: $run.
CREATE OR REPLACE TEMP TABLE a2a_calls AS
WITH complete AS (
    SELECT rank, step FROM complete_steps WHERE run = $run
), calls AS (
    SELECT c.rank, c.coll_id, c.step,
        group_label(c.pg_desc, c.source, c.library, c.comm_op, c.group_size) AS group_label,
        coalesce(c.library, 'nccl') AS library, c.group_size,
        c.in_bytes AS sent, c.out_bytes AS received,
        list_sum(c.out_splits) AS tokens_received,
        CASE WHEN c.splits_truncated THEN 'truncated'
             WHEN c.in_splits IS NOT NULL OR c.out_splits IS NOT NULL THEN 'given'
             ELSE 'equal' END AS splits,
        w.instance_key, coalesce(w.min_dur_ns, c.work_end_ns - c.work_start_ns) AS min_dur_ns,
        coalesce(w.wait_ns, 0) AS wait_ns
    FROM collectives c
    JOIN complete s ON s.rank = c.rank AND s.step = c.step
    LEFT JOIN collective_waits w ON w.run = c.run AND w.rank = c.rank AND w.coll_id = c.coll_id
    WHERE c.run = $run AND c.collective = 'all_to_all' AND c.work_start_ns IS NOT NULL
      AND c.in_bytes IS NOT NULL AND c.out_bytes IS NOT NULL
), instances AS (
    SELECT instance_key, count(*) AS members, max(greatest(sent, received)) AS max_load,
        sum(sent) / count(*) AS mean_load, max(group_size) AS group_size
    FROM calls WHERE instance_key IS NOT NULL GROUP BY instance_key
)
SELECT c.*, i.max_load, i.mean_load,
    coalesce(i.members > 1 AND i.members = i.group_size, false) AS whole
FROM calls c LEFT JOIN instances i USING (instance_key);
