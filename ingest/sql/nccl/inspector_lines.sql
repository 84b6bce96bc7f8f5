-- The lines of one NCCL Inspector JSONL file ($path; $compression: 'gzip' or 'none') into
-- the temporary table inspector_lines, each part kept as JSON, untyped: the types and
-- ranges are checked by nccl/inspector_check.sql before nccl/inspector_read.sql casts.
-- Reads the file; writes only the connection's temporary table.
CREATE TEMP TABLE inspector_lines AS
SELECT row_number() OVER () AS line, header, metadata, coll_perf, p2p_perf
FROM read_json($path, format = 'newline_delimited', columns = {
        'header': 'JSON', 'metadata': 'JSON', 'coll_perf': 'JSON', 'p2p_perf': 'JSON'
    }, compression = $compression, maximum_object_size = 16777216)
