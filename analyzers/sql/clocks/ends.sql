-- The clocks' evidence of one batch of whole hosts of run $run (docs/timeline.md,
-- "Clocks"; clk_hosts' batch $batch, its ranks between $lo and $hi): the end of every
-- matched collective instance and send/recv pair per host, where the ends coincide in
-- true time (the members of a collective finish together; a send finishes with its recv).
-- Reads ranks, collectives and collective_waits of the batch's ranks (and the send/recv
-- calls of their peers); writes the batch's per-rank ends (the temp table
-- clk_rank_ends, replaced per batch), appends to clk_ends (inst, host, host_no,
-- e: the host's end = the median of its ranks' ends, one of them, n_ranks) and to
-- clk_rank_devs the batch's ranks whose ends differ from their host's by more than
-- $min_ns in the median over their instances (a rank whose clock is not its host's).
-- Everything here is per host, so whole hosts per batch give the rows of every host at
-- once; only the batch's ranks are held (benchmarks/README.md, "The cross-rank steps
-- per batch").
-- Collectives: the instances of collective_waits with more than one rank, consistent
-- (same name and size everywhere). Send/recv: the k-th send from a to b on a group with
-- the k-th recv on b from a (NCCL runs one pair's p2p calls in order); the numbering is
-- per (rank, peer), so the calls of the batch's ranks and of those sent to or received
-- from them number as all of the run's do.
-- Parameters: $run, $batch, $lo, $hi, $min_ns.
CREATE OR REPLACE TEMP TABLE clk_rank_ends AS
WITH mine AS (
    SELECT rank FROM clk_hosts WHERE batch = $batch
), coll AS (
    SELECT w.instance_key AS inst, c.rank, c.work_end_ns AS e
    FROM collective_waits w
    JOIN collectives c ON c.run = w.run AND c.rank = w.rank AND c.coll_id = w.coll_id
    WHERE w.run = $run AND w.rank BETWEEN $lo AND $hi AND c.rank BETWEEN $lo AND $hi
      AND w.rank IN (SELECT rank FROM mine)
      AND w.n_ranks > 1 AND w.consistent AND w.match_method <> 'unmatched'
      AND NOT c.is_p2p AND c.work_end_ns IS NOT NULL
), p2p AS (
    SELECT rank, peer_rank, collective, work_end_ns AS e, coalesce(pg_name, '') AS pg,
        row_number() OVER (PARTITION BY rank, peer_rank, collective, coalesce(pg_name, '')
                           ORDER BY coalesce(cpu_start_ns, work_start_ns), coll_id) AS k
    FROM collectives
    WHERE run = $run AND is_p2p AND collective IN ('send', 'recv') AND peer_rank IS NOT NULL
      AND work_end_ns IS NOT NULL AND peer_rank <> rank
      AND (rank IN (SELECT rank FROM mine) OR peer_rank IN (SELECT rank FROM mine))
), pairs AS (
    SELECT 'p2p ' || s.rank || '>' || r.rank || ' ' || s.pg || ' #' || s.k AS inst,
        s.rank AS send_rank, s.e AS send_e, r.rank AS recv_rank, r.e AS recv_e
    FROM p2p s JOIN p2p r ON r.rank = s.peer_rank AND r.peer_rank = s.rank AND r.pg = s.pg
        AND r.k = s.k AND s.collective = 'send' AND r.collective = 'recv'
)
SELECT inst, rank, e FROM coll
UNION ALL SELECT inst, send_rank, send_e FROM pairs
    WHERE send_rank IN (SELECT rank FROM mine)
UNION ALL SELECT inst, recv_rank, recv_e FROM pairs
    WHERE recv_rank IN (SELECT rank FROM mine);

INSERT INTO clk_ends
SELECT e.inst, h.host, h.host_no, quantile_disc(e.e, 0.5) AS e, count(*) AS n_ranks
FROM clk_rank_ends e JOIN clk_hosts h USING (rank)
GROUP BY e.inst, h.host, h.host_no;

INSERT INTO clk_rank_devs
WITH dev AS (
    SELECT r.rank, h.host, r.e - e.e AS d
    FROM clk_rank_ends r JOIN clk_hosts h USING (rank)
    JOIN clk_ends e ON e.inst = r.inst AND e.host = h.host AND e.n_ranks > 1
    WHERE e.host_no IN (SELECT host_no FROM clk_hosts WHERE batch = $batch)
)
SELECT rank, host, CAST(median(d) AS BIGINT) AS dev, count(*) AS n FROM dev
GROUP BY rank, host HAVING abs(median(d)) > $min_ns;
