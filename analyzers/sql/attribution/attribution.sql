-- Step-time attribution of the ranks $lo to $hi of run $run, as defined in
-- docs/attribution.md: one batch of ranks (analyzers/breakdown/attribution.py), after
-- attribution/collective_match.sql matched the collectives of every rank (the run's rows
-- of collective_waits, read here for the batch's ranks only). Everything here is per rank, so a batch's results do not depend on the
-- others and memory holds one batch's intervals, whatever the job's size.
-- Reads the raw tables; writes the batch's scratch files (a_tree, a_timeline,
-- a_intervals, a_windows, a_segments, a_coll_parts: attribution/scratch.sql) and appends
-- its rows of recompute_ops, step_attribution and collective_exposure. Needs the macros
-- of attribution/macros.sql (analyzers._sql.install_macros) and attribution/scratch.sql.
-- Parameters: $run, $lo, $hi (ranks, inclusive).

-- ------------------------------------------------------------------ recompute
-- Forward ops re-executed inside a backward node: an op under an
-- `autograd::engine::evaluate_function:` scope that records autograd (has a Sequence
-- number, forward thread 0) and is not a backward node itself; plus all it calls.
-- Covers non-reentrant (recompute inside the node that unpacks a saved tensor) and
-- reentrant checkpointing (inside CheckpointFunctionBackward, outside nested nodes).
-- The per-op flags are computed once (a_ops, a MATERIALIZED CTE), so the recursion joins
-- narrow rows (ids and two flags, no names: 2-3x faster on 8 real ranks); the regular
-- expression runs only on the few ops that pass the cheap tests (a NULL flag is false:
-- the flags only ever reach `WHERE is_rc` through AND/OR, where NULL and false select
-- the same rows).
--
-- An op is recomputed exactly when some op on its path from the root (itself included)
-- is a forward op strictly below a backward node, so the walk starts at the backward
-- nodes and goes down their subtrees (the ops outside them, about 40% on real ranks,
-- are never visited; an op under nested backward nodes is reached once per node, hence
-- the DISTINCT). A parent sits at least one level of `depth` above its child, so no path
-- is longer than the deepest op's depth: when some op is 200 deep (or has no depth), the
-- walk starts at the roots instead, as deep as the original recursion's 200 levels.
-- a_tree holds the recomputed ops only.
COPY (
WITH RECURSIVE a_ops AS MATERIALIZED (
    SELECT rank, op_id, parent_id, depth,
        coalesce(name LIKE 'autograd::engine::evaluate_function:%', false) AS is_bwd_node,
        CASE WHEN sequence_number IS NOT NULL AND coalesce(fwd_thread_id, 0) = 0
                  AND category IN ('cpu_op', 'Operator') AND name NOT LIKE 'autograd::%'
             THEN NOT regexp_matches(name, 'Backward\d*$') ELSE false END AS forward_op
    FROM cpu_ops WHERE run = $run AND rank BETWEEN $lo AND $hi
), shallow AS (
    SELECT count(*) FILTER (WHERE depth IS NULL OR depth >= 200) = 0 AS ok FROM a_ops
), t(rank, op_id, in_bwd, is_rc, lvl) AS (
    SELECT a.rank, a.op_id, a.is_bwd_node, false, 0
    FROM a_ops a, shallow s
    WHERE CASE WHEN s.ok THEN a.is_bwd_node ELSE a.parent_id IS NULL END
    UNION ALL
    SELECT c.rank, c.op_id,
        t.in_bwd OR c.is_bwd_node,
        t.is_rc OR (t.in_bwd AND c.forward_op),
        t.lvl + 1
    FROM t JOIN a_ops c ON c.rank = t.rank AND c.parent_id = t.op_id
    WHERE t.lvl < 200
)
SELECT DISTINCT rank, op_id FROM t WHERE is_rc
) TO (a_scratch_file('a_tree')) (FORMAT parquet, COMPRESSION uncompressed);

INSERT INTO recompute_ops SELECT $run, rank, op_id FROM a_scratch('a_tree');

-- ------------------------------------------------------------------ timelines
-- GPU ranks are attributed on their GPU ops; CPU-only ranks on the CPU ops of their
-- training threads.
COPY (
SELECT r.rank,
    CASE WHEN EXISTS (SELECT 1 FROM gpu_ops g WHERE g.run = $run AND g.rank BETWEEN $lo AND $hi
                 AND g.rank = r.rank)
         THEN 'gpu' ELSE 'cpu' END AS timeline
FROM ranks r WHERE r.run = $run AND r.rank BETWEEN $lo AND $hi
) TO (a_scratch_file('a_timeline')) (FORMAT parquet, COMPRESSION uncompressed);

-- Categories: 1 compute, 2 recompute, 3 exposed_comm, 4 straggler_wait, 5 bubble, 6 memory.
COPY (
-- GPU: kernels and memory ops (communication comes from the collectives below)
SELECT g.rank, g.start_ns AS s, g.end_ns AS e,
    CASE WHEN g.kind IN ('memcpy', 'memset') THEN 6
         WHEN rc.op_id IS NOT NULL THEN 2 ELSE 1 END AS cat
FROM gpu_ops g
JOIN a_scratch('a_timeline') tl ON tl.rank = g.rank AND tl.timeline = 'gpu'
LEFT JOIN a_scratch('a_tree') rc ON rc.rank = g.rank AND rc.op_id = g.launch_op_id
WHERE g.run = $run AND g.rank BETWEEN $lo AND $hi AND g.kind <> 'comm'
UNION ALL
-- communication (GPU kernels, or gloo spans on CPU ranks): wait part, then the rest
SELECT c.rank, c.work_start_ns, c.work_start_ns + w.wait_ns, 4
FROM collectives c JOIN collective_waits w
    ON w.run = $run AND w.rank BETWEEN $lo AND $hi AND w.rank = c.rank AND w.coll_id = c.coll_id
WHERE c.run = $run AND c.rank BETWEEN $lo AND $hi AND NOT c.is_p2p AND w.wait_ns > 0
UNION ALL
SELECT c.rank, c.work_start_ns + w.wait_ns, c.work_end_ns, 3
FROM collectives c JOIN collective_waits w
    ON w.run = $run AND w.rank BETWEEN $lo AND $hi AND w.rank = c.rank AND w.coll_id = c.coll_id
WHERE c.run = $run AND c.rank BETWEEN $lo AND $hi AND NOT c.is_p2p
  AND c.work_start_ns IS NOT NULL
UNION ALL
SELECT c.rank, c.work_start_ns, c.work_end_ns, 5
FROM collectives c WHERE c.run = $run AND c.rank BETWEEN $lo AND $hi AND c.is_p2p
  AND c.work_start_ns IS NOT NULL
UNION ALL
-- CPU ranks: the self time of each compute op (the cpu_self_time macro,
-- attribution/macros.sql), every op of the rank.
SELECT rank, s, e, cat FROM cpu_self_time($run, (
    SELECT list({'rank': rank, 'ws': NULL::BIGINT, 'we': NULL::BIGINT})
    FROM a_scratch('a_timeline') WHERE timeline = 'cpu'))
) TO (a_scratch_file('a_intervals')) (FORMAT parquet, COMPRESSION uncompressed);

-- ------------------------------------------------------------------ step windows
-- GPU: from the first GPU start of the ops launched in step k to that of step k+1; the
-- last step ends at the last GPU end of its own ops. CPU: the same on ProfilerStep starts.
-- A GPU step whose graph launch no GPU op is linked to (its GPU side is visibly missing)
-- takes its CPU step as the window instead (window_source 'cpu_step'). A step that captures
-- a CUDA/HIP graph (a stream begin-capture call in it) records its launches into the graph
-- without running them: it is timed on the host, its CPU step (window_source 'capture').
COPY (
WITH captures AS (
    SELECT DISTINCT rank, step FROM cpu_ops
    WHERE run = $run AND rank BETWEEN $lo AND $hi AND step IS NOT NULL
      AND name IN ('cudaStreamBeginCapture', 'cudaStreamBeginCapture_v2',
                   'cudaStreamBeginCaptureToGraph', 'hipStreamBeginCapture',
                   'hipStreamBeginCaptureToGraph', 'cuStreamBeginCapture',
                   'cuStreamBeginCapture_v2')
), s AS (
    SELECT st.rank, st.step, tl.timeline,
        CASE WHEN tl.timeline = 'cpu' THEN 'cpu'
             WHEN cap.step IS NOT NULL THEN 'capture'
             WHEN coalesce(st.graph_launches_unlinked, 0) > 0 THEN 'cpu_step'
             ELSE 'gpu' END AS window_source,
        st.gpu_start_ns, st.gpu_end_ns, st.start_ns, st.end_ns
    FROM steps st JOIN a_scratch('a_timeline') tl ON tl.rank = st.rank
    LEFT JOIN captures cap ON cap.rank = st.rank AND cap.step = st.step
    WHERE st.run = $run AND st.rank BETWEEN $lo AND $hi
), e AS (
    SELECT *,
        CASE WHEN window_source = 'gpu' THEN gpu_start_ns ELSE start_ns END AS ws,
        CASE WHEN window_source = 'gpu' THEN gpu_end_ns ELSE end_ns END AS own_end
    FROM s
), n AS (
    SELECT *, lead(ws) OVER (PARTITION BY rank ORDER BY step) AS next_ws,
              lead(step) OVER (PARTITION BY rank ORDER BY step) AS next_step
    FROM e WHERE ws IS NOT NULL
)
SELECT rank, step, timeline, window_source, ws AS window_start_ns,
    CASE WHEN window_source IN ('cpu_step', 'capture') THEN own_end
         WHEN next_ws IS NOT NULL AND next_step = step + 1 THEN next_ws ELSE own_end END
        AS window_end_ns,
    next_ws IS NOT NULL AND next_step = step + 1 AS has_successor
FROM n WHERE own_end IS NOT NULL
) TO (a_scratch_file('a_windows')) (FORMAT parquet, COMPRESSION uncompressed);

-- ------------------------------------------------------------------ priority sweep
-- Every boundary (interval ends and window edges) cuts the rank's timeline into
-- segments; a segment goes to the first category with a running interval.
-- One sort over the batch's boundary points in (rank, time) order carries the running
-- count of intervals of each category. The six counts travel as three BIGINT sums of two
-- 31-bit fields (categories 1+2, 3+4, 5+6: delta * 2^31 for the second), so the window
-- computes three running sums instead of six; a field holds at most the number of
-- intervals of one category on one rank, far below 2^31, and never goes negative (an
-- interval's end never sorts before its start), so the fields never carry into each
-- other. Every rank's counts are back to zero after its last point, so one window over
-- the whole batch gives each rank its own counts. Points at the same time are not
-- grouped first: only the last of them has a later next point, and its running sums
-- include all of them; the others are segments of zero length, dropped.
COPY (
WITH pts AS (
    SELECT rank, s AS t, cat, 1 AS d FROM a_scratch('a_intervals') WHERE e > s
    UNION ALL SELECT rank, e, cat, -1 FROM a_scratch('a_intervals') WHERE e > s
    UNION ALL SELECT rank, window_start_ns, 0, 0 FROM a_scratch('a_windows')
    UNION ALL SELECT rank, window_end_ns, 0, 0 FROM a_scratch('a_windows')
), packed AS (
    SELECT rank, t,
        CASE cat WHEN 1 THEN d WHEN 2 THEN d * 2147483648 ELSE 0 END AS d12,
        CASE cat WHEN 3 THEN d WHEN 4 THEN d * 2147483648 ELSE 0 END AS d34,
        CASE cat WHEN 5 THEN d WHEN 6 THEN d * 2147483648 ELSE 0 END AS d56
    FROM pts
), run_sum AS (
    SELECT rank, t,
        CASE WHEN lead(rank) OVER w = rank THEN lead(t) OVER w END AS t_next,
        sum(d12) OVER w AS n12, sum(d34) OVER w AS n34, sum(d56) OVER w AS n56
    FROM packed
    WINDOW w AS (ORDER BY rank, t ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
), counts AS (
    SELECT rank, t, t_next,
        n12 % 2147483648 AS n1, n12 // 2147483648 AS n2,
        n34 % 2147483648 AS n3, n34 // 2147483648 AS n4,
        n56 % 2147483648 AS n5, n56 // 2147483648 AS n6
    FROM run_sum WHERE t_next > t
)
SELECT rank, t AS s, t_next AS e,
    CASE WHEN n1 > 0 THEN 1 WHEN n2 > 0 THEN 2 WHEN n3 > 0 THEN 3 WHEN n4 > 0 THEN 4
         WHEN n5 > 0 THEN 5 WHEN n6 > 0 THEN 6 ELSE 7 END AS cat,
    -- how many intervals of the segment's own category run in it (shares it out below;
    -- the running sums are HUGEINT, which Parquet has no type for)
    CAST(CASE WHEN n1 > 0 THEN n1 WHEN n2 > 0 THEN n2 WHEN n3 > 0 THEN n3 WHEN n4 > 0 THEN n4
              WHEN n5 > 0 THEN n5 WHEN n6 > 0 THEN n6 ELSE 0 END AS BIGINT) AS n_cat
FROM counts
) TO (a_scratch_file('a_segments')) (FORMAT parquet, COMPRESSION uncompressed);

INSERT INTO step_attribution BY NAME
WITH a_attr AS (
SELECT w.rank, w.step, w.timeline, w.window_source, w.window_start_ns, w.window_end_ns, w.has_successor,
    w.window_end_ns - w.window_start_ns AS step_ns,
    coalesce(sum(g.e - g.s) FILTER (WHERE g.cat = 1), 0) AS compute_ns,
    coalesce(sum(g.e - g.s) FILTER (WHERE g.cat = 2), 0) AS recompute_ns,
    coalesce(sum(g.e - g.s) FILTER (WHERE g.cat = 3), 0) AS exposed_comm_ns,
    coalesce(sum(g.e - g.s) FILTER (WHERE g.cat = 4), 0) AS straggler_wait_ns,
    coalesce(sum(g.e - g.s) FILTER (WHERE g.cat = 5), 0) AS bubble_ns,
    coalesce(sum(g.e - g.s) FILTER (WHERE g.cat = 6), 0) AS memory_ns
FROM a_scratch('a_windows') w
LEFT JOIN a_scratch('a_segments') g
       ON g.rank = w.rank AND g.s >= w.window_start_ns AND g.e <= w.window_end_ns
GROUP BY ALL
)
SELECT $run AS run, *,
    step_ns - compute_ns - recompute_ns - exposed_comm_ns - straggler_wait_ns - bubble_ns
        - memory_ns AS idle_ns
FROM a_attr;

-- ------------------------------------------------------------------ per-collective exposure
-- The time of each collective that the sweep gave to a communication category: an
-- exposed_comm segment goes to the collectives in their transfer part there, a
-- straggler_wait segment to those in their wait part, a bubble segment to the
-- point-to-point ops; when several run at once they share it equally. So summed over
-- collectives, each column is exactly its category in step_attribution, and the rest of
-- a collective's time (under compute, or under another collective) is overlapped.
COPY (
SELECT c.rank, c.coll_id, c.work_start_ns AS s, c.work_start_ns + w.wait_ns AS e, 4 AS cat
FROM collectives c JOIN collective_waits w
    ON w.run = $run AND w.rank BETWEEN $lo AND $hi AND w.rank = c.rank AND w.coll_id = c.coll_id
WHERE c.run = $run AND c.rank BETWEEN $lo AND $hi AND NOT c.is_p2p AND w.wait_ns > 0
UNION ALL
SELECT c.rank, c.coll_id, c.work_start_ns + w.wait_ns, c.work_end_ns, 3
FROM collectives c JOIN collective_waits w
    ON w.run = $run AND w.rank BETWEEN $lo AND $hi AND w.rank = c.rank AND w.coll_id = c.coll_id
WHERE c.run = $run AND c.rank BETWEEN $lo AND $hi AND NOT c.is_p2p
    AND c.work_start_ns IS NOT NULL
UNION ALL
SELECT c.rank, c.coll_id, c.work_start_ns, c.work_end_ns, 5
FROM collectives c
WHERE c.run = $run AND c.rank BETWEEN $lo AND $hi AND c.is_p2p AND c.work_start_ns IS NOT NULL
) TO (a_scratch_file('a_coll_parts')) (FORMAT parquet, COMPRESSION uncompressed);

-- Which segments each part overlaps (same rank and category, g.s < p.e AND g.e > p.s),
-- as an equi-join on time buckets, as for the host windows in attribution/idle.sql: the
-- buckets are stepscope_comm_bucket_ns wide (the mean spacing of the parts); a segment
-- lists all its buckets (segments are disjoint and lie inside the parts, so about one
-- more each than there are parts), a part its first and its later buckets; an
-- overlapping pair is kept once, at the later of the two first buckets, then the exact
-- test. (Joined on rank and category alone, every part meets every segment of its rank:
-- 6x slower on a 64-rank job with 2,600 collectives per rank.) Without parts the bucket
-- is 2^62 ns.
SET VARIABLE stepscope_comm_bucket_ns = (
    SELECT CAST(coalesce(greatest(1, sum(span) // sum(n)), 4611686018427387904) AS BIGINT)
    FROM (SELECT max(e) - min(s) AS span, count(*) AS n FROM a_scratch('a_coll_parts') WHERE e > s
          GROUP BY rank));

INSERT INTO collective_exposure BY NAME
WITH g AS (
    SELECT rank, cat, s, e, n_cat,
        unnest(range(s // getvariable('stepscope_comm_bucket_ns'),
                     e // getvariable('stepscope_comm_bucket_ns') + 1)) AS bk
    FROM a_scratch('a_segments') WHERE cat IN (3, 4, 5)
), p AS NOT MATERIALIZED (
    SELECT *, s // getvariable('stepscope_comm_bucket_ns') AS first_bk,
        e // getvariable('stepscope_comm_bucket_ns') AS last_bk
    FROM a_scratch('a_coll_parts') WHERE e > s
), p_buckets AS (
    SELECT p.*, first_bk AS bk FROM p
    UNION ALL
    SELECT p.*, unnest(range(first_bk + 1, last_bk + 1)) AS bk FROM p WHERE last_bk > first_bk
), claims AS (
    SELECT p.rank, p.coll_id, p.cat, g.s, g.e,
        (least(p.e, g.e) - greatest(p.s, g.s)) / g.n_cat AS ns,
        least(p.e, g.e) - greatest(p.s, g.s) AS claim_ns
    FROM p_buckets p JOIN g ON g.rank = p.rank AND g.cat = p.cat AND g.bk = p.bk
    WHERE (p.bk = p.first_bk OR g.bk = g.s // getvariable('stepscope_comm_bucket_ns'))
      AND g.s < p.e AND g.e > p.s
), shares AS (
    SELECT c.rank, c.coll_id, w.step, c.cat, c.ns, c.claim_ns
    FROM claims c
    JOIN a_scratch('a_windows') w
      ON w.rank = c.rank AND c.s >= w.window_start_ns AND c.e <= w.window_end_ns
), a_coll_exposure AS (
    SELECT rank, coll_id, step,
        round(sum(ns) FILTER (WHERE cat = 3)) AS exposed_ns,
        round(sum(ns) FILTER (WHERE cat = 4)) AS straggler_wait_ns,
        round(sum(ns) FILTER (WHERE cat = 5)) AS bubble_ns,
        sum(claim_ns) FILTER (WHERE cat = 3) AS exposed_claim_ns
    FROM shares GROUP BY rank, coll_id, step
)
SELECT $run AS run, rank, coll_id, step,
    coalesce(exposed_ns, 0) AS exposed_ns, coalesce(straggler_wait_ns, 0) AS straggler_wait_ns,
    coalesce(bubble_ns, 0) AS bubble_ns, coalesce(exposed_claim_ns, 0) AS exposed_claim_ns
FROM a_coll_exposure;

RESET VARIABLE stepscope_comm_bucket_ns;
