-- The size of the current database file as its header records it: used_blocks and
-- block_size (pragma_database_size()). A file shorter than its three 4 KiB headers plus
-- used_blocks * block_size is truncated (ingest.db; free blocks may lie past the file's
-- end, used ones cannot). Reads the header; writes nothing; no parameters.
SELECT used_blocks, block_size FROM pragma_database_size()
WHERE database_name = current_database()
