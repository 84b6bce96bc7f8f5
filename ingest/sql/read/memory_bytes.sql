-- Fills out_memory_events.bytes (memory_events.sql) from a second read of the events file,
-- run only when the trace has `[memory]` events: their `Bytes` arg cannot sit in the
-- `args` struct of read_events.sql beside the memcpy's `bytes` (DuckDB struct keys ignore
-- case, JSON keys do not). Row positions are the same as raw_events' (file order).
-- Reads $path (the events file read_events.sql read); writes out_memory_events.
CREATE OR REPLACE TEMP TABLE mem_args AS
SELECT name, args."Bytes" AS bytes_text
FROM read_json($path, format = 'array', maximum_object_size = 268435456,
               columns = {'name': 'VARCHAR', 'args': 'STRUCT("Bytes" VARCHAR)'});

UPDATE out_memory_events SET bytes = b.bytes
FROM (SELECT rowid AS event_id, TRY_CAST(bytes_text AS BIGINT) AS bytes FROM mem_args
      WHERE name = '[memory]') b
WHERE b.event_id = out_memory_events.event_id;

DROP TABLE mem_args;
