-- Attaches the database file a writer opens (ingest.db.connect_write: the connection
-- itself is in memory) as `stepscope`, with row groups of $rows rows instead of DuckDB's
-- 122,880: DuckDB keeps the uncommitted run's last, partly filled row group of each table
-- in memory until the commit, so smaller groups keep the ingest's memory flat in ranks
-- (docs/scale.md). Reads the file's catalog; writes nothing. Parameters: $path, $rows.
ATTACH $path AS stepscope (ROW_GROUP_SIZE $rows)
