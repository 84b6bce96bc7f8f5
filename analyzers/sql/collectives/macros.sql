-- The collectives' shared definitions, as temporary macros (analyzers._sql.install_macros;
-- allowed on read-only connections). Used by collectives/stats.sql (the report's
-- communication table), planner/collective_classes.sql and planner/link_fit.sql (the
-- planner's calibration) and alltoall/calls.sql, so that a collective's group, its link
-- tier and its bus bytes are the same wherever they are read.

-- group_label(pg_desc, source, library, comm_op, group_size): the name a collective's group
-- is reported under: the process group's description, else (kernels of the
-- communication-kernel table, which have no process group) library and op
-- ('deepep dispatch'), else 'group of N', else 'unknown group'.
CREATE OR REPLACE TEMP MACRO group_label(pg_desc, source, library, comm_op, group_size) AS
    CASE WHEN pg_desc IS NULL OR pg_desc IN ('undefined', '')
         THEN CASE WHEN source = 'comm_kernel' THEN library || ' ' || comm_op
                   WHEN group_size IS NULL THEN 'unknown group'
                   ELSE 'group of ' || group_size END
         ELSE pg_desc END;

-- group_hosts(run_name): per process group of run `run_name`, how many distinct hosts its
-- member ranks sit on (ranks without a host are left out). Reads process_groups, ranks.
CREATE OR REPLACE TEMP MACRO group_hosts(run_name) AS TABLE
    SELECT p.pg_name, count(DISTINCT h.host) AS hosts
    FROM process_groups p, unnest(p.ranks) AS u(r)
    JOIN ranks h ON h.run = run_name AND h.rank = u.r
    WHERE p.run = run_name AND h.host IS NOT NULL
    GROUP BY p.pg_name;

-- crosses_nodes(hosts, group_size, gpus_per_node): whether a group's traffic leaves the
-- node: its ranks sit on more than one host, or it is larger than one node's GPUs
-- whatever the host names say.
CREATE OR REPLACE TEMP MACRO crosses_nodes(hosts, group_size, gpus_per_node) AS
    coalesce(hosts, 1) > 1 OR coalesce(group_size > gpus_per_node, false);

-- bus_factor(collective, group_size): nccl-tests' bus bytes per message byte: 2(n-1)/n
-- for all_reduce, (n-1)/n for all_gather, reduce_scatter and all_to_all, 1 otherwise
-- (broadcast, reduce).
CREATE OR REPLACE TEMP MACRO bus_factor(collective, group_size) AS
    CASE WHEN collective = 'all_reduce' THEN 2.0 * (group_size - 1) / group_size
         WHEN collective IN ('all_gather', 'reduce_scatter', 'all_to_all')
             THEN 1.0 * (group_size - 1) / group_size
         ELSE 1.0 END;
