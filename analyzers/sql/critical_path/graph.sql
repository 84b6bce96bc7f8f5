-- The dependency graph of ranks $lo..$hi of run $run for the critical path and what-if
-- (docs/critical_path.md), one batch of ranks at a time (analyzers/critical_path/graph.py): every
-- join below is within a rank, so a batch's tables are that batch's part of the run's
-- graph; the only cross-rank part, the collective instances, is critical_path/instances.sql
-- over the keys each batch adds to cp_keys. Reads gpu_ops, cpu_ops, collectives,
-- collective_waits, recompute_ops, steps, step_attribution, complete_steps; writes the
-- temporary tables cp_raw, cp_nodes, cp_syncs, cp_cand, cp_inferred, cp_edges, cp_windows
-- (replaced each batch, read by critical_path/*.sql) and appends to cp_keys.
-- Parameters: $run; $lo, $hi (rank numbers, both included); $base (the number of the
-- batch's first node: the nodes of the batches before it); xs_tol_ns (a start within this
-- of another stream's end, that nothing else explains, waited for it); sync_tol_ns (a CPU
-- that resumed within this of a GPU op's end waited for it); gap_min_ns (shortest idle gap
-- of a thread taken as an unrecorded wait at a step boundary); poll_min_ns (shortest
-- silence of a thread inside a step taken as a wait for the op it launched last).

-- ------------------------------------------------------------------ nodes
-- Every GPU activity of the GPU ranks: kernels, memcpy, memset (gpu_ops) and every
-- collective / send / recv that ran on a GPU (collectives: the span of its comm kernels),
-- with the runtime call that launched it (its first comm kernel's, for a collective): its
-- start and end.
CREATE OR REPLACE TEMP TABLE cp_raw AS
WITH launch AS (
    SELECT rank, op_id, tid, start_ns, end_ns FROM cpu_ops
    WHERE run = $run AND rank BETWEEN $lo AND $hi AND correlation IS NOT NULL
), kern AS (
    SELECT g.rank, g.stream, g.start_ns AS s, g.end_ns AS e, g.step,
        CASE WHEN g.kind IN ('memcpy', 'memset') THEN 'memory'
             WHEN rc.op_id IS NOT NULL THEN 'recompute' ELSE 'compute' END AS cat,
        'kernel' AS kind, g.name, c.name AS op, l.start_ns AS launch_s, l.end_ns AS launch_e,
        l.tid AS launch_tid,
        NULL::BIGINT AS coll_id
    FROM gpu_ops g
    LEFT JOIN launch l ON l.rank = g.rank AND l.op_id = g.launch_op_id
    LEFT JOIN cpu_ops c ON c.run = g.run AND c.rank BETWEEN $lo AND $hi AND c.rank = g.rank
        AND c.op_id = g.cpu_op_id
    LEFT JOIN recompute_ops rc ON rc.run = g.run AND rc.rank BETWEEN $lo AND $hi
        AND rc.rank = g.rank AND rc.op_id = g.launch_op_id
    WHERE g.run = $run AND g.rank BETWEEN $lo AND $hi AND g.kind <> 'comm'
      AND g.end_ns >= g.start_ns
), first_comm AS (
    SELECT rank, stream, start_ns, min(launch_op_id) AS launch_op_id
    FROM gpu_ops WHERE run = $run AND rank BETWEEN $lo AND $hi AND kind = 'comm' GROUP BY ALL
), coll AS (
    SELECT c.rank, c.stream, c.work_start_ns AS s, c.work_end_ns AS e, c.step,
        CASE WHEN c.is_p2p THEN 'p2p' ELSE 'collective' END AS cat,
        CASE WHEN c.is_p2p THEN 'p2p' ELSE 'coll' END AS kind,
        c.collective AS name, coalesce(c.pg_desc, c.pg_name) AS op,
        l.start_ns AS launch_s, l.end_ns AS launch_e, l.tid AS launch_tid, c.coll_id
    FROM collectives c
    LEFT JOIN first_comm k ON k.rank = c.rank AND k.stream = c.stream AND k.start_ns = c.kernel_start_ns
    LEFT JOIN launch l ON l.rank = c.rank AND l.op_id = k.launch_op_id
    WHERE c.run = $run AND c.rank BETWEEN $lo AND $hi AND c.kernel_start_ns IS NOT NULL
      AND c.work_start_ns IS NOT NULL
      AND c.work_end_ns >= c.work_start_ns
)
SELECT * FROM kern UNION ALL SELECT * FROM coll;

CREATE OR REPLACE TEMP TABLE cp_nodes AS
SELECT ($base + row_number() OVER (ORDER BY rank, s, e, kind, coll_id, name) - 1)::BIGINT
    AS node, *
FROM cp_raw;

-- ------------------------------------------------------------------ instance keys
-- What makes members of one collective instance (collective_waits.instance_key) and the
-- two sides of a send/recv (the n-th send from a to b pairs with the n-th receive on b
-- from a: numbered within the sending or receiving rank), with each member's duration;
-- critical_path/instances.sql groups them across ranks once every batch is in.
INSERT INTO cp_keys
WITH coll AS (
    SELECT n.node, w.instance_key AS ikey, n.e - n.s AS dur
    FROM cp_nodes n
    JOIN collective_waits w ON w.run = $run AND w.rank BETWEEN $lo AND $hi
        AND w.rank = n.rank AND w.coll_id = n.coll_id
    WHERE n.kind = 'coll' AND w.instance_key IS NOT NULL AND w.n_ranks > 1
      AND w.match_method <> 'unmatched'
), p2p AS (
    SELECT n.node, c.rank, c.peer_rank, c.collective, n.e - n.s AS dur,
        row_number() OVER (PARTITION BY c.rank, c.peer_rank, c.collective
                           ORDER BY c.work_start_ns, c.coll_id) AS nth
    FROM cp_nodes n JOIN collectives c ON c.run = $run AND c.rank BETWEEN $lo AND $hi
        AND c.rank = n.rank AND c.coll_id = n.coll_id
    WHERE n.kind = 'p2p' AND c.collective IN ('send', 'recv') AND c.peer_rank IS NOT NULL
), pairs AS (
    SELECT node, CASE WHEN collective = 'send' THEN rank ELSE peer_rank END || '->'
        || CASE WHEN collective = 'send' THEN peer_rank ELSE rank END || ' #' || nth AS ikey,
        dur
    FROM p2p
)
SELECT node, 'c ' || ikey AS ikey, dur FROM coll
UNION ALL SELECT node, 'p ' || ikey, dur FROM pairs;

-- ------------------------------------------------------------------ syncs
-- A CPU thread that waited for the GPU: a synchronizing runtime call, or an async copy that
-- returned only after its own copy ended, whose end follows a GPU op's end within
-- $sync_tol_ns; else, at a step boundary on the thread that runs the
-- steps, an idle gap (no op, runtime call or annotation but the step's own) of at least
-- $gap_min_ns that ends within $sync_tol_ns of a GPU op's end (loss.item() and friends not
-- recorded). `main`: on the thread that runs the steps, whose waits every thread follows.
CREATE OR REPLACE TEMP TABLE cp_syncs AS
WITH step_thread AS (
    SELECT rank, mode(tid) AS tid FROM steps
    WHERE run = $run AND rank BETWEEN $lo AND $hi AND tid IS NOT NULL GROUP BY rank
), calls AS (
    -- a synchronizing runtime or driver call (waits/macros.sql, the idle split's list too)
    SELECT rank, tid, start_ns AS wait_from, end_ns AS resumed, 'sync_call' AS how
    FROM sync_calls($run) WHERE rank BETWEEN $lo AND $hi
    UNION ALL
    -- an async copy that returned only once its own copy had ended (device to pageable
    -- host memory, .cpu() / .item() / .tolist() on real traces): it blocked like cudaMemcpy
    -- (waits/macros.sql, shared with the idle split)
    SELECT rank, tid, start_ns, end_ns, 'blocking_copy' FROM blocking_copies($run, $lo, $hi)
), busy AS (
    SELECT o.rank, o.tid, o.start_ns, o.end_ns FROM cpu_ops o
    JOIN step_thread m ON m.rank = o.rank AND m.tid = o.tid
    WHERE o.run = $run AND o.rank BETWEEN $lo AND $hi
      AND o.category IN ('cpu_op', 'cuda_runtime', 'cuda_driver',
                                          'user_annotation', 'Operator', 'Runtime')
      AND NOT EXISTS (SELECT 1 FROM steps st WHERE st.run = $run AND st.rank = o.rank
                      AND st.tid = o.tid AND st.start_ns = o.start_ns AND st.end_ns = o.end_ns)
), reach AS (
    SELECT *, max(end_ns) OVER (PARTITION BY rank, tid ORDER BY start_ns, end_ns
                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS busy_to
    FROM busy
), gaps AS (
    SELECT r.rank, r.tid, r.busy_to AS wait_from, r.start_ns AS resumed, 'idle_thread' AS how
    FROM reach r
    WHERE r.start_ns - r.busy_to >= $gap_min_ns
      AND EXISTS (SELECT 1 FROM steps st WHERE st.run = $run AND st.rank = r.rank
                  AND st.start_ns BETWEEN r.busy_to AND r.start_ns)
), waits AS (
    SELECT * FROM calls UNION ALL SELECT * FROM gaps
), ends AS (
    -- ops ending at the same instant: the highest node, so the graph is the same every run
    SELECT rank, e, max(node) AS node FROM cp_nodes GROUP BY rank, e
), leaf AS (
    -- every thread's recorded work; annotations left out (they mark ranges, not work)
    SELECT rank, tid, start_ns, end_ns FROM cpu_ops
    WHERE run = $run AND rank BETWEEN $lo AND $hi
      AND category IN ('cpu_op', 'cuda_runtime', 'cuda_driver', 'Operator', 'Runtime')
), leaf_reach AS (
    SELECT *, max(end_ns) OVER (PARTITION BY rank, tid ORDER BY start_ns, end_ns
                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS busy_to
    FROM leaf
), silent AS (
    -- a thread that recorded nothing for $gap_min_ns inside a step (a step boundary is
    -- the idle_thread rule's)
    SELECT r.rank, r.tid, r.busy_to AS wait_from, r.start_ns AS back FROM leaf_reach r
    WHERE r.start_ns - r.busy_to >= $gap_min_ns
      AND NOT EXISTS (SELECT 1 FROM steps st WHERE st.run = $run AND st.rank = r.rank
                      AND st.start_ns BETWEEN r.busy_to AND r.start_ns)
), last_launch AS (
    -- per launching thread and launch call, the op it launched that ended last
    SELECT rank, launch_tid AS tid, launch_s, max(e) AS e, arg_max(s, [e, node]) AS s,
        arg_max(node, [e, node]) AS node
    FROM cp_nodes WHERE launch_s IS NOT NULL GROUP BY rank, launch_tid, launch_s
), polls AS (
    -- poll: the thread fell silent for $poll_min_ns or more after launching an op that
    -- had not started yet (the GPU was behind it) and came back within $sync_tol_ns of
    -- that op's end, before or
    -- after it (a kernel can signal the host through mapped memory before it ends): it
    -- waited for that op without a runtime call, as DeepEP's dispatch spins on the
    -- receive counts its notify kernel writes. It resumed, for the launches after it,
    -- once the op had ended.
    SELECT p.rank, p.tid, p.wait_from, greatest(p.back, l.e) AS resumed, 'poll' AS how,
        l.node AS src, l.e AS src_e
    FROM silent p ASOF JOIN last_launch l
        ON l.rank = p.rank AND l.tid = p.tid AND l.launch_s <= p.wait_from
    WHERE p.back - p.wait_from >= $poll_min_ns AND l.s > p.wait_from
      AND abs(p.back - l.e) <= $sync_tol_ns
)
SELECT w.rank, w.tid, w.wait_from, w.resumed, w.how, g.node AS src, g.e AS src_e,
    coalesce(w.tid = m.tid, false) AS main
FROM waits w ASOF JOIN ends g ON g.rank = w.rank AND g.e <= w.resumed
LEFT JOIN step_thread m ON m.rank = w.rank
WHERE w.resumed - g.e <= $sync_tol_ns AND g.e >= w.wait_from
UNION ALL
SELECT p.rank, p.tid, p.wait_from, p.resumed, p.how, p.src, p.src_e,
    coalesce(p.tid = m.tid, false) AS main
FROM polls p LEFT JOIN step_thread m ON m.rank = p.rank;

-- ------------------------------------------------------------------ edges
-- Candidate causes of each node's start, with the time t each allowed it (on the node's
-- own clock). kind: stream (the previous op on the stream), issue (a collective waits for
-- the op launched before it on the issuing stream), consume (the op launched after a
-- receive waits for it), inferred (a start nothing else explains, just after another
-- stream's op ended), sync (a launch after a CPU wait: the GPU op the CPU waited for),
-- launch (the runtime call; no source node). `binding` marks the latest (ties: in that
-- order): what set the start. Ops launched at the same instant (one call launching
-- several) are one candidate for issue and consume: the last of them (highest node) for
-- issue, the first (lowest node) for consume, so the graph is the same every run (an ASOF
-- join picks any one of tied rows).
CREATE OR REPLACE TEMP TABLE cp_cand AS
WITH by_launch AS (
    SELECT node, rank, stream, kind, launch_s FROM cp_nodes WHERE launch_s IS NOT NULL
), last_launched AS (
    SELECT rank, launch_s, max(node) AS node, arg_max(stream, node) AS stream
    FROM by_launch GROUP BY rank, launch_s
), first_kernel AS (
    SELECT rank, launch_s, min(node) AS node, arg_min(stream, node) AS stream
    FROM by_launch WHERE kind = 'kernel' GROUP BY rank, launch_s
), stream AS (
    SELECT lag(node) OVER w AS src, node AS dst, lag(e) OVER w AS t, 'stream' AS kind, 1 AS pri
    FROM cp_nodes WINDOW w AS (PARTITION BY rank, stream ORDER BY s, e, node)
), issue AS (
    SELECT p.node AS src, c.node AS dst, p.stream AS p_stream, c.stream AS c_stream
    FROM (SELECT * FROM by_launch WHERE kind <> 'kernel') c
    ASOF JOIN last_launched p ON p.rank = c.rank AND p.launch_s < c.launch_s
), consume AS (
    SELECT r.node AS src, n.node AS dst, r.stream AS r_stream, n.stream AS n_stream
    FROM (SELECT b.* FROM by_launch b JOIN cp_nodes x USING (node)
          WHERE x.kind = 'p2p' AND x.name = 'recv') r
    ASOF JOIN first_kernel n ON n.rank = r.rank AND n.launch_s > r.launch_s
), launched AS (
    SELECT node, rank, launch_s, launch_tid FROM cp_nodes WHERE launch_s IS NOT NULL
), own_wait AS (
    SELECT x.node, y.src, y.resumed, y.resumed - y.wait_from AS wait
    FROM launched x
    ASOF JOIN cp_syncs y ON y.rank = x.rank AND y.tid = x.launch_tid AND y.resumed <= x.launch_s
), main_wait AS (
    SELECT x.node, y.src, y.resumed, y.resumed - y.wait_from AS wait
    FROM launched x
    ASOF JOIN (SELECT * FROM cp_syncs WHERE main) y
        ON y.rank = x.rank AND y.resumed <= x.launch_s
), anchor AS (
    -- the later of the launching thread's own last wait and the step thread's (the other
    -- threads run the work the step thread hands them)
    SELECT x.node AS dst, x.launch_s AS t,
        CASE WHEN coalesce(o.resumed, -1) >= coalesce(m.resumed, -1) THEN o.src ELSE m.src END
            AS src,
        CASE WHEN coalesce(o.resumed, -1) >= coalesce(m.resumed, -1) THEN o.wait ELSE m.wait END
            AS wait
    FROM launched x
    LEFT JOIN own_wait o USING (node)
    LEFT JOIN main_wait m USING (node)
    WHERE o.src IS NOT NULL OR m.src IS NOT NULL
), gpu AS (
    SELECT src, dst, t, kind, pri, NULL::BIGINT AS wait FROM stream WHERE src IS NOT NULL
    UNION ALL
    SELECT i.src, i.dst, n.e, 'issue', 2, NULL FROM issue i JOIN cp_nodes n ON n.node = i.src
    WHERE i.p_stream <> i.c_stream
    UNION ALL
    SELECT c.src, c.dst, n.e, 'consume', 2, NULL FROM consume c
    JOIN cp_nodes n ON n.node = c.src
    WHERE c.r_stream <> c.n_stream
    UNION ALL
    SELECT src, dst, t, 'sync', 4, wait FROM anchor
    UNION ALL
    SELECT NULL, node, launch_s, 'launch', 5, NULL FROM cp_nodes WHERE launch_s IS NOT NULL
)
-- a cause after the start is not one (timestamps out of order): only the stream keeps it
SELECT g.* FROM gpu g JOIN cp_nodes d ON d.node = g.dst
WHERE g.kind = 'stream' OR g.t <= d.s;

-- inferred: the latest end on another stream of the rank, up to the start
CREATE OR REPLACE TEMP TABLE cp_inferred AS
WITH streams AS (
    SELECT DISTINCT rank, stream FROM cp_nodes
), probe AS (
    SELECT x.node, x.rank, x.s, st.stream AS other
    FROM cp_nodes x JOIN streams st ON st.rank = x.rank AND st.stream <> x.stream
), hit AS (
    SELECT p.node AS dst, o.node AS src, o.e AS t, p.s
    FROM probe p ASOF JOIN cp_nodes o ON o.rank = p.rank AND o.stream = p.other AND o.e <= p.s
), best AS (
    -- (two ends at the same instant: the higher node id, so the path is the same each run)
    SELECT dst, arg_max(src, [t, src]) AS src, max(t) AS t, any_value(s) AS s FROM hit
    GROUP BY dst
), explained AS (
    SELECT dst, max(t) AS t FROM cp_cand GROUP BY dst
)
SELECT b.src, b.dst, b.t, 'inferred' AS kind, 3 AS pri, NULL::BIGINT AS wait
FROM best b LEFT JOIN explained x USING (dst)
WHERE b.s - b.t <= $xs_tol_ns AND b.t > coalesce(x.t, -9223372036854775807);

CREATE OR REPLACE TEMP TABLE cp_edges AS
WITH e AS (
    SELECT * FROM cp_cand UNION ALL SELECT * FROM cp_inferred
)
SELECT e.*, row_number() OVER (PARTITION BY e.dst ORDER BY e.t DESC, e.pri, e.src) = 1
    AS binding
FROM e;

-- ------------------------------------------------------------------ windows
-- The complete steps' windows (step_attribution, docs/attribution.md) and the node whose
-- start ends each one (the first GPU op of the next step), else the node ending it.
CREATE OR REPLACE TEMP TABLE cp_windows AS
WITH w AS (
    SELECT a.rank, a.step, a.window_start_ns AS ws, a.window_end_ns AS we, a.has_successor
    FROM step_attribution a JOIN complete_steps c USING (run, rank, step)
    WHERE a.run = $run AND a.rank BETWEEN $lo AND $hi AND a.timeline = 'gpu'
), probe AS (
    SELECT w.rank, w.step, min(n.node) FILTER (WHERE n.step = w.step + 1 AND n.s = w.we)
        AS start_node,
        min(n.node) FILTER (WHERE n.step = w.step AND n.e = w.we) AS end_node
    FROM w JOIN cp_nodes n ON n.rank = w.rank AND n.step IN (w.step, w.step + 1)
    GROUP BY w.rank, w.step
)
SELECT w.*, CASE WHEN w.has_successor THEN p.start_node ELSE p.end_node END AS probe
FROM w JOIN probe p USING (rank, step);
