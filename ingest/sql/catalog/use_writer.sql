-- Makes the attached database file (catalog/attach_writer.sql) the connection's default,
-- so every query names its tables without a database, as on a reader's connection.
-- Reads and writes nothing; no parameters.
USE stepscope
