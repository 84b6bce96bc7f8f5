-- Every field of inspector_lines (nccl/inspector_lines.sql) against its declared JSON type
-- and range. $fields (ingest/nccl/inspector_fields.py, check_params): one struct per
-- field: pos, part, key ('' for the part itself), slot (its key's place among its part's
-- keys), kind ('object', 'text', 'int', 'number'), low, high, below (a header key bounding
-- the value, or ''); $header_paths, $metadata_paths, $coll_perf_paths, $p2p_perf_paths:
-- each part's key paths in slot order. An integer lies in [low, high) (exactly, as
-- HUGEINT) and below header.<below> when that is given; a number in [low, high] and
-- finite. A JSON boolean is no integer, a text no number; an integer written without a
-- fraction but beyond 64 bits (2^70) is out of range. Absent or null values are not
-- checked here. One row per (field, problem) found: pos, problem ('type' or 'range'),
-- the count of such lines, the first such line's value (41 characters at most).
-- Reads inspector_lines; writes nothing.
WITH fields AS (
    SELECT unnest($fields, recursive := true)
), parts AS (
    -- Each part with the header of its line (a bound's source), its count of lines and
    -- first line. A header is grouped (a file repeats its few on every line); metadata and
    -- the perf parts differ on every line (timestamps, sequence numbers), so grouping them
    -- only built a hash table of every line's objects (190 MB of 300,000 lines).
    SELECT 'header' AS part, header AS obj, header, count(*) AS lines, min(line) AS line
    FROM inspector_lines WHERE header IS NOT NULL GROUP BY header
    UNION ALL SELECT 'metadata', metadata, header, 1, line FROM inspector_lines
    WHERE metadata IS NOT NULL
    UNION ALL SELECT 'coll_perf', coll_perf, header, 1, line FROM inspector_lines
    WHERE coll_perf IS NOT NULL
    UNION ALL SELECT 'p2p_perf', p2p_perf, header, 1, line FROM inspector_lines
    WHERE p2p_perf IS NOT NULL
), extracted AS (
    -- Each part parsed once: the values of its fields' paths, in $fields' order.
    SELECT part, obj, header, lines, line,
           CASE part WHEN 'header' THEN json_extract(obj, $header_paths)
                     WHEN 'metadata' THEN json_extract(obj, $metadata_paths)
                     WHEN 'coll_perf' THEN json_extract(obj, $coll_perf_paths)
                     ELSE json_extract(obj, $p2p_perf_paths) END AS vals
    FROM parts
), field_values AS (
    SELECT f.pos, f.kind, f.low, f.high, f.below, e.line, e.lines, e.header,
           CASE WHEN f.key = '' THEN e.obj ELSE e.vals[f.slot] END AS v
    FROM extracted e
    JOIN fields f USING (part)
), present AS (
    SELECT pos, kind, low, high, below, line, lines, header, v::VARCHAR AS text
    FROM field_values
    WHERE v IS NOT NULL
), typed AS (
    -- The JSON type from the value's minified text: its first character, and for a
    -- number whether it is written as an integer (no fraction, exponent, NaN, Infinity).
    SELECT pos, kind, low, high, below, line, lines, header, text,
           CASE left(text, 1) WHEN '"' THEN kind = 'text' WHEN '{' THEN kind = 'object'
                              WHEN '[' THEN false WHEN 't' THEN false WHEN 'f' THEN false
                              ELSE kind = 'number' OR (kind = 'int'
                                  AND regexp_full_match(text, '-?[0-9]+')) END AS type_ok,
           CASE WHEN kind = 'int' THEN TRY_CAST(text AS HUGEINT) END AS whole,
           CASE WHEN kind = 'number' THEN TRY_CAST(text AS DOUBLE) END AS real,
           CASE WHEN below <> '' THEN TRY_CAST(
               json_extract(header, '$.' || below)::VARCHAR AS DOUBLE) END AS bound
    FROM present
    WHERE text <> 'null'
), judged AS (
    SELECT pos, line, lines, text,
           CASE WHEN NOT type_ok THEN 'type'
                WHEN kind = 'int' AND NOT coalesce(
                    whole >= CAST(low AS HUGEINT) AND whole < CAST(high AS HUGEINT)
                    AND (bound IS NULL OR whole < bound), false)
                THEN 'range'
                WHEN kind = 'number' AND NOT coalesce(
                    isfinite(real) AND real >= low AND real <= high, false)
                THEN 'range' END AS problem
    FROM typed
)
SELECT pos, problem, sum(lines) AS lines, left(arg_min(text, line), 41) AS first_value
FROM judged
WHERE problem IS NOT NULL
GROUP BY pos, problem
ORDER BY pos, problem DESC
