-- Records the schema version $v of the database (docs/schema.md). Writes schema_info.
INSERT OR REPLACE INTO schema_info VALUES ('schema_version', $v)
