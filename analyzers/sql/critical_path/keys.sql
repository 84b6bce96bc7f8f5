-- Starts the collective-instance keys of a graph build (analyzers/critical_path/graph.py): the empty
-- temporary table cp_keys, to which each batch of critical_path/graph.sql appends its
-- members (node, instance key, duration). Reads nothing; writes cp_keys.
CREATE OR REPLACE TEMP TABLE cp_keys (node BIGINT, ikey VARCHAR, dur BIGINT);
