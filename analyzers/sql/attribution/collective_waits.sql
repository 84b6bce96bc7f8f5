-- collective_waits of run $run's ranks $lo to $hi: each call's instance (attribution/
-- collective_match.sql's a_coll), how many ranks took part, its wait for the last rank
-- to arrive (its duration minus the instance's shortest, attribution/
-- collective_instances.sql's a_inst) and whether it arrived last.
-- Parameters: $run, $local_ops, $lo, $hi.
INSERT INTO collective_waits BY NAME
SELECT
    $run AS run, c.rank, c.coll_id, c.instance_key, c.match_method,
    coalesce(i.n_ranks, 1) AS n_ranks,
    coalesce(i.consistent, true) AS consistent,
    c.dur_ns,
    coalesce(i.min_dur_ns, c.dur_ns) AS min_dur_ns,
    CASE WHEN i.n_ranks > 1 THEN greatest(0, c.dur_ns - i.min_dur_ns) ELSE 0 END AS wait_ns,
    i.n_ranks > 1 AND c.dur_ns = i.min_dur_ns AS arrived_last
FROM a_coll($run, $local_ops, $lo, $hi) c
LEFT JOIN a_inst i ON i.instance_key = c.instance_key AND NOT c.is_p2p;
