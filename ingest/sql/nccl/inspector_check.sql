-- Every field of inspector_lines (nccl/inspector_lines.sql) against its declared JSON type
-- and range ($fields: ingest/nccl/inspector_fields.py, one struct per field: pos, part,
-- key ('' for the part itself), kind ('object', 'text', 'int', 'number'), low, high,
-- below (a header key bounding the value, or '')): an integer lies in [low, high) (exactly,
-- as HUGEINT) and below header.<below> when that is given, a number in [low, high] and
-- finite. One row per (field, problem) found:
-- pos, problem ('type' or 'range'), the count of such lines, the first line's value.
-- A JSON boolean is no integer, a text no number; an integer written without a fraction
-- but beyond 64 bits (2^70) is out of range. Absent or null values are not checked here.
-- Reads inspector_lines; writes nothing.
WITH fields AS (
    SELECT unnest($fields, recursive := true)
), field_values AS (
    SELECT f.pos, f.kind, f.low, f.high, l.line,
           CASE WHEN f.key = '' THEN p.obj ELSE json_extract(p.obj, '$.' || f.key) END AS v,
           CASE WHEN f.below <> '' THEN TRY_CAST(
               json_extract(l.header, '$.' || f.below)::VARCHAR AS DOUBLE) END AS bound
    FROM inspector_lines l
    CROSS JOIN fields f
    CROSS JOIN LATERAL (SELECT CASE f.part WHEN 'header' THEN l.header
                                           WHEN 'metadata' THEN l.metadata
                                           WHEN 'coll_perf' THEN l.coll_perf
                                           ELSE l.p2p_perf END AS obj) p
), typed AS (
    SELECT pos, kind, low, high, line, v::VARCHAR AS text, bound,
           json_type(v) AS t,
           CASE kind WHEN 'object' THEN json_type(v) = 'OBJECT'
                     WHEN 'text' THEN json_type(v) = 'VARCHAR'
                     WHEN 'int' THEN json_type(v) IN ('BIGINT', 'UBIGINT')
                         OR (json_type(v) = 'DOUBLE'
                             AND regexp_full_match(v::VARCHAR, '-?[0-9]+'))
                     ELSE json_type(v) IN ('BIGINT', 'UBIGINT', 'DOUBLE') END AS type_ok
    FROM field_values
    WHERE v IS NOT NULL AND json_type(v) <> 'NULL'
), judged AS (
    SELECT pos, line, text,
           CASE WHEN NOT type_ok THEN 'type'
                WHEN kind = 'int' AND NOT coalesce(
                    TRY_CAST(text AS HUGEINT) >= CAST(low AS HUGEINT)
                    AND TRY_CAST(text AS HUGEINT) < CAST(high AS HUGEINT)
                    AND (bound IS NULL OR TRY_CAST(text AS HUGEINT) < bound), false)
                THEN 'range'
                WHEN kind = 'number' AND NOT coalesce(
                    isfinite(TRY_CAST(text AS DOUBLE)) AND TRY_CAST(text AS DOUBLE) >= low
                    AND TRY_CAST(text AS DOUBLE) <= high, false)
                THEN 'range' END AS problem
    FROM typed
)
SELECT pos, problem, count(*) AS lines, left(arg_min(text, line), 41) AS first_value
FROM judged
WHERE problem IS NOT NULL
GROUP BY pos, problem
ORDER BY pos, problem DESC
