-- Builds `out_collectives` (one row per communication call on this rank) from the
-- temp tables of rank_tables.sql. Three sources, in order of preference:
--   NCCL calls   : a CPU `nccl:*` annotation (ProcessGroupNCCL's profiling title), with
--                  its enclosing `record_param_comms` (metadata), its enclosing `c10d::*`
--                  op (the CPU call) and the comm kernels launched inside it.
--   kernels      : comm kernels launched outside any annotation, one row per kernel:
--                  NCCL/RCCL kernels (ROCm kernels without a runtime link, older traces,
--                  CUDA graphs) and the kernels of the communication-kernel table
--                  (DeepEP, symmetric memory, custom all-reduce, ...: source comm_kernel,
--                  with their library, op and role).
--   gloo calls   : `c10d::*` dispatcher ops paired, in order per transfer type, with the
--                  `gloo:*` spans that ran them (CPU-only traces).

-- Ancestor chains (bounded) of the CPU ops involved in communication.
CREATE OR REPLACE TEMP TABLE comm_anc AS
WITH RECURSIVE a(op_id, anc_id, dist) AS (
    SELECT op_id, op_id, 0 FROM out_cpu_ops
    WHERE name LIKE 'nccl:%' OR name = 'record_param_comms'
       OR op_id IN (SELECT coalesce(launch_op_id, cpu_op_id) FROM gpu_full WHERE kind = 'comm')
    UNION ALL
    SELECT a.op_id, c.parent_id, a.dist + 1
    FROM a JOIN out_cpu_ops c ON c.op_id = a.anc_id
    WHERE c.parent_id IS NOT NULL AND a.dist < 24
)
SELECT a.op_id, a.anc_id, a.dist, c.name AS anc_name
FROM a JOIN out_cpu_ops c ON c.op_id = a.anc_id;

CREATE OR REPLACE TEMP TABLE nccl_anchor AS
SELECT
    n.op_id, n.name, n.tid, n.start_ns, n.end_ns, n.step, n.input_dims, n.input_types,
    (SELECT anc_id FROM comm_anc x WHERE x.op_id = n.op_id AND x.anc_name = 'record_param_comms'
     ORDER BY dist LIMIT 1) AS rpc_id,
    (SELECT anc_id FROM comm_anc x WHERE x.op_id = n.op_id
       AND (x.anc_name LIKE 'c10d::%' OR x.anc_name LIKE '_c10d_functional::%')
     ORDER BY dist LIMIT 1) AS c10d_id
FROM out_cpu_ops n
WHERE n.category IN ('user_annotation', 'cpu_op', 'Operator') AND n.name LIKE 'nccl:%'
  AND canonical_collective(n.name) <> 'wait';

CREATE OR REPLACE TEMP TABLE comm_kernels AS
SELECT g.*,
    (SELECT x.anc_id FROM comm_anc x JOIN nccl_anchor na ON na.op_id = x.anc_id
     WHERE x.op_id = coalesce(g.launch_op_id, g.cpu_op_id) ORDER BY x.dist LIMIT 1) AS anchor_id,
    (SELECT x.anc_id FROM comm_anc x WHERE x.op_id = coalesce(g.launch_op_id, g.cpu_op_id)
       AND x.anc_name = 'record_param_comms' ORDER BY x.dist LIMIT 1) AS rpc_id
FROM gpu_full g WHERE g.kind = 'comm';

CREATE OR REPLACE TEMP TABLE kernel_span AS
SELECT anchor_id, min(start_ns) AS k_start, max(end_ns) AS k_end, count(*) AS k_count,
       min(name) AS k_name, min(device) AS k_device, min(stream) AS k_stream,
       any_value(args) AS k_args, min(comm_library) AS k_library
FROM comm_kernels WHERE anchor_id IS NOT NULL GROUP BY anchor_id;

CREATE OR REPLACE TEMP TABLE pg_lookup AS
SELECT pg_name, pg_desc, ranks, size FROM out_process_groups;

-- Name of the `nccl:*` GPU annotation around a kernel, for kernels without a CPU anchor.
-- A communication-kernel-table kernel launched by its library's own op (the op with its
-- External id, e.g. `symm_mem::multimem_all_reduce_`, not an aten op nor a graph replay)
-- takes its message from that op's first input (elements, type).
CREATE OR REPLACE TEMP TABLE orphan_kernels AS
SELECT k.*,
    (SELECT a.name FROM out_gpu_annotations a
     WHERE a.device = k.device AND a.stream = k.stream AND a.name LIKE 'nccl:%'
       AND a.start_ns <= k.start_ns AND a.end_ns >= k.end_ns
     ORDER BY a.start_ns DESC LIMIT 1) AS gpu_annotation,
    CASE WHEN o.op_id IS NOT NULL THEN numel(CAST(o.input_dims -> '$[0]' AS VARCHAR)) END
        AS op_nelems,
    CASE WHEN o.op_id IS NOT NULL THEN nullif(CAST(o.input_types ->> '$[0]' AS VARCHAR), '') END
        AS op_dtype
FROM comm_kernels k
LEFT JOIN out_cpu_ops l ON l.op_id = k.launch_op_id
LEFT JOIN out_cpu_ops o ON o.op_id = k.cpu_op_id AND NOT k.nccl_like AND k.graph_id IS NULL
      AND o.category IN ('cpu_op', 'Operator') AND o.name NOT LIKE 'aten::%'
      AND coalesce(l.name, '') NOT ILIKE '%GraphLaunch%'
WHERE k.anchor_id IS NULL;

CREATE OR REPLACE TEMP TABLE nccl_calls AS
WITH base AS (
    SELECT
        a.*,
        r.args AS r_args,
        c.start_ns AS c10d_start, c.end_ns AS c10d_end, c.tid AS c10d_tid,
        ks.k_start, ks.k_end, ks.k_count, ks.k_name, ks.k_device, ks.k_stream, ks.k_args,
        ks.k_library
    FROM nccl_anchor a
    LEFT JOIN cpu_args r ON r.op_id = a.rpc_id
    LEFT JOIN out_cpu_ops c ON c.op_id = a.c10d_id
    LEFT JOIN kernel_span ks ON ks.anchor_id = a.op_id
)
SELECT
    coalesce(rpc_id, op_id) AS cpu_op_id,
    coalesce(r_args."Collective name", k_args."Collective name", name) AS collective_raw,
    CASE WHEN rpc_id IS NOT NULL AND r_args."Collective name" IS NOT NULL
         THEN 'record_param_comms' ELSE 'nccl_annotation' END AS source,
    coalesce(r_args."Process Group Name", r_args."Process Group ID",
             k_args."Process Group Name", k_args."Process Group ID") AS pg_name,
    coalesce(r_args."Process Group Description", k_args."Process Group Description") AS pg_desc_arg,
    coalesce(r_args."Process Group Ranks", k_args."Process Group Ranks") AS pg_ranks,
    TRY_CAST(coalesce(r_args."Group size", k_args."Group size") AS INTEGER) AS group_size_arg,
    coalesce(r_args.dtype, k_args.dtype, CAST(input_types ->> '$[0]' AS VARCHAR)) AS dtype,
    coalesce(TRY_CAST(coalesce(r_args."In msg nelems", r_args."In msg size",
                               k_args."In msg nelems", k_args."In msg size") AS BIGINT),
             numel(CAST(input_dims -> '$[0]' AS VARCHAR))) AS in_nelems,
    coalesce(TRY_CAST(coalesce(r_args."Out msg nelems", r_args."Out msg size",
                               k_args."Out msg nelems", k_args."Out msg size") AS BIGINT),
             numel(CAST(input_dims -> '$[0]' AS VARCHAR))) AS out_nelems,
    TRY_CAST(coalesce(r_args."Seq", k_args."Seq") AS BIGINT) AS nccl_seq,
    coalesce(r_args."In split size", k_args."In split size") AS in_split_text,
    coalesce(r_args."Out split size", k_args."Out split size") AS out_split_text,
    TRY_CAST(coalesce(r_args."Dst Rank", r_args."Src Rank", k_args."Dst Rank", k_args."Src Rank")
             AS INTEGER) AS peer_global,
    -- the peer inside the group: `nccl:send 0->3` titles, else (torch <= 2.3) the `Rank`
    -- arg, which send/recv fill with the peer's group rank
    coalesce(TRY_CAST(regexp_extract(name, '(->|<-)\s*(\d+)', 2) AS INTEGER),
             TRY_CAST(coalesce(r_args."Rank", k_args."Rank") AS INTEGER)) AS peer_local,
    coalesce(c10d_id, rpc_id, op_id) AS call_op,
    coalesce(c10d_tid, tid) AS cpu_tid,
    coalesce(c10d_start, start_ns) AS cpu_start_ns,
    coalesce(c10d_end, end_ns) AS cpu_end_ns,
    k_name AS kernel_name, CAST(k_count AS INTEGER) AS kernel_count,
    k_device AS device, k_stream AS stream, k_start AS kernel_start_ns, k_end AS kernel_end_ns,
    k_start AS work_start_ns, k_end AS work_end_ns, CAST(NULL AS BIGINT) AS work_tid,
    coalesce(k_library, 'nccl') AS library, CAST(NULL AS VARCHAR) AS comm_collective,
    CAST(NULL AS VARCHAR) AS comm_op, CAST(NULL AS VARCHAR) AS comm_role,
    step
FROM base;

CREATE OR REPLACE TEMP TABLE orphan_calls AS
SELECT
    coalesce(rpc_id, cpu_op_id, launch_op_id) AS cpu_op_id,
    coalesce(args."Collective name", gpu_annotation, name) AS collective_raw,
    CASE WHEN nccl_like THEN 'nccl_kernel' ELSE 'comm_kernel' END AS source,
    coalesce(args."Process Group Name", args."Process Group ID") AS pg_name,
    args."Process Group Description" AS pg_desc_arg,
    args."Process Group Ranks" AS pg_ranks,
    TRY_CAST(args."Group size" AS INTEGER) AS group_size_arg,
    coalesce(args.dtype, op_dtype) AS dtype,
    coalesce(TRY_CAST(coalesce(args."In msg nelems", args."In msg size") AS BIGINT), op_nelems)
        AS in_nelems,
    coalesce(TRY_CAST(coalesce(args."Out msg nelems", args."Out msg size") AS BIGINT), op_nelems)
        AS out_nelems,
    TRY_CAST(args."Seq" AS BIGINT) AS nccl_seq,
    args."In split size" AS in_split_text, args."Out split size" AS out_split_text,
    TRY_CAST(coalesce(args."Dst Rank", args."Src Rank") AS INTEGER) AS peer_global,
    coalesce(TRY_CAST(regexp_extract(coalesce(gpu_annotation, ''), '(->|<-)\s*(\d+)', 2)
                      AS INTEGER),
             TRY_CAST(args."Rank" AS INTEGER)) AS peer_local,
    CAST(NULL AS BIGINT) AS call_op,
    CAST(NULL AS BIGINT) AS cpu_tid,
    CAST(NULL AS BIGINT) AS cpu_start_ns,
    CAST(NULL AS BIGINT) AS cpu_end_ns,
    name AS kernel_name, 1 AS kernel_count, device, stream,
    start_ns AS kernel_start_ns, end_ns AS kernel_end_ns,
    start_ns AS work_start_ns, end_ns AS work_end_ns, CAST(NULL AS BIGINT) AS work_tid,
    coalesce(comm_library, 'nccl') AS library,
    -- the table's collective only where the kernel's own args or annotation say nothing
    CASE WHEN args."Collective name" IS NULL AND gpu_annotation IS NULL
         THEN comm_collective END AS comm_collective,
    comm_op, comm_role,
    step
FROM orphan_kernels;

-- gloo: c10d ops that did not go through NCCL, paired with gloo spans by order per type.
CREATE OR REPLACE TEMP TABLE gloo_c10d AS
SELECT op_id, tid, name, start_ns, end_ns, step, concrete_inputs, input_dims, input_types,
       gloo_span_type(name) AS span_type,
       row_number() OVER (PARTITION BY gloo_span_type(name) ORDER BY start_ns, op_id) AS ord
FROM out_cpu_ops c
WHERE name LIKE 'c10d::%' AND gloo_span_type(name) IS NOT NULL
  AND op_id NOT IN (SELECT c10d_id FROM nccl_anchor WHERE c10d_id IS NOT NULL)
  AND EXISTS (SELECT 1 FROM out_cpu_ops g WHERE g.name LIKE 'gloo:%');

CREATE OR REPLACE TEMP TABLE gloo_spans AS
SELECT op_id, tid, name, start_ns, end_ns, step, input_dims, input_types,
       substr(name, 6) AS span_type,
       row_number() OVER (PARTITION BY substr(name, 6) ORDER BY start_ns, op_id) AS ord
FROM out_cpu_ops WHERE name LIKE 'gloo:%';

CREATE OR REPLACE TEMP TABLE gloo_calls AS
SELECT
    coalesce(c.op_id, s.op_id) AS cpu_op_id,
    coalesce(c.name, s.name) AS collective_raw,
    'gloo' AS source,
    CAST(NULL AS VARCHAR) AS pg_name,
    CAST(NULL AS VARCHAR) AS pg_desc_arg,
    CAST(NULL AS VARCHAR) AS pg_ranks,
    CAST(NULL AS INTEGER) AS group_size_arg,
    CAST(coalesce(s.input_types ->> '$[0]', c.input_types ->> '$[0]') AS VARCHAR) AS dtype,
    numel(CAST(s.input_dims -> '$[0]' AS VARCHAR)) AS in_nelems,
    coalesce(numel(CAST(s.input_dims -> '$[1]' AS VARCHAR)),
             numel(CAST(s.input_dims -> '$[0]' AS VARCHAR))) AS out_nelems,
    CAST(NULL AS BIGINT) AS nccl_seq,
    CAST(NULL AS VARCHAR) AS in_split_text, CAST(NULL AS VARCHAR) AS out_split_text,
    CAST(NULL AS INTEGER) AS peer_global,
    CASE WHEN coalesce(c.span_type, s.span_type) IN ('send', 'recv')
         THEN TRY_CAST(c.concrete_inputs ->> '$[2]' AS INTEGER) END AS peer_local,
    c.op_id AS call_op,
    coalesce(c.tid, s.tid) AS cpu_tid,
    coalesce(c.start_ns, s.start_ns) AS cpu_start_ns,
    coalesce(c.end_ns, s.end_ns) AS cpu_end_ns,
    CAST(NULL AS VARCHAR) AS kernel_name, 0 AS kernel_count,
    CAST(NULL AS INTEGER) AS device, CAST(NULL AS BIGINT) AS stream,
    CAST(NULL AS BIGINT) AS kernel_start_ns, CAST(NULL AS BIGINT) AS kernel_end_ns,
    s.start_ns AS work_start_ns, s.end_ns AS work_end_ns, s.tid AS work_tid,
    'gloo' AS library, CAST(NULL AS VARCHAR) AS comm_collective,
    CAST(NULL AS VARCHAR) AS comm_op, CAST(NULL AS VARCHAR) AS comm_role,
    coalesce(c.step, s.step) AS step
FROM gloo_c10d c FULL OUTER JOIN gloo_spans s ON c.span_type = s.span_type AND c.ord = s.ord;

CREATE OR REPLACE TEMP TABLE all_calls AS
SELECT * FROM nccl_calls
UNION ALL BY NAME SELECT * FROM orphan_calls
UNION ALL BY NAME SELECT * FROM gloo_calls;

-- When the rank belongs to a single process group, gloo calls must be on it.
CREATE OR REPLACE TEMP TABLE only_pg AS
SELECT CASE WHEN count(*) = 1 THEN min(pg_name) END AS pg_name FROM pg_lookup;

CREATE OR REPLACE TEMP TABLE out_collectives AS
WITH named AS (
    SELECT c.*,
        coalesce(c.comm_collective, canonical_collective(c.collective_raw)) AS collective,
        coalesce(c.pg_name, CASE WHEN c.source = 'gloo' THEN (SELECT pg_name FROM only_pg) END)
            AS pg
    FROM all_calls c
), joined AS (
    SELECT n.*, p.pg_desc AS pg_desc_cfg, p.ranks AS pg_ranks_cfg, p.size AS pg_size_cfg,
        n.collective IN ('send', 'recv') AS p2p
    FROM named n LEFT JOIN pg_lookup p ON p.pg_name = n.pg
)
SELECT
    row_number() OVER (ORDER BY coalesce(cpu_start_ns, work_start_ns), cpu_op_id) - 1 AS coll_id,
    collective,
    collective_raw,
    source,
    pg AS pg_name,
    coalesce(pg_desc_arg, pg_desc_cfg) AS pg_desc,
    coalesce(pg_ranks, CAST(pg_ranks_cfg AS VARCHAR)) AS pg_ranks,
    coalesce(group_size_arg, pg_size_cfg) AS group_size,
    dtype,
    in_nelems,
    out_nelems,
    in_nelems * dtype_size(dtype) AS in_bytes,
    out_nelems * dtype_size(dtype) AS out_bytes,
    p2p AS is_p2p,
    -- global peer: `Dst Rank`/`Src Rank` (torch >= 2.4), else the group-local peer mapped
    -- through the group's ranks (pg_config, else the `Process Group Ranks` arg when it is
    -- not cut short), else as is on the default group
    CASE WHEN p2p THEN coalesce(
        peer_global, pg_ranks_cfg[peer_local + 1],
        CASE WHEN pg_ranks NOT LIKE '%...%' THEN
            TRY_CAST(regexp_extract_all(pg_ranks, '-?\d+') AS INTEGER[])[peer_local + 1] END,
        CASE WHEN pg IS NULL OR pg = '0' THEN peer_local END) END
        AS peer_rank,
    nccl_seq,
    row_number() OVER (PARTITION BY pg, p2p, CASE WHEN pg IS NULL THEN collective END
                       ORDER BY coalesce(cpu_start_ns, work_start_ns), cpu_op_id) - 1
        AS seq_in_group,
    cpu_op_id,
    cpu_tid,
    cpu_start_ns,
    cpu_end_ns,
    kernel_name,
    kernel_count,
    device,
    stream,
    kernel_start_ns,
    kernel_end_ns,
    work_start_ns,
    work_end_ns,
    work_tid,
    library,
    comm_op,
    comm_role,
    step,
    -- all_to_all(v): rows sent to / received from each member, in group-rank order
    -- (`In/Out split size`; NULL when not given: equal splits); record_param_comms cuts
    -- lists after 30 entries, then the list is NULL and splits_truncated true
    split_sizes(in_split_text) AS in_splits,
    split_sizes(out_split_text) AS out_splits,
    coalesce(in_split_text LIKE '%...%' OR out_split_text LIKE '%...%', false)
        AS splits_truncated
FROM joined;

-- raw_events is no longer read (the largest temp table): freed before the tables are
-- handed over.
DROP TABLE raw_events;
