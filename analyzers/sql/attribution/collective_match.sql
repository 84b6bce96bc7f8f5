-- The cross-rank part of the step-time attribution of run $run (docs/attribution.md):
-- which collective calls of different ranks are one instance, and each instance's
-- shortest duration (what a straggler waits is its duration minus that). This script
-- clears the run's rows of the attribution tables and prepares the matching: the keys of
-- the calls without NCCL metadata, the table macro a_coll of the calls with their
-- instance keys, an empty a_inst_part. Then, per batch of ranks
-- (analyzers/breakdown/attribution.py), attribution/collective_parts.sql aggregates the
-- batch's calls per instance; attribution/collective_instances.sql makes one row per
-- instance of those parts; attribution/collective_waits.sql writes the batch's
-- collective_waits, and attribution/collective_match_end.sql drops what is left. So only
-- what is per instance is held across ranks (a_inst, a_inst_part: narrow rows), and one
-- batch's calls at a time (the whole run's calls at once filled the attribution's room
-- at 2,048 ranks; before that a_coll and a_waits held every call of the run until the
-- commit: 84 MB at 2,048 ranks, benchmarks/README.md "The attribution's allocation").
-- attribution/attribution.sql then fills the per-rank tables batch by batch of ranks,
-- reading the waits back from collective_waits.
-- Parameters: $run; $local_ops, the 'library op' of communication kernels that run on each
-- rank alone (analyzers/comm/local_ops.py: DeepEP's get_dispatch_layout): never matched
-- across ranks (match_method 'local': no instance, no arrival order, no straggler wait).

DELETE FROM recompute_ops WHERE run = $run;
DELETE FROM collective_waits WHERE run = $run;
DELETE FROM step_attribution WHERE run = $run;
DELETE FROM collective_exposure WHERE run = $run;
DELETE FROM idle_gaps WHERE run = $run;
DELETE FROM host_activity WHERE run = $run;

-- ------------------------------------------------------------------ collective matching
-- Kernels of the communication-kernel table (source comm_kernel: DeepEP, custom
-- all-reduce, ...) carry no sequence number and no group. Their group, per rank and role:
-- a process group whose description names the role (EXPERT: expert_exchange, TENSOR:
-- tensor_parallel), else the rank's only group of several ranks when it spans the job.
CREATE OR REPLACE TEMP TABLE a_lib_groups AS
WITH roles AS (
    SELECT DISTINCT rank, coalesce(comm_role, '') AS role FROM collectives
    WHERE run = $run AND source = 'comm_kernel'
), groups AS (
    -- every group of several ranks, its sorted member list numbered (member_id: one
    -- number per distinct list), so the steps below carry the number, not the list: a
    -- rank's copy of every group list it is in grows as ranks squared (a 2,048-rank
    -- group: 4M list items), past the writer's memory
    SELECT pg_desc, members, dense_rank() OVER (ORDER BY members) AS member_id
    FROM (SELECT pg_desc, list_sort(ranks) AS members FROM process_groups
          WHERE run = $run AND len(ranks) > 1 AND NOT coalesce(ranks_truncated, false))
), member AS (
    -- only the ranks with such kernels (none: nothing to do), joined to the groups they
    -- are in on the rank (the groups' members unnested, not a list test of every rank
    -- against every group)
    SELECT DISTINCT r.rank, r.world_size, g.pg_desc, g.member_id, g.size
    FROM (SELECT unnest(members) AS rank, pg_desc, member_id, len(members) AS size
          FROM groups) g
    JOIN ranks r ON r.run = $run AND r.rank = g.rank
    WHERE r.rank IN (SELECT rank FROM roles)
), markers(role, marker) AS (
    VALUES ('expert_exchange', 'EXPERT'), ('tensor_parallel', 'TENSOR')
), labelled AS (
    SELECT m.rank, k.role, any_value(m.member_id) AS member_id
    FROM member m JOIN markers k ON upper(coalesce(m.pg_desc, '')) LIKE '%' || k.marker || '%'
    GROUP BY m.rank, k.role HAVING count(DISTINCT m.member_id) = 1
), only_one AS (
    SELECT rank, any_value(member_id) AS member_id FROM member GROUP BY rank
    HAVING count(DISTINCT member_id) = 1 AND any_value(size) = max(world_size)
)
SELECT r.rank, r.role, g.members
FROM roles r
LEFT JOIN labelled l ON l.rank = r.rank AND l.role = r.role
LEFT JOIN only_one o ON o.rank = r.rank
LEFT JOIN (SELECT DISTINCT member_id, members FROM groups) g
    ON g.member_id = coalesce(l.member_id, o.member_id);

-- One instance of such kernels: (group, library, op, step, order of the call on the rank
-- within the step), only where every member of the group traced the step with the same
-- number of these calls; anything else stays unmatched (never a guess).
CREATE OR REPLACE TEMP TABLE a_lib_calls AS
WITH calls AS (
    SELECT c.rank, c.coll_id, c.library, c.comm_op, c.step, g.members,
        array_to_string(g.members, ',') AS gkey,
        row_number() OVER (PARTITION BY c.rank, c.library, c.comm_op, c.step
                           ORDER BY c.work_start_ns, c.coll_id) AS k,
        count(*) OVER (PARTITION BY c.rank, c.library, c.comm_op, c.step) AS n
    FROM collectives c
    JOIN a_lib_groups g ON g.rank = c.rank AND g.role = coalesce(c.comm_role, '')
    WHERE c.run = $run AND c.source = 'comm_kernel' AND g.members IS NOT NULL
      AND c.step IS NOT NULL AND c.work_start_ns IS NOT NULL AND NOT c.is_p2p
      AND c.collective NOT IN ('barrier', 'wait', 'unknown')
      AND NOT list_contains($local_ops, c.library || ' ' || c.comm_op)
), families AS (
    SELECT gkey, library, comm_op, step
    FROM (SELECT DISTINCT gkey, members, rank, library, comm_op, step, n FROM calls)
    GROUP BY gkey, library, comm_op, step
    HAVING count(DISTINCT rank) = len(any_value(members)) AND min(n) = max(n)
)
SELECT c.rank, c.coll_id,
    'lib ' || c.library || ' ' || c.comm_op || ' g ' || c.gkey || ' step ' || c.step
        || ' #' || c.k AS instance_key
FROM calls c JOIN families f USING (gkey, library, comm_op, step);

-- The order of a call within its step, by collective and size, for the calls without
-- group metadata (their instance key, below): computed on the ranks that have such calls
-- only, every call of those ranks numbered (the numbering is per rank, so whole ranks
-- give the numbers that numbering every rank gives; a job with groups has none).
CREATE OR REPLACE TEMP TABLE a_step_order AS
SELECT rank, coll_id,
    row_number() OVER (PARTITION BY rank, collective, in_nelems, step
                       ORDER BY coalesce(cpu_start_ns, work_start_ns), coll_id) AS k
FROM collectives
WHERE run = $run AND rank IN (SELECT rank FROM collectives
                              WHERE run = $run AND nccl_seq IS NULL AND pg_name IS NULL);

-- One instance across ranks: (group, NCCL Seq) when present; else (group, order of the
-- group's calls on the rank); without group metadata, (collective, step, order within
-- the step); communication-kernel rows as above. Barriers and waits are not matched.
-- A table macro of the calls of the ranks lo to hi, so that the two per-batch statements
-- (attribution/collective_parts.sql, collective_waits.sql) read the same rows.
CREATE OR REPLACE TEMP MACRO a_coll(run_name, local_ops, lo, hi) AS TABLE
SELECT
    c.rank, c.coll_id, c.collective, c.in_nelems, c.is_p2p, c.step,
    c.work_end_ns - c.work_start_ns AS dur_ns,
    CASE
        WHEN c.source = 'comm_kernel' THEN lc.instance_key
        WHEN c.collective IN ('barrier', 'wait', 'unknown') OR c.work_start_ns IS NULL THEN NULL
        WHEN c.nccl_seq IS NOT NULL
            THEN 'pg ' || c.pg_name || ' seq ' || c.nccl_seq || CASE WHEN c.is_p2p THEN ' p2p' ELSE '' END
        WHEN c.pg_name IS NOT NULL
            THEN 'pg ' || c.pg_name || CASE WHEN c.is_p2p THEN ' p2p ' ELSE ' #' END || c.seq_in_group
        ELSE c.collective || ' n=' || coalesce(CAST(c.in_nelems AS VARCHAR), '?')
             || ' step ' || coalesce(CAST(c.step AS VARCHAR), '-') || ' #' || so.k
    END AS instance_key,
    CASE
        WHEN c.source = 'comm_kernel'
            THEN CASE WHEN lc.instance_key IS NOT NULL THEN 'stream_order'
                      WHEN list_contains(local_ops, c.library || ' ' || c.comm_op) THEN 'local'
                      ELSE 'unmatched' END
        WHEN c.collective IN ('barrier', 'wait', 'unknown') OR c.work_start_ns IS NULL THEN 'unmatched'
        WHEN c.nccl_seq IS NOT NULL THEN 'nccl_seq'
        WHEN c.pg_name IS NOT NULL THEN 'group_order'
        ELSE 'step_order'
    END AS match_method
FROM collectives c
LEFT JOIN a_lib_calls lc ON lc.rank = c.rank AND lc.coll_id = c.coll_id
LEFT JOIN a_step_order so ON so.rank = c.rank AND so.coll_id = c.coll_id
WHERE c.run = run_name AND c.rank BETWEEN lo AND hi;

-- The instances' partial aggregates, per batch of ranks (attribution/collective_parts.sql):
-- rows, shortest duration, and the least and greatest collective and size, from which
-- attribution/collective_instances.sql makes one row per instance.
CREATE OR REPLACE TEMP TABLE a_inst_part (instance_key VARCHAR, n BIGINT, min_dur_ns BIGINT,
    min_coll VARCHAR, max_coll VARCHAR, min_nelems BIGINT, max_nelems BIGINT);
