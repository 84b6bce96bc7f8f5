-- Measured bandwidth (NCCL Inspector, table nccl_ops) per communicator and collective of
-- run $run: members as global ranks, the process group(s) with exactly those members,
-- op count, median and 10th-percentile bus bandwidth, and the median per tenth of the
-- recording window (bandwidth over time; only ops with a wall-clock time, which the
-- profiler plugin's ops lack: their over_time is empty).
WITH ops AS (
    SELECT * FROM nccl_ops WHERE run = $run AND bus_bw_gbs IS NOT NULL
),
members AS (
    SELECT comm_id, list(DISTINCT rank ORDER BY rank) FILTER (WHERE rank IS NOT NULL) AS ranks,
           coalesce(list(DISTINCT host ORDER BY host) FILTER (WHERE host IS NOT NULL),
                    []) AS hosts
    FROM ops GROUP BY comm_id
),
groups AS (
    SELECT list_sort(ranks) AS ranks, list(pg_name ORDER BY pg_name) AS pg_names,
           list(DISTINCT pg_desc ORDER BY pg_desc) AS pg_descs
    FROM (SELECT pg_name, any_value(pg_desc) AS pg_desc, any_value(ranks) AS ranks
          FROM process_groups WHERE run = $run GROUP BY pg_name)
    GROUP BY list_sort(ranks)
),
span AS (
    SELECT min(dump_timestamp_us) AS t0,
           greatest(max(dump_timestamp_us) - min(dump_timestamp_us), 1) AS span
    FROM ops WHERE dump_timestamp_us IS NOT NULL
),
timed AS (
    SELECT o.comm_id, o.collective,
           least(9, (o.dump_timestamp_us - w.t0) * 10 // w.span) AS bucket,
           w.t0 + least(9, (o.dump_timestamp_us - w.t0) * 10 // w.span) * w.span // 10 AS t_us,
           o.bus_bw_gbs
    FROM ops o, span w
    WHERE o.dump_timestamp_us IS NOT NULL
),
over_time AS (
    SELECT comm_id, collective,
           list({'t_us': t_us, 'bus_bw_gbs': bw} ORDER BY t_us) AS over_time
    FROM (SELECT comm_id, collective, any_value(t_us) AS t_us, median(bus_bw_gbs) AS bw
          FROM timed GROUP BY comm_id, collective, bucket)
    GROUP BY comm_id, collective
)
SELECT o.comm_id, o.collective, any_value(o.n_ranks) AS n_ranks, m.ranks, m.hosts,
       coalesce(g.pg_names, []) AS pg_names, coalesce(g.pg_descs, []) AS pg_descs,
       count(*) AS n_ops, median(o.msg_bytes) AS msg_bytes,
       median(o.bus_bw_gbs) AS bus_bw_gbs, quantile_cont(o.bus_bw_gbs, 0.1) AS bus_bw_p10_gbs,
       mode(o.timing_source) AS timing_source, any_value(t.over_time) AS over_time
FROM ops o
JOIN members m USING (comm_id)
LEFT JOIN groups g ON g.ranks = m.ranks
LEFT JOIN over_time t ON t.comm_id = o.comm_id AND t.collective = o.collective
GROUP BY o.comm_id, o.collective, m.ranks, m.hosts, g.pg_names, g.pg_descs
ORDER BY any_value(o.n_ranks) DESC, m.ranks, o.collective
