-- Kernels of the communication-kernel table (collectives.source = 'comm_kernel') of run
-- $run per library: calls, and how many were matched across ranks (stream_order).
-- Reads collectives, collective_waits. Parameter: $run.
SELECT c.library, count(*) AS calls,
       count(*) FILTER (WHERE w.match_method = 'stream_order') AS matched
FROM collectives c
LEFT JOIN collective_waits w ON w.run = c.run AND w.rank = c.rank AND w.coll_id = c.coll_id
WHERE c.run = $run AND c.source = 'comm_kernel'
GROUP BY c.library ORDER BY c.library;
