-- Turns one Kineto trace into the rank tables `out_*`. Inputs, made by ingest/reader.py:
--   raw_events: one row per element of traceEvents, in file order (rowid = index);
--   meta:       one row: base_ns, distributed_info (JSON).
-- Rank-agnostic: the loader adds `run` and `rank` when it inserts.
-- Statements run in order; each one depends only on those above it.

-- Event counts per category and phase (flows, instants and metadata included).
CREATE OR REPLACE TEMP TABLE category_counts AS
SELECT coalesce(cat, '') AS category, coalesce(ph, '') AS ph, count(*) AS n
FROM raw_events GROUP BY ALL;

-- ---------------------------------------------------------------- CPU side
-- Ids are the event's position in traceEvents (rowid of raw_events): stable per file.
-- Times: absolute ns (relative ts + baseTimeNanoseconds, or absolute ts as is).
CREATE OR REPLACE TEMP TABLE cpu_raw AS
WITH x AS (
    SELECT rowid AS idx, *, us_to_ns(ts) + (SELECT coalesce(base_ns, 0) FROM meta) AS start_ns,
           greatest(coalesce(us_to_ns(dur), 0), 0) AS dur_ns
    FROM raw_events
    -- a CASE, not `cat IN (...)`, as in gpu_raw below: tested in the scan (39 -> 35 ms)
    WHERE ph = 'X' AND ts IS NOT NULL
      AND CASE cat WHEN 'cpu_op' THEN true WHEN 'Operator' THEN true
                   WHEN 'user_annotation' THEN true WHEN 'python_function' THEN true
                   WHEN 'cuda_runtime' THEN true WHEN 'Runtime' THEN true
                   WHEN 'cuda_driver' THEN true ELSE false END
)
SELECT
    idx AS op_id,
    leading_int(pid) AS pid,
    leading_int(tid) AS tid,
    name,
    cat AS category,
    start_ns,
    start_ns + dur_ns AS end_ns,
    dur_ns,
    TRY_CAST(args."External id" AS BIGINT) AS external_id,
    TRY_CAST(args.correlation AS BIGINT) AS correlation,
    TRY_CAST(args."Sequence number" AS BIGINT) AS sequence_number,
    TRY_CAST(args."Fwd thread id" AS BIGINT) AS fwd_thread_id,
    TRY_CAST(args."Record function id" AS BIGINT) AS record_function_id,
    args."Input Dims" AS input_dims,
    args."Input type" AS input_types,
    args."Concrete Inputs" AS concrete_inputs
FROM x;

-- Collective metadata lives in the args of record_param_comms (the keys collectives.sql
-- reads; it reads them through a LEFT JOIN, so an event without args needs no NULL).
CREATE OR REPLACE TEMP TABLE cpu_args AS
SELECT rowid AS op_id, comm_args(args) AS args FROM raw_events
WHERE ph = 'X' AND name = 'record_param_comms';

-- Nesting by time containment on each thread: an op's depth is the number of ops open
-- when it starts, i.e. the ops before it in (start, end DESC, op_id) order (enclosing
-- first at equal starts) that end after its start. One sweep over the ops' start and end
-- edges per thread, in time order, gives it: each start is an edge +1, each end -1, so
-- depth = starts before it - ends before it = 2 * (its rank among the starts) - 1 - (its
-- rank among all edges). At one instant ends come before starts (an op ending exactly
-- where the next begins does not enclose it), except a zero-length op's end, which sorts
-- right after its own start: it ended, but did not start before the ops after it.
-- Whole-microsecond traces have runs of zero-length runtime calls at one instant (the
-- DLRM job's cudaOccupancy... calls inside aten::bmm): nested by edge order alone, one of
-- them would enclose the next and every later call of the op lose its parent.
-- (The same depths as counting the ops ended by each start with an ASOF self-join, 72 ->
-- 65 ms CPU for the 65k CPU ops of the 35 MB A100 trace.)
-- An op whose pid or tid is no number (NULL) was never matched to the ops ended before
-- it (the join's equality fails on NULL): its depth stays the count of the ops started
-- before it on its thread, as before.
CREATE OR REPLACE TEMP TABLE cpu_depth AS
WITH keyed AS (
    SELECT op_id, pid, tid, start_ns, end_ns FROM cpu_raw
    WHERE pid IS NOT NULL AND tid IS NOT NULL
), edges AS (
    SELECT op_id, pid, tid, start_ns, end_ns, start_ns AS t, 1 AS edge_class, 0 AS is_end
    FROM keyed
    UNION ALL
    SELECT op_id, pid, tid, start_ns, end_ns, end_ns, CAST(end_ns = start_ns AS INTEGER), 1
    FROM keyed
), swept AS (
    SELECT *,
        row_number() OVER (PARTITION BY pid, tid
                           ORDER BY t, edge_class, end_ns DESC, op_id, is_end) AS n_edges,
        row_number() OVER (PARTITION BY pid, tid, is_end
                           ORDER BY t, edge_class, end_ns DESC, op_id) AS n_kind
    FROM edges
)
SELECT op_id, pid, tid, start_ns, end_ns, CAST(2 * n_kind - 1 - n_edges AS INTEGER) AS depth
FROM swept WHERE is_end = 0
UNION ALL
SELECT op_id, pid, tid, start_ns, end_ns,
    CAST(row_number() OVER (PARTITION BY pid, tid ORDER BY start_ns, end_ns DESC, op_id) - 1
         + sum(CASE WHEN end_ns = start_ns THEN 1 ELSE 0 END) OVER (
               PARTITION BY pid, tid, start_ns ORDER BY end_ns DESC, op_id
               ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS INTEGER) AS depth
FROM cpu_raw WHERE pid IS NULL OR tid IS NULL;

-- Parent: latest-starting span one level up on the same thread. A span that only
-- partially overlaps that one (gloo send/recv) takes the span two levels up instead.
CREATE OR REPLACE TEMP TABLE cpu_parent AS
SELECT c.op_id, c.pid, c.tid, c.start_ns, c.end_ns, c.depth, p.op_id AS p1, p.end_ns AS p1_end
FROM cpu_depth c ASOF LEFT JOIN cpu_depth p
  ON c.pid = p.pid AND c.tid = p.tid AND c.depth - 1 = p.depth AND c.start_ns >= p.start_ns;

-- Such spans are few (none in most traces): the join reads only the threads and levels
-- they need, not every op again (15 -> 4 ms on a 65k-op trace without any).
CREATE OR REPLACE TEMP TABLE cpu_parent_fix AS
WITH overlapping AS (SELECT * FROM cpu_parent WHERE p1_end < end_ns)
SELECT c.op_id, p.op_id AS p2, p.end_ns AS p2_end
FROM overlapping c ASOF LEFT JOIN (
    SELECT * FROM cpu_depth
    WHERE (pid, tid, depth) IN (SELECT (pid, tid, depth - 2) FROM overlapping)) p
  ON c.pid = p.pid AND c.tid = p.tid AND c.depth - 2 = p.depth AND c.start_ns >= p.start_ns;

-- Steps (docs/attribution.md, "Steps"): the first source that finds any, in order:
--   0 marker:NAME      a user-named annotation ($step_marker in meta), each call a step;
--   1 profiler_step    ProfilerStep#N (torch.profiler's schedule), step = N;
--   2 optimizer_step   `Optimizer.step#...`: a step ends where an optimizer step ends;
--   3 annotation:NAME  the top-level annotation repeating on one thread that covers most time;
--   4 whole_window     the whole profiled window as one step.
-- Steps of sources 0, 2, 3, 4 are numbered 1, 2, ... in time order.
CREATE OR REPLACE TEMP TABLE step_candidates AS
WITH marker AS (
    SELECT r.* FROM cpu_raw r, meta m
    WHERE m.step_marker IS NOT NULL AND r.category IN ('cpu_op', 'user_annotation',
                                                       'python_function', 'Operator')
      AND (r.name = m.step_marker OR r.name LIKE m.step_marker || '#%')
), marker_thread AS (
    SELECT pid, tid FROM marker GROUP BY pid, tid ORDER BY count(*) DESC, sum(dur_ns) DESC
    LIMIT 1
), optimizer_thread AS (
    SELECT pid, tid FROM cpu_raw WHERE name LIKE 'Optimizer.step#%'
    GROUP BY pid, tid ORDER BY count(*) DESC LIMIT 1
), optimizer AS (
    SELECT r.*, lag(r.end_ns) OVER (ORDER BY r.start_ns) AS prev_end
    FROM cpu_raw r JOIN optimizer_thread USING (pid, tid)
    WHERE r.name LIKE 'Optimizer.step#%'
), top_level AS (
    SELECT r.*, regexp_replace(r.name, '#\d+$', '') AS base_name
    FROM cpu_raw r JOIN cpu_depth d USING (op_id)
    WHERE d.depth = 0 AND r.category = 'user_annotation' AND r.dur_ns > 0
      AND r.name NOT LIKE 'ProfilerStep#%' AND r.name NOT LIKE 'nccl:%'
      AND r.name NOT LIKE 'enumerate(DataLoader)%' AND r.name NOT LIKE 'Optimizer.%'
), repeating AS (
    SELECT base_name, pid, tid FROM top_level GROUP BY base_name, pid, tid
    HAVING count(*) >= 2 ORDER BY sum(dur_ns) DESC, base_name LIMIT 1
)
SELECT 0 AS prio, 'marker:' || (SELECT step_marker FROM meta) AS source,
       CAST(NULL AS INTEGER) AS step, pid, tid, start_ns, end_ns, op_id
FROM marker JOIN marker_thread USING (pid, tid)
UNION ALL
SELECT 1, 'profiler_step', CAST(regexp_extract(name, '^ProfilerStep#(\d+)$', 1) AS INTEGER),
       pid, tid, start_ns, end_ns, op_id
FROM cpu_raw WHERE name LIKE 'ProfilerStep#%' AND regexp_matches(name, '^ProfilerStep#\d+$')
UNION ALL
SELECT 2, 'optimizer_step', NULL, pid, tid,
       coalesce(prev_end, (SELECT min(start_ns) FROM cpu_raw)), end_ns, op_id
FROM optimizer
UNION ALL
SELECT 3, 'annotation:' || t.base_name, NULL, t.pid, t.tid, t.start_ns, t.end_ns, t.op_id
FROM top_level t JOIN repeating r USING (base_name, pid, tid)
UNION ALL
SELECT 4, 'whole_window', NULL, NULL, NULL, min(start_ns), max(end_ns), NULL
FROM cpu_raw HAVING count(*) > 0;

CREATE OR REPLACE TEMP TABLE step_spans AS
WITH chosen AS (
    SELECT * FROM step_candidates
    WHERE prio = (SELECT min(prio) FROM step_candidates)
    -- nested calls of a marker count once (the outermost)
    QUALIFY coalesce(max(end_ns) OVER (ORDER BY start_ns, end_ns DESC
                     ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) <= start_ns
         OR prio = 1
), numbered AS (
    SELECT *, coalesce(step, CAST(row_number() OVER (ORDER BY start_ns, op_id) AS INTEGER))
              AS n
    FROM chosen
)
SELECT n AS step, source, pid, tid, start_ns, end_ns, op_id, end_ns - start_ns AS dur_ns
FROM numbered
QUALIFY row_number() OVER (PARTITION BY n ORDER BY end_ns - start_ns DESC) = 1;

CREATE OR REPLACE TEMP TABLE out_step_source AS
SELECT any_value(source) AS step_source FROM step_spans;

CREATE OR REPLACE TEMP TABLE cpu_nest AS
SELECT c.op_id, c.depth,
    CASE WHEN f.op_id IS NULL OR f.p2_end IS NULL OR f.p2_end < c.end_ns THEN c.p1
         ELSE f.p2 END AS parent_id,
    CASE WHEN c.start_ns < s.end_ns THEN s.step END AS step
FROM cpu_parent c
LEFT JOIN cpu_parent_fix f USING (op_id)
ASOF LEFT JOIN step_spans s ON c.start_ns >= s.start_ns;

CREATE OR REPLACE TEMP TABLE out_cpu_ops AS
SELECT r.op_id, r.pid, r.tid, r.name, r.category, r.start_ns, r.end_ns, r.dur_ns,
       r.external_id, r.correlation, r.sequence_number, r.fwd_thread_id,
       r.record_function_id, r.input_dims, r.input_types, r.concrete_inputs,
       n.parent_id, n.depth, n.step
FROM cpu_raw r JOIN cpu_nest n USING (op_id);

-- ---------------------------------------------------------------- GPU side
-- Kernel names the communication-kernel table knows (comm_patterns.sql: DeepEP, symmetric
-- memory, custom all-reduce, ...): the first pattern matching each distinct name (names
-- are few, kernels many).
-- $comm_any is every pattern in one alternation, compiled once, tried on each distinct
-- name: only the few names it matches are tried pattern by pattern (a pattern read from a
-- column compiles per row).
CREATE OR REPLACE TEMP TABLE comm_kernel_names AS
WITH kernel_names AS (
    SELECT DISTINCT name FROM raw_events
    WHERE ph = 'X' AND CASE cat WHEN 'kernel' THEN true WHEN 'Kernel' THEN true ELSE false END
      AND name IS NOT NULL
), names AS (
    SELECT name FROM kernel_names WHERE regexp_matches(name, $comm_any)
)
SELECT n.name, p.library, p.collective, p.op, p.role
FROM names n JOIN comm_patterns p ON regexp_matches(n.name, p.pattern)
QUALIFY row_number() OVER (PARTITION BY n.name ORDER BY p.priority) = 1;

CREATE OR REPLACE TEMP TABLE gpu_raw AS
WITH x AS (
    SELECT rowid AS idx, *, us_to_ns(ts) + (SELECT coalesce(base_ns, 0) FROM meta) AS start_ns,
           greatest(coalesce(us_to_ns(dur), 0), 0) AS dur_ns,
           name ILIKE 'nccl%' OR name ILIKE 'void nccl%' OR args."Collective name" IS NOT NULL
               AS nccl_like
    FROM raw_events
    -- the category test is a CASE, not `cat IN (...)`: DuckDB turns an IN list into a
    -- join after the scan, which first reads every args key used here for all 75k
    -- duration events of a real trace; a CASE is tested in the scan (27 -> 22 ms)
    WHERE ph = 'X' AND ts IS NOT NULL
      AND CASE cat WHEN 'kernel' THEN true WHEN 'Kernel' THEN true WHEN 'gpu_memcpy' THEN true
                   WHEN 'Memcpy' THEN true WHEN 'gpu_memset' THEN true WHEN 'Memset' THEN true
                   ELSE false END
)
SELECT
    idx AS gpu_op_id,
    CAST(coalesce(TRY_CAST(args.device AS INTEGER), leading_int(pid)) AS INTEGER) AS device,
    coalesce(TRY_CAST(args.stream AS BIGINT), leading_int(tid)) AS stream,
    x.name,
    CASE
        WHEN cat IN ('gpu_memcpy', 'Memcpy') THEN 'memcpy'
        WHEN cat IN ('gpu_memset', 'Memset') THEN 'memset'
        WHEN nccl_like OR ck.name IS NOT NULL THEN 'comm'
        ELSE 'compute'
    END AS kind,
    cat AS category,
    start_ns,
    start_ns + dur_ns AS end_ns,
    dur_ns,
    TRY_CAST(args.correlation AS BIGINT) AS correlation,
    TRY_CAST(args."External id" AS BIGINT) AS external_id,
    TRY_CAST(args.bytes AS BIGINT) AS bytes,
    -- CUDA graphs (Kineto on CUDA >= 12): 0 on kernels not launched from a graph
    nullif(TRY_CAST(args."graph id" AS BIGINT), 0) AS graph_id,
    TRY_CAST(args."graph node id" AS BIGINT) AS graph_node_id,
    CASE WHEN ck.name IS NOT NULL THEN ck.library WHEN nccl_like THEN 'nccl' END AS comm_library,
    ck.collective AS comm_collective, ck.op AS comm_op, ck.role AS comm_role, nccl_like,
    -- the keys collectives.sql reads; NULL without args (its any_value skips those)
    CASE WHEN (nccl_like OR ck.name IS NOT NULL) AND has_args THEN comm_args(args)
    END AS args
FROM x LEFT JOIN comm_kernel_names ck ON ck.name = x.name AND x.cat IN ('kernel', 'Kernel');

CREATE OR REPLACE TEMP TABLE launches AS
SELECT correlation, op_id, step FROM out_cpu_ops
WHERE correlation IS NOT NULL AND category IN ('cuda_runtime', 'Runtime', 'cuda_driver')
QUALIFY row_number() OVER (
    PARTITION BY correlation ORDER BY category = 'cuda_driver', op_id) = 1;

CREATE OR REPLACE TEMP TABLE ext_ops AS
SELECT external_id, op_id FROM out_cpu_ops
WHERE external_id IS NOT NULL AND category IN ('cpu_op', 'Operator', 'user_annotation')
QUALIFY row_number() OVER (PARTITION BY external_id ORDER BY depth DESC, op_id) = 1;

-- CUDA / HIP graphs (docs/attribution.md, "CUDA and HIP graphs"): the kernels of a graph
-- carry the correlation id of the cudaGraphLaunch / hipGraphLaunch that ran them, so they
-- belong to the step that launched the graph (above). A graph launch no GPU op is linked
-- to means the trace lost that link: the step's GPU side is visibly missing.
-- (A driver cuGraphLaunch inside a runtime graph launch is the same launch.)
CREATE OR REPLACE TEMP TABLE graph_launch_steps AS
WITH launch AS (
    SELECT op_id, tid, step, correlation, category, start_ns, end_ns FROM out_cpu_ops
    WHERE category IN ('cuda_runtime', 'Runtime', 'cuda_driver') AND step IS NOT NULL
      -- the LIKE first: a plain substring test, the regex only on the few that pass it
      AND name LIKE '%GraphLaunch%' AND regexp_matches(name, '^(cuda|hip|cu)GraphLaunch')
)
SELECT o.step, count(*) AS graph_launches,
       count(*) FILTER (WHERE NOT EXISTS (
           SELECT 1 FROM gpu_raw g WHERE g.correlation = o.correlation)) AS unlinked
FROM launch o
WHERE o.category <> 'cuda_driver' OR NOT EXISTS (
    SELECT 1 FROM launch r WHERE r.category <> 'cuda_driver' AND r.tid = o.tid
      AND r.start_ns <= o.start_ns AND r.end_ns >= o.end_ns)
GROUP BY o.step;

-- In such a step, GPU ops linked to no runtime call that start inside its CPU interval
-- are taken as its graph's work (by time: the only evidence left).
CREATE OR REPLACE TEMP TABLE graph_fallback_spans AS
SELECT s.step, s.start_ns, s.end_ns
FROM step_spans s JOIN graph_launch_steps gs ON gs.step = s.step AND gs.unlinked > 0;

CREATE OR REPLACE TEMP TABLE gpu_full AS
WITH gpu_linked AS (
    SELECT
        g.*,
        l.op_id AS launch_op_id,
        x.op_id AS cpu_op_id,
        l.step AS step
    FROM gpu_raw g
    LEFT JOIN launches l ON l.correlation = g.correlation
    LEFT JOIN ext_ops x ON x.external_id = g.external_id
)
SELECT g.* REPLACE (
    coalesce(g.step, CASE WHEN g.launch_op_id IS NULL AND g.start_ns < f.end_ns
                          THEN f.step END) AS step)
FROM gpu_linked g ASOF LEFT JOIN graph_fallback_spans f ON g.start_ns >= f.start_ns;

CREATE OR REPLACE TEMP TABLE out_gpu_ops AS
SELECT gpu_op_id, device, stream, name, kind, category, start_ns, end_ns, dur_ns, correlation,
       external_id, bytes, launch_op_id, cpu_op_id, step, graph_id, graph_node_id
FROM gpu_full;

CREATE OR REPLACE TEMP TABLE out_gpu_annotations AS
SELECT
    CAST(leading_int(pid) AS INTEGER) AS device,
    leading_int(tid) AS stream,
    name,
    us_to_ns(ts) + (SELECT coalesce(base_ns, 0) FROM meta) AS start_ns,
    us_to_ns(ts) + (SELECT coalesce(base_ns, 0) FROM meta)
        + greatest(coalesce(us_to_ns(dur), 0), 0) AS end_ns,
    TRY_CAST(args."External id" AS BIGINT) AS external_id
FROM raw_events WHERE ph = 'X' AND ts IS NOT NULL AND cat = 'gpu_user_annotation';

CREATE OR REPLACE TEMP TABLE out_steps AS
SELECT s.step, s.tid, s.start_ns, s.end_ns, s.end_ns - s.start_ns AS dur_ns,
       count(g.gpu_op_id) AS n_gpu_ops,
       min(g.start_ns) AS gpu_start_ns, max(g.end_ns) AS gpu_end_ns,
       CAST(coalesce(any_value(gs.graph_launches), 0) AS INTEGER) AS graph_launches,
       CAST(coalesce(any_value(gs.unlinked), 0) AS INTEGER) AS graph_launches_unlinked
FROM step_spans s LEFT JOIN gpu_full g ON g.step = s.step
LEFT JOIN graph_launch_steps gs ON gs.step = s.step
GROUP BY s.step, s.tid, s.start_ns, s.end_ns;

CREATE OR REPLACE TEMP TABLE out_threads AS
SELECT DISTINCT leading_int(pid) AS pid, leading_int(tid) AS tid,
       CAST(args.name AS VARCHAR) AS thread_name
FROM raw_events WHERE ph = 'M' AND name = 'thread_name';

-- ---------------------------------------------------------------- process groups
CREATE OR REPLACE TEMP TABLE out_process_groups AS
SELECT
    CAST(pg ->> 'pg_name' AS VARCHAR) AS pg_name,
    CAST(pg ->> 'pg_desc' AS VARCHAR) AS pg_desc,
    CAST(regexp_extract_all(CAST(pg -> 'ranks' AS VARCHAR), '-?\d+') AS INTEGER[]) AS ranks,
    TRY_CAST(pg ->> 'pg_size' AS INTEGER) AS size,
    CAST(pg ->> 'backend_config' AS VARCHAR) AS backend,
    false AS ranks_truncated,
    'pg_config' AS source
FROM (SELECT unnest(CAST(distributed_info -> '$.pg_config' AS JSON[])) AS pg FROM meta
      WHERE json_type(distributed_info -> '$.pg_config') = 'ARRAY');

-- ---------------------------------------------------------------- summary
-- One row the loader needs for the `ranks` table, so it never reads the op tables back:
-- the most frequent device and pid (ties: the one seen first) and the CPU time span.
-- (Without GPU ops, read/range_device.sql may find the device.)
CREATE OR REPLACE TEMP TABLE out_summary AS
SELECT
    (SELECT device FROM out_gpu_ops WHERE device IS NOT NULL
     GROUP BY device ORDER BY count(*) DESC, min(gpu_op_id) LIMIT 1) AS device,
    (SELECT pid FROM out_cpu_ops WHERE pid IS NOT NULL
     GROUP BY pid ORDER BY count(*) DESC, min(op_id) LIMIT 1) AS pid,
    (SELECT min(start_ns) FROM out_cpu_ops) AS trace_start_ns,
    (SELECT max(end_ns) FROM out_cpu_ops) AS trace_end_ns;
