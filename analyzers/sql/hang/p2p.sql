-- P2P ops left open: each send/recv that did not complete, matched with the k-th open op
-- in the other direction on its peer (same group, same pair).
WITH open_ops AS (
    SELECT rank, pg_name, pg_desc, op, peer_rank, state, input_sizes, input_dtypes,
           p2p_seq_id, record_id,
           row_number() OVER (PARTITION BY pg_name, rank, op, peer_rank
                              ORDER BY record_id) AS k
    FROM fr_entries
    WHERE run = $run AND is_p2p AND state <> 'completed' AND op IN ('send', 'recv')
),
dumped AS (
    SELECT DISTINCT rank FROM nccl_sources WHERE run = $run AND kind = 'flight_recorder'
)
SELECT o.pg_name, o.pg_desc, o.rank, o.op, o.peer_rank, o.state, o.input_sizes,
       o.input_dtypes, o.p2p_seq_id,
       CASE WHEN p.rank IS NOT NULL THEN true
            WHEN o.peer_rank IN (SELECT rank FROM dumped) THEN false END AS peer_posted,
       p.state AS peer_state
FROM open_ops o
LEFT JOIN open_ops p
  ON p.pg_name = o.pg_name AND p.rank = o.peer_rank AND p.peer_rank = o.rank
 AND p.k = o.k AND p.op = CASE o.op WHEN 'send' THEN 'recv' ELSE 'send' END
ORDER BY o.pg_name, o.rank, o.record_id
