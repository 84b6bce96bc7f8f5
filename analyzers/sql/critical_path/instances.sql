-- The collective instance of each member node of the critical-path graph and the
-- instance's transfer time (its shortest member's duration: the last to arrive), once
-- every batch of critical_path/graph.sql has added its keys to cp_keys: the one cross-rank
-- part of the graph. An instance has at least two members; instances are numbered densely
-- in the order of their keys. Reads cp_keys; writes nothing. Ordered by node.
WITH sized AS (
    SELECT *, count(*) OVER (PARTITION BY ikey) AS n_members FROM cp_keys
), member AS (
    SELECT node, dense_rank() OVER (ORDER BY ikey) - 1 AS inst, dur
    FROM sized WHERE n_members > 1
)
SELECT node, inst, min(dur) OVER (PARTITION BY inst) AS inst_t FROM member ORDER BY node;
