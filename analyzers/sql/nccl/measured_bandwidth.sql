-- Median bus bandwidth NCCL measured (Inspector, nccl_ops) per (collective, process-group
-- label) of run $run: communicators are matched to process groups by their member set.
-- Reads nccl_ops, process_groups; writes nothing. Columns: collective, label, bw (GB/s).
SELECT o.collective, g.pg_desc AS label, median(o.bus_bw_gbs) AS bw
FROM nccl_ops o
JOIN (SELECT comm_id, list(DISTINCT rank ORDER BY rank) AS ranks FROM nccl_ops
      WHERE run = $run AND rank IS NOT NULL GROUP BY comm_id) m USING (comm_id)
JOIN (SELECT any_value(pg_desc) AS pg_desc, list_sort(any_value(ranks)) AS ranks
      FROM process_groups WHERE run = $run GROUP BY pg_name) g
  ON g.ranks = m.ranks
WHERE o.run = $run AND o.bus_bw_gbs IS NOT NULL
GROUP BY o.collective, g.pg_desc
