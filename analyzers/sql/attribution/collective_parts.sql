-- One batch of ranks ($lo to $hi) of run $run's collective calls aggregated per instance
-- (attribution/collective_match.sql's a_coll), appended to a_inst_part: how many calls,
-- the shortest duration, the least and greatest collective name and element count (an
-- instance is consistent when its names are one and its non-null counts at most one:
-- count(DISTINCT ...) over the parts). Barriers, waits, p2p and unmatched calls have no
-- instance here. Parameters: $run, $local_ops, $lo, $hi.
INSERT INTO a_inst_part
SELECT instance_key, count(*), min(dur_ns), min(collective), max(collective),
    min(in_nelems), max(in_nelems)
FROM a_coll($run, $local_ops, $lo, $hi) WHERE instance_key IS NOT NULL AND NOT is_p2p
GROUP BY instance_key;
