-- Every run in the database, by name. Reads runs; writes nothing; no parameters.
SELECT run FROM runs ORDER BY run
