-- The first event of the events file $path whose `ts`, `dur` or `args` has a type the
-- event read (read_events.sql) cannot take: `ts` and `dur` must be numbers (or the text
-- of a number as that read takes it; on the exact path, $exact, `ts` text must be a
-- decimal), `args` an
-- object. Run only after that read failed, to say which event and field it was: every
-- field is read as JSON here, which never fails. Reads $path; parameters $path, $max_object
-- (ingest/json_read.py), $exact.
-- The events go through a temp table (bad_field_events, in file order: its rowid is the
-- event's position, as raw_events'), holding `args` only where it is no object.
-- One row (n: the event's 1-based position in traceEvents, its name, the field, the
-- value's JSON type and its text shortened to 40 characters), or none.
CREATE OR REPLACE TEMP TABLE bad_field_events AS
SELECT name, ts, dur, CASE WHEN json_type(args) <> 'OBJECT' THEN args END AS args
FROM read_json($path, format = 'array', maximum_object_size = $max_object,
               columns = {'name': 'JSON', 'ts': 'JSON', 'dur': 'JSON', 'args': 'JSON'});

WITH e AS (
    SELECT rowid + 1 AS n, name, ts, dur, args FROM bad_field_events
), bad AS (
    SELECT n, name, field, value FROM (
        SELECT n, name, 1 AS o, 'ts' AS field, ts AS value FROM e
        UNION ALL SELECT n, name, 2, 'dur', dur FROM e
        UNION ALL SELECT n, name, 3, 'args', args FROM e)
    WHERE value IS NOT NULL AND json_type(value) <> 'NULL' AND CASE
        WHEN field = 'args' THEN json_type(value) <> 'OBJECT'
        WHEN json_type(value) IN ('BIGINT', 'UBIGINT', 'DOUBLE', 'BOOLEAN')
            THEN $exact AND field = 'ts' AND json_type(value) = 'BOOLEAN'
        WHEN json_type(value) = 'VARCHAR' AND $exact AND field = 'ts'
            THEN TRY_CAST(value ->> '$' AS DOUBLE) IS NULL
                 OR TRY_CAST(value ->> '$' AS DECIMAL(38, 3)) IS NULL
        -- the events reader's own cast (json_transform_strict), stricter than TRY_CAST:
        -- no blank after the digits, no '+', '_' or leading zeros (" 1000 ", "+5")
        WHEN json_type(value) = 'VARCHAR'
            THEN TRY(json_transform_strict(value, '"DOUBLE"')) IS NULL
        ELSE true END
    ORDER BY n, o
    LIMIT 1
)
SELECT n,
    CASE WHEN json_type(name) = 'VARCHAR' THEN name ->> '$' END AS name,
    field,
    json_type(value) AS json_type,
    CASE WHEN length(CAST(value AS VARCHAR)) > 40
         THEN left(CAST(value AS VARCHAR), 39) || '…' ELSE CAST(value AS VARCHAR) END AS text
FROM bad;
