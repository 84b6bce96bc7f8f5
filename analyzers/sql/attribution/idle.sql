-- Idle split of the ranks $lo to $hi of run $run (docs/attribution.md, "Idle: why the GPU
-- waited"): runs right after attribution.sql on the same batch of ranks and connection and
-- reads its scratch files a_segments (the priority sweep; category 7 = idle) and a_windows,
-- plus gpu_ops and cpu_ops (through the macros sync_calls and blocking_copies of
-- waits/macros.sql too).
-- Appends the batch's idle_gaps and host_activity and sets its step_attribution.
-- idle_host_ns / idle_launch_ns / idle_other_ns. Parameters: $run, $lo, $hi (ranks,
-- inclusive), $short_gap_ns (a gap this short, and this much of a longer gap after the
-- launch, is launch overhead).

-- ------------------------------------------------------------------ gaps
-- A gap: a maximal run of idle segments inside a GPU step window. The GPU op that ends
-- it starts at its end; its launch point is the start of its runtime call, or
-- $short_gap_ns before the call returns when the call itself runs longer (the host is
-- inside a slow launch: lazy module loading, JIT); the earliest when several ops start
-- there; unknown without a linked call.
-- The segments tile each window, so two idle segments of a window are in one run exactly
-- when the first ends where the second starts: only the idle segments are read (a third
-- of them); a run starts where the previous idle segment of the window ends earlier and
-- ends where the next starts later. Most runs are one segment (that is its gap); only
-- the segments of longer runs are numbered into runs and grouped.
COPY (
WITH seg AS (
    SELECT g.rank, w.step, g.s, g.e,
        coalesce(lag(g.e) OVER win <> g.s, true) AS run_start,
        coalesce(lead(g.s) OVER win <> g.e, true) AS run_end
    FROM a_scratch('a_segments') g
    JOIN a_scratch('a_windows') w ON w.rank = g.rank AND w.timeline = 'gpu'
                    AND g.s >= w.window_start_ns AND g.e <= w.window_end_ns
    WHERE g.cat = 7
    WINDOW win AS (PARTITION BY g.rank, w.step ORDER BY g.s)
), island AS (
    SELECT *, sum(CAST(run_start AS INTEGER)) OVER (
            PARTITION BY rank, step ORDER BY s
            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS island
    FROM seg WHERE NOT (run_start AND run_end)
), gap AS (
    SELECT rank, step, s, e FROM seg WHERE run_start AND run_end
    UNION ALL
    SELECT rank, step, min(s) AS s, max(e) AS e FROM island GROUP BY rank, step, island
), nxt AS (
    SELECT g.rank, g.step, g.s, g.e, min(l.start_ns) AS next_launch_ns,
        min(greatest(l.start_ns, l.end_ns - $short_gap_ns)) AS launch_point_ns
    FROM gap g
    LEFT JOIN gpu_ops o ON o.run = $run AND o.rank BETWEEN $lo AND $hi AND o.rank = g.rank
                     AND o.start_ns = g.e
    LEFT JOIN cpu_ops l ON l.run = $run AND l.rank BETWEEN $lo AND $hi AND l.rank = o.rank
                     AND l.op_id = o.launch_op_id
    GROUP BY g.rank, g.step, g.s, g.e
)
SELECT rank, step, s, e, next_launch_ns,
    CASE WHEN e - s <= $short_gap_ns THEN 0
         ELSE least(e - s, greatest(0, coalesce(launch_point_ns, s) - s)) END AS host_bound_ns
FROM nxt
) TO (a_scratch_file('i_gaps')) (FORMAT parquet, COMPRESSION uncompressed);

-- Synchronizing runtime calls (the host waits for the GPU; waits/macros.sql, the
-- critical path's list too): a gap that begins as one returns follows a synchronization
-- (.item(), .cpu(), torch.cuda.synchronize(), ...).
-- An async copy that returned only once its own copy had ended blocked the same way
-- (into pageable host memory: .item(), .cpu() on real traces; waits/macros.sql, the
-- critical path's rule).
-- The data loader's spans (i_loader) likewise.
-- after_sync and loader_ns only concern gaps with a host-bound part (a tenth of them on
-- real ranks; 0 / false for the others), so only those meet the runtime calls.
INSERT INTO idle_gaps BY NAME
WITH i_syncs AS MATERIALIZED (
    SELECT rank, start_ns, end_ns FROM sync_calls($run) WHERE rank BETWEEN $lo AND $hi
    UNION ALL
    SELECT rank, start_ns, end_ns FROM blocking_copies($run, $lo, $hi)
), i_loader AS MATERIALIZED (
    SELECT rank, start_ns, end_ns FROM cpu_ops
    WHERE run = $run AND rank BETWEEN $lo AND $hi AND name LIKE 'enumerate(DataLoader)%'
), i_gaps AS MATERIALIZED (
    FROM a_scratch('i_gaps')
), host AS (
    SELECT rank, step, s, host_bound_ns FROM i_gaps WHERE host_bound_ns > 0
), sync AS (
    SELECT DISTINCT h.rank, h.step, h.s
    FROM host h JOIN i_syncs y ON y.rank = h.rank AND y.start_ns < h.s
     AND y.end_ns >= h.s - 10000 AND y.end_ns <= h.s + h.host_bound_ns
), loader AS (
    SELECT h.rank, h.step, h.s,
        sum(greatest(0, least(d.end_ns, h.s + h.host_bound_ns) - greatest(d.start_ns, h.s)))
            AS ns
    FROM host h JOIN i_loader d ON d.rank = h.rank AND d.start_ns < h.s + h.host_bound_ns
     AND d.end_ns > h.s
    GROUP BY h.rank, h.step, h.s
)
SELECT $run AS run, g.rank, g.step, g.s AS start_ns, g.e AS end_ns, g.next_launch_ns,
    g.host_bound_ns,
    CASE WHEN g.e - g.s <= $short_gap_ns THEN g.e - g.s
         ELSE least(g.e - g.s - g.host_bound_ns, $short_gap_ns) END AS launch_overhead_ns,
    CASE WHEN g.e - g.s <= $short_gap_ns THEN 0
         ELSE g.e - g.s - g.host_bound_ns - least(g.e - g.s - g.host_bound_ns, $short_gap_ns)
    END AS other_ns,
    g.host_bound_ns > 0 AND y.rank IS NOT NULL AS after_sync,
    least(g.host_bound_ns, coalesce(l.ns, 0)) AS loader_ns
FROM i_gaps g
LEFT JOIN sync y ON y.rank = g.rank AND y.step = g.step AND y.s = g.s
LEFT JOIN loader l ON l.rank = g.rank AND l.step = g.step AND l.s = g.s;

-- ------------------------------------------------------------------ the split per step
-- host and launch overhead are the sums over the window's gaps; other is what is left of
-- idle, so the three sum exactly to idle (CPU-only windows: all of it).
UPDATE step_attribution SET
    idle_host_ns = coalesce(s.host, 0),
    idle_launch_ns = coalesce(s.launch, 0),
    idle_other_ns = step_attribution.idle_ns - coalesce(s.host, 0) - coalesce(s.launch, 0)
FROM (
    SELECT a.rank, a.step, sum(g.host_bound_ns) AS host, sum(g.launch_overhead_ns) AS launch
    FROM step_attribution a
    LEFT JOIN idle_gaps g ON g.run = a.run AND g.rank = a.rank AND g.step = a.step
    WHERE a.run = $run AND a.rank BETWEEN $lo AND $hi
    GROUP BY a.rank, a.step
) s
WHERE step_attribution.run = $run AND step_attribution.rank BETWEEN $lo AND $hi
  AND step_attribution.rank = s.rank
  AND step_attribution.step = s.step;

-- ------------------------------------------------------------------ what the host ran
-- Inside the host-bound part of each gap, the self time (its overlap minus its
-- children's) of every CPU op, annotation, Python frame and runtime call, per thread.
-- The host windows, [gap start, gap start + host_bound_ns), from i_gaps (the same rows
-- as the batch's idle_gaps).
COPY (
SELECT rank, step, s AS ws, s + host_bound_ns AS we
FROM a_scratch('i_gaps') WHERE host_bound_ns > 0
) TO (a_scratch_file('i_hwin')) (FORMAT parquet, COMPRESSION uncompressed);

-- Which ops overlap which window (o.start_ns < we AND o.end_ns > ws), as equi-joins on
-- time buckets instead of a range join over every op: time is cut into buckets of
-- stepscope_host_bucket_ns (the mean spacing of the windows, so a window spans about one
-- bucket and a bucket holds about one window); an overlapping (op, window) pair shares
-- the bucket max(op's first bucket, window's first bucket), and is found there once:
-- either the op starts in a bucket the window covers (the window side lists all its
-- buckets, ~2 per window), or the window starts in a later bucket the op covers (the
-- op side lists its later buckets, clipped to the rank's span of windows: only ops
-- longer than a bucket have any). The exact test then keeps the overlapping pairs: the
-- same rows as the range join, 4x cheaper on 8 real ranks. Without windows the bucket
-- is 2^62 ns (no op spans two).
SET VARIABLE stepscope_host_bucket_ns = (
    SELECT CAST(coalesce(greatest(1, sum(span) // sum(n)), 4611686018427387904) AS BIGINT)
    FROM (SELECT max(we) - min(ws) AS span, count(*) AS n FROM a_scratch('i_hwin')
          GROUP BY rank));

-- `o` is read twice, NOT MATERIALIZED: scanning cpu_ops twice is cheaper than a copy of
-- it with its names. i_host_ops, the overlaps, is read twice (each op and its children).
INSERT INTO host_activity BY NAME
WITH i_hwin AS MATERIALIZED (
    FROM a_scratch('i_hwin')
), i_hspan AS (
    SELECT rank, min(ws) // getvariable('stepscope_host_bucket_ns') AS first_bk,
        max(we) // getvariable('stepscope_host_bucket_ns') AS last_bk
    FROM i_hwin GROUP BY rank
), o AS NOT MATERIALIZED (
    SELECT rank, op_id, parent_id, tid, name, category, start_ns, end_ns,
        start_ns // getvariable('stepscope_host_bucket_ns') AS first_bk,
        end_ns // getvariable('stepscope_host_bucket_ns') AS last_bk
    FROM cpu_ops WHERE run = $run AND rank BETWEEN $lo AND $hi
), w_buckets AS (
    SELECT w.*, unnest(range(ws // getvariable('stepscope_host_bucket_ns'),
                             we // getvariable('stepscope_host_bucket_ns') + 1)) AS bk
    FROM i_hwin w
), o_later AS (
    SELECT o.*, unnest(range(greatest(o.first_bk + 1, r.first_bk),
                             least(o.last_bk, r.last_bk) + 1)) AS bk
    FROM o JOIN i_hspan r ON r.rank = o.rank WHERE o.last_bk > o.first_bk
), pairs AS (
    SELECT o.* EXCLUDE (first_bk, last_bk), w.step, w.ws, w.we
    FROM o JOIN w_buckets w ON w.rank = o.rank AND w.bk = o.first_bk
    UNION ALL
    SELECT o.* EXCLUDE (first_bk, last_bk, bk), w.step, w.ws, w.we
    FROM o_later o
    JOIN i_hwin w ON w.rank = o.rank AND w.ws // getvariable('stepscope_host_bucket_ns') = o.bk
), i_host_ops AS MATERIALIZED (
    SELECT rank, step, ws AS hs, op_id, parent_id, tid, name, category,
        least(end_ns, we) - greatest(start_ns, ws) AS ov
    FROM pairs WHERE start_ns < we AND end_ns > ws
)
SELECT $run AS run, p.rank, p.step, p.tid, p.name, p.category,
    sum(greatest(0, p.ov - coalesce(k.kids, 0))) AS self_ns
FROM i_host_ops p
LEFT JOIN (SELECT rank, hs, parent_id, sum(ov) AS kids FROM i_host_ops
           WHERE parent_id IS NOT NULL GROUP BY rank, hs, parent_id) k
       ON k.rank = p.rank AND k.hs = p.hs AND k.parent_id = p.op_id
GROUP BY p.rank, p.step, p.tid, p.name, p.category
HAVING sum(greatest(0, p.ov - coalesce(k.kids, 0))) > 0;

RESET VARIABLE stepscope_host_bucket_ns;
