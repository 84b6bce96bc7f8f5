-- Per rank and step: the step time, the straggler wait the rank suffered (its attributed
-- straggler_wait) and the wait it caused (the collective waits of the other ranks in
-- instances where this rank arrived last, split evenly between ranks that tie).
-- `complete` comes from the complete_steps view (the one definition).
-- Reads: step_attribution, complete_steps, ranks, collective_waits, collectives. Parameter: $run.
WITH w AS (
    SELECT cw.rank, cw.instance_key, cw.wait_ns, cw.arrived_last, c.step
    FROM collective_waits cw
    JOIN collectives c ON c.run = cw.run AND c.rank = cw.rank AND c.coll_id = cw.coll_id
    WHERE cw.run = $run AND cw.instance_key IS NOT NULL
), inst AS (
    SELECT instance_key, sum(wait_ns) AS total_wait,
           count(*) FILTER (WHERE arrived_last) AS n_last
    FROM w GROUP BY instance_key
), caused AS (
    SELECT w.rank, w.step, sum(i.total_wait / i.n_last) AS caused_ns
    FROM w JOIN inst i USING (instance_key)
    WHERE w.arrived_last AND i.n_last > 0
    GROUP BY w.rank, w.step
)
SELECT a.rank, r.host, a.step, cs.step IS NOT NULL AS complete,
    a.step_ns / 1e6 AS step_ms,
    a.straggler_wait_ns / 1e6 AS wait_suffered_ms,
    coalesce(c.caused_ns, 0) / 1e6 AS wait_caused_ms
FROM step_attribution a
JOIN ranks r ON r.run = a.run AND r.rank = a.rank
LEFT JOIN caused c ON c.rank = a.rank AND c.step = a.step
LEFT JOIN complete_steps cs ON cs.run = a.run AND cs.rank = a.rank AND cs.step = a.step
WHERE a.run = $run
ORDER BY a.rank, a.step
