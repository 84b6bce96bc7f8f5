-- all_to_all per group of run $run (docs/alltoall.md), per rank and complete step: calls,
-- bytes sent, the imbalance of its instances (busiest member's bytes / mean) and what
-- the imbalance costs: transfer time d_min x (1 - mean / busiest), the time a balanced
-- exchange would not take; the wait for the last member; the rank that receives most.
-- Reads a2a_calls (alltoall/calls.sql) and complete_steps. Parameter: $run.
WITH rank_steps AS (
    SELECT count(*) AS n FROM complete_steps WHERE run = $run
), received AS (
    SELECT group_label, rank, sum(received) AS received FROM a2a_calls GROUP BY ALL
), heaviest AS (
    SELECT group_label, rank, received / avg(received) OVER w AS vs_mean,
        count(*) OVER w AS members
    FROM received
    WINDOW w AS (PARTITION BY group_label)
    QUALIFY row_number() OVER (PARTITION BY group_label ORDER BY received DESC, rank) = 1
)
SELECT c.group_label, min(c.library) AS library, max(h.members) AS members,
    count(*) / any_value(rs.n) AS calls_per_step,
    sum(c.sent) / any_value(rs.n) AS bytes_per_rank,
    avg(c.max_load / nullif(c.mean_load, 0)) FILTER (WHERE c.whole) AS imbalance,
    max(c.max_load / nullif(c.mean_load, 0)) FILTER (WHERE c.whole) AS imbalance_max,
    sum(c.min_dur_ns) / any_value(rs.n) / 1e6 AS transfer_ms,
    coalesce(sum(c.min_dur_ns * (1 - c.mean_load / nullif(c.max_load, 0)))
             FILTER (WHERE c.whole), 0) / any_value(rs.n) / 1e6 AS imbalance_cost_ms,
    sum(c.wait_ns) / any_value(rs.n) / 1e6 AS wait_ms,
    any_value(h.rank) AS heaviest_rank, any_value(h.vs_mean) AS heaviest_vs_mean,
    CASE WHEN count(DISTINCT c.splits) > 1 THEN 'mixed' ELSE min(c.splits) END AS splits,
    count(*) FILTER (WHERE c.whole) AS whole_calls
FROM a2a_calls c CROSS JOIN rank_steps rs JOIN heaviest h USING (group_label)
GROUP BY c.group_label
ORDER BY imbalance_cost_ms DESC, transfer_ms DESC, c.group_label;
