-- The middle part of one Kineto trace's rank tables, after read/cpu_raw.sql and
-- read/cpu_depth.sql (ingest/reader.py runs them in order, then read/gpu_full.sql or
-- read/gpu_full_linked.sql, then read/rank_outputs.sql). Reads:
--   raw_events: one row per element of traceEvents, in file order (rowid = index);
--   meta:       one row: base_ns, distributed_info (JSON), step_marker;
--   cpu_raw:    the CPU ops' columns (read/cpu_raw.sql);
--   cpu_depth:  each CPU op's depth and parent on its thread (op_id, start_ns, depth,
--               parent_id; ingest/nesting.py).
-- Writes the steps (step_candidates, step_spans, out_step_source), the CPU ops
-- (cpu_nest, out_cpu_ops), the GPU ops' columns and links (comm_kernel_names, gpu_raw,
-- launches, ext_ops, the view gpu_linked) and the graph steps (graph_launch_steps,
-- graph_fallback_spans).
-- Rank-agnostic: the loader adds `run` and `rank` when it inserts.
-- Statements run in order; each one depends only on those above it.
-- Parameter: $comm_any (comm_kernel_names below).

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
SELECT c.op_id, c.depth, c.parent_id,
    CASE WHEN c.start_ns < s.end_ns THEN s.step END AS step
FROM cpu_depth c
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

-- The GPU ops with their links: the runtime call that launched each (and its step) and
-- the CPU op of its external id. read/gpu_full.sql adds the steps of graph replays that
-- lost their launches. A view: read/gpu_full_linked.sql stores it once, sorted (a table
-- here, sorted again there: 27 ms CPU on a 35 MB A100 trace; as a view 19).
CREATE OR REPLACE TEMP VIEW gpu_linked AS
SELECT
    g.*,
    l.op_id AS launch_op_id,
    x.op_id AS cpu_op_id,
    l.step AS step
FROM gpu_raw g
LEFT JOIN launches l ON l.correlation = g.correlation
LEFT JOIN ext_ops x ON x.external_id = g.external_id;
