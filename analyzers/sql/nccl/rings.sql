-- Rings that cross hosts more often than they must. Reads nccl_rings and nccl_comms of run
-- $run (NCCL_DEBUG logs); writes nothing. A crossing is two consecutive ranks (cyclically)
-- on different hosts; the minimum is the number of hosts when the ring spans more than one.
-- One row per (comm_id, channel) with n ranks, n_hosts and crossings > n_hosts.
WITH rings AS (
    SELECT comm_id, channel, any_value(ring) AS ring
    FROM nccl_rings WHERE run = $run AND comm_id IS NOT NULL
    GROUP BY comm_id, channel
),
hosts AS (
    SELECT comm_id, rank, any_value(host) AS host
    FROM nccl_comms WHERE run = $run AND comm_id IS NOT NULL GROUP BY comm_id, rank
),
positions AS (
    SELECT r.comm_id, r.channel, p.i, r.ring[p.i] AS rank, len(r.ring) AS n
    FROM rings r, LATERAL (SELECT unnest(range(1, len(r.ring) + 1)) AS i) p
),
placed AS (
    SELECT p.comm_id, p.channel, p.i, p.n, h.host,
           lead(h.host, 1, NULL) OVER w AS next_host,
           first_value(h.host) OVER w AS first_host
    FROM positions p LEFT JOIN hosts h ON h.comm_id = p.comm_id AND h.rank = p.rank
    WINDOW w AS (PARTITION BY p.comm_id, p.channel ORDER BY p.i
                 ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
)
SELECT comm_id, channel, any_value(n) AS n, count(DISTINCT host) AS n_hosts,
       count(*) FILTER (WHERE host <> coalesce(next_host, first_host)) AS crossings
FROM placed
GROUP BY comm_id, channel
HAVING count(host) = any_value(n)
   AND count(DISTINCT host) > 1
   AND count(*) FILTER (WHERE host <> coalesce(next_host, first_host)) > count(DISTINCT host)
ORDER BY comm_id, channel
