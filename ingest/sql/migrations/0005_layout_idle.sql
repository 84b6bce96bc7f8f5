-- Schema version 5 (migration 5, ingest/schema.py): layouts whose numbers multiply out and
-- the idle split (issue 20; docs/attribution.md, "Hosts and nodes", "Layout", "Idle: why
-- the GPU waited"). Writes ranks.host_note, step_attribution's idle split columns, the
-- idle_gaps and host_activity tables (registered in stepscope_tables) and the run_nodes
-- view; no parameters. Idempotent (IF NOT EXISTS, OR REPLACE). Added columns are appended
-- last, so a new file and a migrated one have the same layout.

-- Why a tensorboard-style file name or traceName was not taken as the host
-- (ingest/sql/load/hosts.sql).
ALTER TABLE ranks ADD COLUMN IF NOT EXISTS host_note VARCHAR;

-- The idle split (analyzers/sql/attribution/idle.sql):
-- idle_host_ns + idle_launch_ns + idle_other_ns = idle_ns; NULL for runs attributed before.
-- the host had not launched the GPU op that ends the gap yet
ALTER TABLE step_attribution ADD COLUMN IF NOT EXISTS idle_host_ns BIGINT;
-- short gaps between GPU ops: launch overhead
ALTER TABLE step_attribution ADD COLUMN IF NOT EXISTS idle_launch_ns BIGINT;
-- the rest (launched, not running; CPU-only ranks: all of idle)
ALTER TABLE step_attribution ADD COLUMN IF NOT EXISTS idle_other_ns BIGINT;

-- Idle gaps of GPU step windows and why the GPU waited.
CREATE TABLE IF NOT EXISTS idle_gaps (
    run VARCHAR,
    rank INTEGER,
    step INTEGER,
    start_ns BIGINT,             -- a maximal interval of the window where no GPU op runs
    end_ns BIGINT,
    next_launch_ns BIGINT,       -- start of the runtime call that launched the op ending it
    host_bound_ns BIGINT,
    launch_overhead_ns BIGINT,
    other_ns BIGINT,
    after_sync BOOLEAN,          -- it began as a synchronizing call returned
    loader_ns BIGINT             -- of host_bound_ns: while a DataLoader annotation ran
);

-- What the host ran while the GPU waited for it: self time of each CPU op, annotation,
-- Python frame or runtime call (innermost on its thread) inside the host-bound part of
-- idle gaps.
CREATE TABLE IF NOT EXISTS host_activity (
    run VARCHAR,
    rank INTEGER,
    step INTEGER,
    tid BIGINT,
    name VARCHAR,
    category VARCHAR,            -- cpu_ops.category
    self_ns BIGINT
);

INSERT OR REPLACE INTO stepscope_tables VALUES
    ('idle_gaps', 'analyzers.attribution', true, 5),
    ('host_activity', 'analyzers.attribution', true, 5);

-- Nodes of each run (docs/attribution.md, "Hosts and nodes"), so that nodes x gpus_per_node
-- is the world size: gpus_per_node counts the job's ranks on each node. node_source says
-- which evidence won:
--   host_names         named hosts (not inferred) for every rank of the job, the same
--                      number of ranks on each and no GPU index used twice on one host;
--   host_names_uneven  the same with unequal ranks per host: nodes only (gpus_per_node NULL);
--   device_properties  world size / the GPUs each node has (deviceProperties; the job's
--                      ranks when fewer): a partial rank set, hosts inferred, or named
--                      hosts that put two ranks on one GPU index (names_share_gpus: the
--                      names merge nodes); gpus_per_node NULL when the division leaves a
--                      remainder;
--   NULL               unknown (each rank sees one GPU and no host is named for all).
CREATE OR REPLACE VIEW run_nodes AS
WITH per_host AS (
    SELECT run, host, count(*) AS n, count(device) - count(DISTINCT device) AS reused
    FROM ranks WHERE host IS NOT NULL GROUP BY run, host
), hosts AS (
    SELECT run, count(*) AS hosts, min(n) AS min_n, max(n) AS max_n, sum(reused) AS reused
    FROM per_host GROUP BY run
), job AS (
    SELECT run, coalesce(max(world_size), count(*)) AS world, count(*) AS seen,
        mode(node_gpus) AS node_gpus,
        CASE WHEN count(DISTINCT host_source) > 1 THEN 'mixed' ELSE any_value(host_source) END
            AS host_source,
        bool_and(coalesce(host_source, 'inferred') <> 'inferred') AS named
    FROM ranks GROUP BY run
), pick AS (
    SELECT j.*, h.hosts, h.min_n, h.max_n, coalesce(h.reused, 0) > 0 AS names_share_gpus,
        least(j.node_gpus, j.world) AS per_node,
        CASE
            WHEN j.named AND j.seen >= j.world AND coalesce(h.reused, 0) > 0
                 AND j.node_gpus > 1 THEN 'device_properties'
            WHEN j.named AND j.seen >= j.world AND h.min_n = h.max_n THEN 'host_names'
            WHEN j.named AND j.seen >= j.world THEN 'host_names_uneven'
            WHEN j.node_gpus > 1 OR (j.world = 1 AND j.node_gpus >= 1) THEN 'device_properties'
        END AS node_source
    FROM job j LEFT JOIN hosts h USING (run)
)
SELECT run, world AS world_size, seen AS ranks_seen, node_gpus, coalesce(hosts, 0) AS hosts_seen,
    host_source, node_source, names_share_gpus,
    CASE node_source WHEN 'host_names' THEN max_n
        WHEN 'device_properties' THEN CASE WHEN world % per_node = 0 THEN per_node END
    END AS gpus_per_node,
    CASE node_source WHEN 'device_properties' THEN CAST(ceil(world / per_node) AS INTEGER)
        WHEN 'host_names' THEN hosts WHEN 'host_names_uneven' THEN hosts
    END AS nodes
FROM pick;
