-- Every job with nightly history, sorted. Reads history; writes nothing; no parameters.
SELECT DISTINCT job FROM history ORDER BY 1
