-- NCCL WARN lines of run $run per (global rank, host): how many (a row stands for n_lines
-- identical lines; NULL, in rows written before n_lines existed, counts as one), the first
-- one, and whether any speaks of a timeout. Reads nccl_warnings; writes nothing.
SELECT global_rank, host, sum(coalesce(n_lines, 1)) AS n, arg_min(message, logged_at) AS first,
       bool_or(message ILIKE '%timeout%' OR message ILIKE '%timed out%') AS timeout
FROM nccl_warnings
WHERE run = $run
GROUP BY global_rank, host
ORDER BY global_rank NULLS LAST, host
