-- The attribution of one step of selected ranks as time segments: what each instant of
-- the step window went to (docs/attribution.md), for the dashboard's Timeline.
-- Reads: step_attribution (windows), gpu_ops, collectives, collective_waits,
-- recompute_ops, cpu_ops (CPU-only ranks, through the cpu_self_time macro of
-- attribution/macros.sql). Writes nothing (read-only connections).
-- Parameters: $run, $step, $ranks (INTEGER[]). Exact segments, merged when adjacent and
-- of one category (analyzers/detail.py draws them by time where they are thinner than a
-- pixel).
-- The intervals and their priority are those of attribution/attribution.sql (a_intervals, the
-- priority sweep); tests check that each rank's segments add up to step_attribution.
-- Categories: 1 compute, 2 recompute, 3 exposed_comm, 4 straggler_wait, 5 bubble,
-- 6 memory, 7 idle. Times are ns from the rank's own window start (hosts' clocks differ).
-- Each rectangle names what ran: the GPU op, or the collective and its group (of the
-- segment's own category, the latest to start, of equal starts the first recorded; NULL
-- for idle and CPU-only ranks' ops); adjacent segments merge when both category and name
-- are the same. Work is O(n log n) in the step's intervals, whatever their overlap: the
-- name is found by halving steps (cand .. named), not by a join of segments to intervals.
WITH RECURSIVE win AS (
    SELECT rank, timeline, window_start_ns AS ws, window_end_ns AS we
    FROM step_attribution
    WHERE run = $run AND step = $step AND list_contains($ranks, rank)
), rc AS (
    SELECT rank, op_id FROM recompute_ops WHERE run = $run AND list_contains($ranks, rank)
), iv AS (
    -- GPU kernels and memory ops (communication comes from the collectives below)
    SELECT g.rank, g.start_ns AS s, g.end_ns AS e,
        CASE WHEN g.kind IN ('memcpy', 'memset') THEN 6
             WHEN rc.op_id IS NOT NULL THEN 2 ELSE 1 END AS cat, g.name, g.gpu_op_id AS ord
    FROM gpu_ops g JOIN win ON win.rank = g.rank AND win.timeline = 'gpu'
    LEFT JOIN rc ON rc.rank = g.rank AND rc.op_id = g.launch_op_id
    WHERE g.run = $run AND g.kind <> 'comm' AND g.end_ns > win.ws AND g.start_ns < win.we
    UNION ALL
    -- collectives: the wait for the last rank, then the transfer; P2P is bubble
    SELECT c.rank, c.work_start_ns, c.work_start_ns + coalesce(w.wait_ns, 0), 4,
        c.collective || ' · ' || coalesce(c.pg_desc, c.library, 'collective') || ' (wait)',
        c.coll_id
    FROM collectives c JOIN win ON win.rank = c.rank
    JOIN collective_waits w ON w.run = c.run AND w.rank = c.rank AND w.coll_id = c.coll_id
    WHERE c.run = $run AND NOT c.is_p2p AND w.wait_ns > 0
      AND c.work_end_ns > win.ws AND c.work_start_ns < win.we
    UNION ALL
    SELECT c.rank, c.work_start_ns + coalesce(w.wait_ns, 0), c.work_end_ns, 3,
        c.collective || ' · ' || coalesce(c.pg_desc, c.library, 'collective'), c.coll_id
    FROM collectives c JOIN win ON win.rank = c.rank
    JOIN collective_waits w ON w.run = c.run AND w.rank = c.rank AND w.coll_id = c.coll_id
    WHERE c.run = $run AND NOT c.is_p2p AND c.work_start_ns IS NOT NULL
      AND c.work_end_ns > win.ws AND c.work_start_ns < win.we
    UNION ALL
    SELECT c.rank, c.work_start_ns, c.work_end_ns, 5,
        c.collective || ' · ' || coalesce(c.pg_desc, c.library, 'p2p'), c.coll_id
    FROM collectives c JOIN win ON win.rank = c.rank
    WHERE c.run = $run AND c.is_p2p AND c.work_start_ns IS NOT NULL
      AND c.work_end_ns > win.ws AND c.work_start_ns < win.we
    UNION ALL
    -- CPU-only ranks: the self time of each compute op (attribution/macros.sql), of the
    -- ops overlapping the window
    SELECT rank, s, e, cat, NULL AS name, NULL AS ord FROM cpu_self_time($run, (
        SELECT list({'rank': rank, 'ws': ws, 'we': we}) FROM win WHERE timeline = 'cpu'))
), clipped AS (
    SELECT iv.rank, greatest(iv.s, win.ws) AS s, least(iv.e, win.we) AS e, iv.cat, iv.name,
        iv.ord
    FROM iv JOIN win USING (rank) WHERE iv.e > iv.s
), pts AS (
    SELECT rank, s AS t, cat, 1 AS d FROM clipped WHERE e > s
    UNION ALL SELECT rank, e, cat, -1 FROM clipped WHERE e > s
    UNION ALL SELECT rank, ws, 0, 0 FROM win
    UNION ALL SELECT rank, we, 0, 0 FROM win
), bounds AS (
    SELECT rank, t,
        sum(d) FILTER (WHERE cat = 1) AS d1, sum(d) FILTER (WHERE cat = 2) AS d2,
        sum(d) FILTER (WHERE cat = 3) AS d3, sum(d) FILTER (WHERE cat = 4) AS d4,
        sum(d) FILTER (WHERE cat = 5) AS d5, sum(d) FILTER (WHERE cat = 6) AS d6
    FROM pts GROUP BY rank, t
), running AS (
    SELECT rank, t, lead(t) OVER w AS t_next,
        sum(coalesce(d1, 0)) OVER w AS n1, sum(coalesce(d2, 0)) OVER w AS n2,
        sum(coalesce(d3, 0)) OVER w AS n3, sum(coalesce(d4, 0)) OVER w AS n4,
        sum(coalesce(d5, 0)) OVER w AS n5, sum(coalesce(d6, 0)) OVER w AS n6
    FROM bounds
    WINDOW w AS (PARTITION BY rank ORDER BY t ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
), swept AS (
    SELECT r.rank, r.t AS ts, r.t_next AS te, win.ws,
        CASE WHEN n1 > 0 THEN 1 WHEN n2 > 0 THEN 2 WHEN n3 > 0 THEN 3 WHEN n4 > 0 THEN 4
             WHEN n5 > 0 THEN 5 WHEN n6 > 0 THEN 6 ELSE 7 END AS cat
    FROM running r JOIN win USING (rank)
    WHERE r.t_next IS NOT NULL AND r.t_next > r.t AND r.t >= win.ws AND r.t_next <= win.we
), cand AS (
    -- the intervals that can name a segment (not a NULL name), numbered per rank and
    -- category by start, then by op or collective id down: a segment's name is that of
    -- the covering interval of the largest number (of equal starts, the first recorded)
    SELECT rank, cat, s, e, name,
        row_number() OVER (PARTITION BY rank, cat ORDER BY s, ord DESC) AS j
    FROM clipped WHERE e > s AND name IS NOT NULL
), levels AS (
    SELECT k FROM range(0, 62) r(k) WHERE (1::BIGINT << k) <= (SELECT max(j) FROM cand)
), sparse AS MATERIALIZED (
    -- per level k, the latest end of the 2^k intervals numbered up to j (fewer below 2^k)
    SELECT c.rank, c.cat, l.k, c.j,
        max(c.e) OVER (PARTITION BY c.rank, c.cat, l.k ORDER BY c.j
                       ROWS BETWEEN (1::BIGINT << l.k) - 1 PRECEDING AND CURRENT ROW) AS e_max
    FROM cand c, levels l
), started AS (
    -- per segment, p: the number of its category's intervals started by its start ts
    -- (a running max over starts and segments in time order, starts first at a tie)
    SELECT rank, cat, ts, p FROM (
        SELECT rank, cat, ts, kind, max(j) OVER (PARTITION BY rank, cat ORDER BY t, kind
                                                 ROWS UNBOUNDED PRECEDING) AS p
        FROM (SELECT rank, cat, s AS t, 0 AS kind, j, NULL::BIGINT AS ts FROM cand
              UNION ALL SELECT rank, cat, ts, 1, NULL, ts FROM swept))
    WHERE kind = 1 AND p IS NOT NULL
), descent(rank, cat, ts, pos, k) AS (
    -- a segment is covered by interval j <= p (p: the intervals started by its start ts)
    -- exactly when e_j > ts (no interval ends inside a swept segment); the largest such
    -- j is found by halving steps over `sparse`: step below the 2^k intervals up to pos
    -- when none of them outlasts ts. O(log n) joins of the segments, not one per interval pair
    SELECT rank, cat, ts, p, (SELECT max(k) FROM levels) FROM started
    UNION ALL
    SELECT d.rank, d.cat, d.ts,
        CASE WHEN sp.e_max <= d.ts THEN greatest(d.pos - (1::BIGINT << d.k), 0)
             ELSE d.pos END,
        d.k - 1
    FROM descent d
    LEFT JOIN sparse sp ON sp.rank = d.rank AND sp.cat = d.cat AND sp.k = d.k AND sp.j = d.pos
    WHERE d.k >= 0
), named AS (
    SELECT d.rank, d.ts, c.name
    FROM descent d JOIN cand c ON c.rank = d.rank AND c.cat = d.cat AND c.j = d.pos
    WHERE d.k = -1
), segments AS (
    -- what ran: the latest-starting interval of the segment's category that covers it
    SELECT g.rank, g.ts - g.ws AS s, g.te - g.ws AS e, g.cat, n.name
    FROM swept g LEFT JOIN named n ON n.rank = g.rank AND n.ts = g.ts
), islands AS (
    -- adjacent segments of one category and name become one rectangle
    SELECT *, sum(CASE WHEN cat = prev_cat AND name IS NOT DISTINCT FROM prev_name
                            AND s = prev_e THEN 0 ELSE 1 END)
                  OVER (PARTITION BY rank ORDER BY s) AS island
    FROM (SELECT *, lag(cat) OVER (PARTITION BY rank ORDER BY s) AS prev_cat,
                    lag(name) OVER (PARTITION BY rank ORDER BY s) AS prev_name,
                    lag(e) OVER (PARTITION BY rank ORDER BY s) AS prev_e
          FROM segments)
), merged AS (
    SELECT rank, min(s) AS start_ns, max(e) AS end_ns, any_value(cat) AS cat,
        any_value(name) AS name
    FROM islands GROUP BY rank, island
)
SELECT rank, start_ns, end_ns, cat, name FROM merged
ORDER BY rank, start_ns
