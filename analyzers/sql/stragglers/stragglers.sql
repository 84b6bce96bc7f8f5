-- Who the others wait for. In every matched collective instance (more than one rank)
-- the rank with the shortest duration arrived last; each other rank's wait in that
-- instance is charged to it. Parameter: $run.
-- One row per (waiter, culprit): the waiter's collective waits caused by the culprit,
-- the waiter's total collective waits, and the culprit's arrival record (instances it
-- arrived last at, of those it took part in).
WITH inst AS (
    -- (ranks that arrived together, with the same duration: the lowest rank, so a re-run
    -- never names another)
    SELECT instance_key, arg_min(rank, [dur_ns, rank]) AS last_rank, count(*) AS n_ranks
    FROM collective_waits
    WHERE run = $run AND n_ranks > 1 AND match_method <> 'unmatched'
    GROUP BY instance_key
), took_part AS (
    SELECT w.rank, count(*) AS n_instances, max(i.n_ranks) AS group_ranks
    FROM collective_waits w JOIN inst i USING (instance_key)
    WHERE w.run = $run GROUP BY w.rank
), record AS (
    SELECT i.last_rank AS culprit, count(*) AS times_last,
        any_value(tp.n_instances) AS n_instances, any_value(tp.group_ranks) AS group_ranks
    FROM inst i JOIN took_part tp ON tp.rank = i.last_rank
    GROUP BY i.last_rank
), pairs AS (
    SELECT w.rank AS waiter, i.last_rank AS culprit, sum(w.wait_ns) AS caused_ns
    FROM collective_waits w JOIN inst i USING (instance_key)
    WHERE w.run = $run AND w.rank <> i.last_rank
    GROUP BY ALL
), totals AS (
    SELECT rank AS waiter, sum(wait_ns) AS total_ns
    FROM collective_waits WHERE run = $run GROUP BY rank
)
SELECT r.culprit AS rank, rk.host, r.times_last, r.n_instances, r.group_ranks,
    p.waiter, coalesce(p.caused_ns, 0) AS caused_ns, coalesce(t.total_ns, 0) AS waiter_total_ns
FROM record r
LEFT JOIN pairs p ON p.culprit = r.culprit
LEFT JOIN totals t ON t.waiter = p.waiter
LEFT JOIN ranks rk ON rk.run = $run AND rk.rank = r.culprit
ORDER BY r.culprit, p.waiter;
