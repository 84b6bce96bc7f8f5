-- NCCL WARN lines of run $run per (global rank, host, benign): how many (a row stands for
-- n_lines identical lines; NULL, in rows written before n_lines existed, counts as one),
-- the first one, and whether any speaks of a timeout. `benign`: the message matches
-- $benign, a known capability probe whose failure NCCL or its plugin falls back from.
-- The first line is the earliest logged; lines without a timestamp (the WARN format before
-- NCCL 2.26) are taken in the order they were written. Reads nccl_warnings; writes nothing.
WITH lines AS (
    SELECT *, rowid AS written, regexp_matches(message, $benign) AS benign
    FROM nccl_warnings
    WHERE run = $run
)
SELECT global_rank, host, benign, sum(coalesce(n_lines, 1)) AS n,
       coalesce(arg_min(message, logged_at), arg_min(message, written)) AS first,
       bool_or(message ILIKE '%timeout%' OR message ILIKE '%timed out%') AS timeout
FROM lines
GROUP BY global_rank, host, benign
ORDER BY global_rank NULLS LAST, host, benign
