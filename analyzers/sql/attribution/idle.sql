-- Idle split of the ranks $lo to $hi of run $run (docs/attribution.md, "Idle: why the GPU
-- waited"): runs right after attribution.sql on the same batch of ranks and connection and
-- reads its temp tables a_segments (the priority sweep; category 7 = idle) and a_windows,
-- plus gpu_ops and cpu_ops. Appends the batch's idle_gaps and host_activity and sets its
-- step_attribution.idle_host_ns / idle_launch_ns / idle_other_ns. Parameters: $run, $lo,
-- $hi (ranks, inclusive), $short_gap_ns (a gap this short, and this much of a longer gap
-- after the launch, is launch overhead).

-- ------------------------------------------------------------------ gaps
-- A gap: a maximal run of idle segments inside a GPU step window. The GPU op that ends
-- it starts at its end; its launch point is the start of its runtime call, or
-- $short_gap_ns before the call returns when the call itself runs longer (the host is
-- inside a slow launch: lazy module loading, JIT); the earliest when several ops start
-- there; unknown without a linked call.
CREATE OR REPLACE TEMP TABLE i_gaps AS
WITH seg AS (
    SELECT g.rank, w.step, g.s, g.e, g.cat,
        sum(CASE WHEN g.cat = 7 THEN 0 ELSE 1 END) OVER (
            PARTITION BY g.rank, w.step ORDER BY g.s
            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS island
    FROM a_segments g
    JOIN a_windows w ON w.rank = g.rank AND w.timeline = 'gpu'
                    AND g.s >= w.window_start_ns AND g.e <= w.window_end_ns
), gap AS (
    SELECT rank, step, min(s) AS s, max(e) AS e FROM seg WHERE cat = 7
    GROUP BY rank, step, island
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
FROM nxt;

-- Synchronizing runtime calls (the host waits for the GPU): a gap that begins as one
-- returns follows a synchronization (.item(), .cpu(), torch.cuda.synchronize(), ...).
CREATE OR REPLACE TEMP TABLE i_syncs AS
SELECT rank, start_ns, end_ns FROM cpu_ops
WHERE run = $run AND rank BETWEEN $lo AND $hi
  AND category IN ('cuda_runtime', 'cuda_driver', 'Runtime')
  AND (name LIKE '%Synchronize%'
       OR name IN ('cudaMemcpy', 'hipMemcpy', 'cudaMemcpy2D', 'hipMemcpy2D', 'cuMemcpyDtoH',
                   'cuMemcpyDtoH_v2', 'hipMemcpyDtoH'));

CREATE OR REPLACE TEMP TABLE i_loader AS
SELECT rank, start_ns, end_ns FROM cpu_ops
WHERE run = $run AND rank BETWEEN $lo AND $hi AND name LIKE 'enumerate(DataLoader)%';

INSERT INTO idle_gaps BY NAME
SELECT $run AS run, g.rank, g.step, g.s AS start_ns, g.e AS end_ns, g.next_launch_ns,
    g.host_bound_ns,
    CASE WHEN g.e - g.s <= $short_gap_ns THEN g.e - g.s
         ELSE least(g.e - g.s - g.host_bound_ns, $short_gap_ns) END AS launch_overhead_ns,
    CASE WHEN g.e - g.s <= $short_gap_ns THEN 0
         ELSE g.e - g.s - g.host_bound_ns - least(g.e - g.s - g.host_bound_ns, $short_gap_ns)
    END AS other_ns,
    g.host_bound_ns > 0 AND EXISTS (
        SELECT 1 FROM i_syncs y WHERE y.rank = g.rank AND y.start_ns < g.s
          AND y.end_ns >= g.s - 10000 AND y.end_ns <= g.s + g.host_bound_ns) AS after_sync,
    least(g.host_bound_ns, coalesce((
        SELECT sum(greatest(0, least(d.end_ns, g.s + g.host_bound_ns) - greatest(d.start_ns, g.s)))
        FROM i_loader d WHERE d.rank = g.rank AND d.start_ns < g.s + g.host_bound_ns
          AND d.end_ns > g.s), 0)) AS loader_ns
FROM i_gaps g;

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
-- The overlap test is on (rank, time) folded into one HUGEINT, rank * 2^64 + ns (times
-- are BIGINT, so a rank's keys never reach the next rank's): the same rows as
-- `o.rank = h.rank AND o.start_ns < gap end AND o.end_ns > gap start`, but as two
-- inequalities alone DuckDB runs it as a sorted range join (IEJoin) instead of testing
-- every op of a rank against every gap of it (3x faster on 8 real ranks).
CREATE OR REPLACE TEMP TABLE i_host_ops AS
SELECT o.rank, h.step, h.start_ns AS hs, o.op_id, o.parent_id, o.tid, o.name, o.category,
    least(o.end_ns, h.start_ns + h.host_bound_ns) - greatest(o.start_ns, h.start_ns) AS ov
FROM (SELECT *, CAST(rank AS HUGEINT) * 18446744073709551616 AS k FROM idle_gaps
      WHERE run = $run AND rank BETWEEN $lo AND $hi AND host_bound_ns > 0) h
JOIN (SELECT *, CAST(rank AS HUGEINT) * 18446744073709551616 AS k FROM cpu_ops
      WHERE run = $run AND rank BETWEEN $lo AND $hi) o
  ON o.k + o.start_ns < h.k + h.start_ns + h.host_bound_ns
 AND o.k + o.end_ns > h.k + h.start_ns;

INSERT INTO host_activity BY NAME
SELECT $run AS run, p.rank, p.step, p.tid, p.name, p.category,
    sum(greatest(0, p.ov - coalesce(k.kids, 0))) AS self_ns
FROM i_host_ops p
LEFT JOIN (SELECT rank, hs, parent_id, sum(ov) AS kids FROM i_host_ops
           WHERE parent_id IS NOT NULL GROUP BY rank, hs, parent_id) k
       ON k.rank = p.rank AND k.hs = p.hs AND k.parent_id = p.op_id
GROUP BY p.rank, p.step, p.tid, p.name, p.category
HAVING sum(greatest(0, p.ov - coalesce(k.kids, 0))) > 0;
