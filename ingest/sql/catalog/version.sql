-- The schema version recorded in schema_info (text; NULL when the key is absent).
-- Reads schema_info; writes nothing; no parameters.
SELECT max(value) AS version FROM schema_info WHERE key = 'schema_version'
