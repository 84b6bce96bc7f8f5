-- Collective calls of run $run per cross-rank match method (nccl_seq, group_order,
-- step_order, unmatched). Reads collective_waits. Parameter: $run.
SELECT match_method, count(*) FROM collective_waits WHERE run = $run GROUP BY 1 ORDER BY 1;
