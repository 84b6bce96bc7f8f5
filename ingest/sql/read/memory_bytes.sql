-- Fills the args columns of out_memory_events (memory_events.sql: device_type, device_id,
-- addr, bytes, total_allocated, total_reserved) from a second, narrow read of the events
-- file, run only when the trace has `[memory]` events: their keys are read here rather
-- than in read_events.sql's `args` struct, where each costs every trace ~1 ms per 100k
-- events; and `Bytes` cannot sit there beside the memcpy's `bytes` anyway (DuckDB struct
-- keys ignore case, JSON keys do not). Row positions are the same as raw_events' (file
-- order). Reads $path (the events file read_events.sql read; $max_object as there);
-- writes out_memory_events.
CREATE OR REPLACE TEMP TABLE mem_args AS
SELECT name, args
FROM read_json($path, format = 'array', maximum_object_size = $max_object,
               columns = {'name': 'VARCHAR',
                          'args': 'STRUCT("Bytes" VARCHAR, "Addr" VARCHAR,
                                          "Total Allocated" VARCHAR, "Total Reserved" VARCHAR,
                                          "Device Type" VARCHAR, "Device Id" VARCHAR)'});

UPDATE out_memory_events SET
    device_type = b.device_type, device_id = b.device_id, addr = b.addr, bytes = b.bytes,
    total_allocated = b.total_allocated, total_reserved = b.total_reserved
FROM (SELECT rowid AS event_id,
             TRY_CAST(args."Device Type" AS INTEGER) AS device_type,
             TRY_CAST(args."Device Id" AS INTEGER) AS device_id,
             TRY_CAST(args."Addr" AS BIGINT) AS addr,
             TRY_CAST(args."Bytes" AS BIGINT) AS bytes,
             TRY_CAST(args."Total Allocated" AS BIGINT) AS total_allocated,
             TRY_CAST(args."Total Reserved" AS BIGINT) AS total_reserved
      FROM mem_args WHERE name = '[memory]') b
WHERE b.event_id = out_memory_events.event_id;

DROP TABLE mem_args;
