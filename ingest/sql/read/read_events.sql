-- Reads one trace's `traceEvents` array into the temp table raw_events (one row per
-- event, in file order), keeping only the event fields and `args` keys stepscope uses.
-- Reads the JSON file $path (written by ingest/reader.py: the events array alone).
-- Parameters: $path; $max_object, the largest event in bytes (the file's size, at most
-- 256 MiB: ingest/json_read.py); $ts_type, the type `ts` is read as: 'DOUBLE' (fast path) or
-- 'VARCHAR' (exact path: microsecond timestamps with more digits than a double holds,
-- parsed to integer nanoseconds in rank_tables.sql).
-- `args` scalars are read as text and cast with TRY_CAST where used: their JSON type
-- differs between eras (e.g. ROCm's "stream": "0x0"). Shapes, dtypes and concrete inputs
-- stay JSON; all_to_all keeps its split sizes. The args of `[memory]` instants
-- (profile_memory: Addr, Bytes, Total Allocated / Reserved, Device Type / Id) are not
-- here: read/memory_bytes.sql reads them in a second, narrow read, only from a trace
-- that has such events (each key in this struct costs ~1 ms per 100k events).
-- has_args: whether the event has `args` at all, taken while the struct is in memory
-- (testing the stored struct for NULL later scans every one of its keys).
CREATE OR REPLACE TEMP TABLE raw_events AS
SELECT *, args IS NOT NULL AS has_args
FROM read_json($path, format = 'array', maximum_object_size = $max_object, columns = {
    'ph': 'VARCHAR', 'cat': 'VARCHAR', 'name': 'VARCHAR', 'pid': 'VARCHAR', 'tid': 'VARCHAR',
    'ts': $ts_type, 'dur': 'DOUBLE',
    'args': 'STRUCT("External id" VARCHAR, "correlation" VARCHAR, "device" VARCHAR,
                    "stream" VARCHAR, "Sequence number" VARCHAR, "Fwd thread id" VARCHAR,
                    "Record function id" VARCHAR, "Collective name" VARCHAR,
                    "In msg nelems" VARCHAR, "Out msg nelems" VARCHAR, "In msg size" VARCHAR,
                    "Out msg size" VARCHAR, "Group size" VARCHAR, "dtype" VARCHAR,
                    "Process Group Name" VARCHAR, "Process Group Description" VARCHAR,
                    "Process Group Ranks" VARCHAR, "Process Group ID" VARCHAR, "Seq" VARCHAR,
                    "Rank" VARCHAR, "Src Rank" VARCHAR, "Dst Rank" VARCHAR, "bytes" VARCHAR,
                    "name" VARCHAR, "graph id" VARCHAR, "graph node id" VARCHAR,
                    "Input Dims" JSON, "Input type" JSON,
                    "Concrete Inputs" JSON, "In split size" VARCHAR, "Out split size" VARCHAR)'
});
