-- Compiles one --comm-kernels pattern with DuckDB's RE2 (the engine the reader runs it
-- with), so a bad pattern fails the command up front with one line. Reads nothing.
-- Parameter: $pattern.
SELECT regexp_matches('', $pattern);
