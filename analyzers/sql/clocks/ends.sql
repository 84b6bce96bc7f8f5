-- The clocks' evidence for run $run (docs/timeline.md, "Clocks"): the end of every matched
-- collective instance and send/recv pair per host, where the ends coincide in true time
-- (the members of a collective finish together; a send finishes with its recv). Reads
-- ranks, collectives and collective_waits; writes the temp table clk_ends
-- (inst, host, host_no, rank_end_dev: per rank its end minus its host's, e: the host's
-- end = the median of its ranks' ends, one of them). Host 0 is the host of the lowest rank.
-- Collectives: the instances of collective_waits with more than one rank, consistent
-- (same name and size everywhere). Send/recv: the k-th send from a to b on a group with
-- the k-th recv on b from a (NCCL runs one pair's p2p calls in order).
-- Parameters: $run.
CREATE OR REPLACE TEMP TABLE clk_rank_ends AS
WITH coll AS (
    SELECT w.instance_key AS inst, c.rank, c.work_end_ns AS e
    FROM collective_waits w
    JOIN collectives c ON c.run = w.run AND c.rank = w.rank AND c.coll_id = w.coll_id
    WHERE w.run = $run AND w.n_ranks > 1 AND w.consistent AND w.match_method <> 'unmatched'
      AND NOT c.is_p2p AND c.work_end_ns IS NOT NULL
), p2p AS (
    SELECT rank, peer_rank, collective, work_end_ns AS e, coalesce(pg_name, '') AS pg,
        row_number() OVER (PARTITION BY rank, peer_rank, collective, coalesce(pg_name, '')
                           ORDER BY coalesce(cpu_start_ns, work_start_ns), coll_id) AS k
    FROM collectives
    WHERE run = $run AND is_p2p AND collective IN ('send', 'recv') AND peer_rank IS NOT NULL
      AND work_end_ns IS NOT NULL AND peer_rank <> rank
), pairs AS (
    SELECT 'p2p ' || s.rank || '>' || r.rank || ' ' || s.pg || ' #' || s.k AS inst,
        s.rank AS send_rank, s.e AS send_e, r.rank AS recv_rank, r.e AS recv_e
    FROM p2p s JOIN p2p r ON r.rank = s.peer_rank AND r.peer_rank = s.rank AND r.pg = s.pg
        AND r.k = s.k AND s.collective = 'send' AND r.collective = 'recv'
)
SELECT inst, rank, e FROM coll
UNION ALL SELECT inst, send_rank, send_e FROM pairs
UNION ALL SELECT inst, recv_rank, recv_e FROM pairs;

CREATE OR REPLACE TEMP TABLE clk_ends AS
WITH hosts AS (
    SELECT host, rank, dense_rank() OVER (ORDER BY first_rank) - 1 AS host_no
    FROM (SELECT coalesce(host, 'rank ' || rank) AS host, rank,
                 min(rank) OVER (PARTITION BY coalesce(host, 'rank ' || rank)) AS first_rank
          FROM ranks WHERE run = $run)
)
SELECT e.inst, h.host, h.host_no, quantile_disc(e.e, 0.5) AS e, count(*) AS n_ranks
FROM clk_rank_ends e JOIN hosts h USING (rank)
GROUP BY e.inst, h.host, h.host_no;
