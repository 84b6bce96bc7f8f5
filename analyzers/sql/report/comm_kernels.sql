-- Kernels of the communication-kernel table (collectives.source = 'comm_kernel') of run
-- $run per library: calls, how many were matched across ranks (stream_order), and how
-- many run on each rank alone (local: DeepEP's get_dispatch_layout) with their ops.
-- Reads collectives, collective_waits. Parameter: $run.
SELECT c.library, count(*) AS calls,
       count(*) FILTER (WHERE w.match_method = 'stream_order') AS matched,
       count(*) FILTER (WHERE w.match_method = 'local') AS local,
       string_agg(DISTINCT c.comm_op, ', ' ORDER BY c.comm_op)
           FILTER (WHERE w.match_method = 'local') AS local_ops
FROM collectives c
LEFT JOIN collective_waits w ON w.run = c.run AND w.rank = c.rank AND w.coll_id = c.coll_id
WHERE c.run = $run AND c.source = 'comm_kernel'
GROUP BY c.library ORDER BY c.library;
