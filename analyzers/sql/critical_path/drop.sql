-- Drops the temporary tables of critical_path/graph.sql once the graph is read (they
-- would otherwise hold DuckDB memory for the rest of the report). Reads nothing; writes
-- (drops) cp_raw, cp_keys, cp_syncs, cp_cand, cp_inferred, cp_edges, cp_windows, cp_nodes.
DROP TABLE IF EXISTS cp_raw;
DROP TABLE IF EXISTS cp_keys;
DROP TABLE IF EXISTS cp_syncs;
DROP TABLE IF EXISTS cp_cand;
DROP TABLE IF EXISTS cp_inferred;
DROP TABLE IF EXISTS cp_edges;
DROP TABLE IF EXISTS cp_windows;
DROP TABLE IF EXISTS cp_nodes;
