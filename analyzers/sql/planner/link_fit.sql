-- The size dependence of run $run's collectives on each link tier (`nvlink`: the group
-- sits on one host; `network`: it crosses hosts): a least-squares line through every
-- matched call of complete steps, transfer time per ring hop against bus bytes per hop,
--   d_min / hops = latency + (bus bytes / hops) / bandwidth,
-- with nccl-tests' bus bytes (x 2(n-1)/n all_reduce, (n-1)/n all_gather, reduce_scatter,
-- all_to_all, 1 broadcast / reduce) and ring hops 2(n-1) for all_reduce, n-1 otherwise.
-- Returns per tier the fit (ns per hop, ns per byte), the calls and distinct message
-- sizes behind it, and the median bus bandwidth (bytes/ns = GB/s) for reference; the
-- caller decides whether the fit is usable (analyzers/plan/calibrate.py). Point-to-point ops
-- are left out (their time includes the wait for the peer).
-- Reads collectives, collective_waits, process_groups, ranks, run_nodes, complete_steps
-- and the collectives' macros (collectives/macros.sql).
-- Parameter: $run.
WITH complete AS (
    SELECT rank, step FROM complete_steps WHERE run = $run
), node AS (
    SELECT gpus_per_node FROM run_nodes WHERE run = $run
), calls AS (
    SELECT
        CASE WHEN crosses_nodes(gh.hosts, c.group_size, (SELECT gpus_per_node FROM node))
             THEN 'network' ELSE 'nvlink' END AS tier,
        greatest(coalesce(c.in_bytes, 0), coalesce(c.out_bytes, 0))
            * bus_factor(c.collective, c.group_size) AS bus_bytes,
        CASE WHEN c.collective = 'all_reduce' THEN 2.0 * (c.group_size - 1)
             ELSE 1.0 * (c.group_size - 1) END AS hops,
        w.min_dur_ns AS transfer_ns
    FROM collectives c
    JOIN complete s ON s.rank = c.rank AND s.step = c.step
    JOIN collective_waits w ON w.run = c.run AND w.rank = c.rank AND w.coll_id = c.coll_id
    LEFT JOIN group_hosts($run) gh ON gh.pg_name = c.pg_name
    WHERE c.run = $run AND NOT c.is_p2p AND c.group_size >= 2 AND w.min_dur_ns > 0
      AND c.collective IN ('all_reduce', 'all_gather', 'reduce_scatter', 'all_to_all',
                           'broadcast', 'reduce')
      AND greatest(coalesce(c.in_bytes, 0), coalesce(c.out_bytes, 0)) > 0
)
SELECT tier, count(*) AS calls, count(DISTINCT bus_bytes / hops) AS sizes,
    min(bus_bytes / hops) AS min_x, max(bus_bytes / hops) AS max_x,
    regr_intercept(transfer_ns / hops, bus_bytes / hops ORDER BY bus_bytes / hops, transfer_ns / hops) AS ns_per_hop,
    regr_slope(transfer_ns / hops, bus_bytes / hops ORDER BY bus_bytes / hops, transfer_ns / hops) AS ns_per_byte,
    median(bus_bytes / transfer_ns) AS median_bus_bw_gbs,
    sum(transfer_ns) / sum(bus_bytes ORDER BY bus_bytes) AS mean_ns_per_byte
FROM calls
GROUP BY tier
ORDER BY tier;
