-- One row per (process group, member rank) of a run's Flight Recorder dumps: how far the
-- member got in the group's collective sequence. Sources, best first: the dump's entries
-- (collective_seq_id and state), pg_status (only for groups without P2P ops: pg_status
-- counts whichever of the collective / P2P sequences moved last, so it is ambiguous
-- there), and, for dumps that hold only active entries, "everything before the oldest
-- open entry completed".
WITH groups AS (
    SELECT pg_name, arg_max(pg_desc, n) AS pg_desc, arg_max(ranks, n) AS ranks,
           count(DISTINCT ranks) > 1 AS membership_conflict
    FROM (SELECT pg_name, pg_desc, ranks, count(*) AS n FROM fr_groups
          WHERE run = $run GROUP BY ALL)
    GROUP BY pg_name
),
dumps AS (
    SELECT s.rank,
           NOT coalesce(bool_or(e.state = 'completed'), false) AS only_active
    FROM nccl_sources s LEFT JOIN fr_entries e ON e.run = s.run AND e.rank = s.rank
    WHERE s.run = $run AND s.kind = 'flight_recorder'
    GROUP BY s.rank
),
p2p_groups AS (
    SELECT DISTINCT pg_name FROM fr_entries WHERE run = $run AND is_p2p
),
coll AS (
    SELECT rank, pg_name,
           max(collective_seq_id) AS max_seq,
           max(collective_seq_id) FILTER (WHERE state = 'completed') AS max_done,
           min(collective_seq_id) FILTER (WHERE state <> 'completed') AS min_open,
           count(*) FILTER (WHERE state <> 'completed') AS n_open
    FROM fr_entries WHERE run = $run AND NOT is_p2p
    GROUP BY ALL
),
status AS (
    SELECT g.rank, g.pg_name, g.last_enqueued_seq, g.last_completed_seq
    FROM fr_groups g
    WHERE g.run = $run AND g.pg_id IS NOT NULL
      AND g.pg_name NOT IN (SELECT pg_name FROM p2p_groups)
),
members AS (
    SELECT pg_name, pg_desc, membership_conflict, unnest(ranks) AS rank FROM groups
)
SELECT m.pg_name, m.pg_desc, m.rank, m.membership_conflict,
       d.rank IS NOT NULL AS has_dump,
       greatest(s.last_enqueued_seq, c.max_seq) AS enqueued,
       greatest(s.last_completed_seq, c.max_done,
                CASE WHEN d.only_active THEN c.min_open - 1 END) AS completed,
       coalesce(c.n_open, 0) AS n_open
FROM members m
LEFT JOIN dumps d USING (rank)
LEFT JOIN status s ON s.rank = m.rank AND s.pg_name = m.pg_name
LEFT JOIN coll c ON c.rank = m.rank AND c.pg_name = m.pg_name
ORDER BY m.pg_name, m.rank
