-- Per rank of run $run, over complete steps: how often it arrived last at the collectives
-- it took part in, and the waits it caused (docs/attribution.md, "Stragglers"). A rank
-- arrived last at a matched instance (more than one rank) when its transfer was the
-- shortest; every other rank of that instance waited (wait_ns) for it, whatever category
-- the wait was later attributed to (straggler_wait, exposed_comm, or hidden under compute).
-- One row per (rank, waiter); waiter NULL when it caused no wait.
WITH w AS (
    SELECT cw.rank, cw.instance_key, cw.n_ranks, cw.wait_ns, cw.arrived_last
    FROM collective_waits cw
    JOIN collectives c ON c.run = cw.run AND c.rank = cw.rank AND c.coll_id = cw.coll_id
    JOIN complete_steps s ON s.run = c.run AND s.rank = c.rank AND s.step = c.step
    WHERE cw.run = $run AND cw.n_ranks > 1 AND cw.match_method <> 'unmatched'
), steps AS (
    SELECT rank, count(*) AS n_steps FROM complete_steps WHERE run = $run GROUP BY rank
), arrival AS (
    SELECT rank, count(*) FILTER (WHERE arrived_last) AS times_last, count(*) AS n_instances,
           max(n_ranks) AS group_ranks
    FROM w GROUP BY rank
), caused AS (
    SELECT l.rank, o.rank AS waiter, sum(o.wait_ns) / any_value(s.n_steps) AS wait_ns_per_step
    FROM w l
    JOIN w o ON o.instance_key = l.instance_key AND o.rank <> l.rank AND o.wait_ns > 0
    JOIN steps s ON s.rank = o.rank
    WHERE l.arrived_last
    GROUP BY l.rank, o.rank
)
SELECT a.rank, a.times_last, a.n_instances, a.group_ranks, c.waiter,
       coalesce(c.wait_ns_per_step, 0) AS wait_ns_per_step
FROM arrival a LEFT JOIN caused c USING (rank)
ORDER BY a.rank, c.waiter
