-- Records the schema version $v of the database (docs/schema.md), in the transaction of
-- the migration that reached it. Writes schema_info.
INSERT OR REPLACE INTO schema_info VALUES ('schema_version', $v)
