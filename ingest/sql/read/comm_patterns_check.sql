-- Compiles every --comm-kernels pattern at once with DuckDB's RE2 (a pattern read from a
-- column compiles per row): the file's check is one query however many patterns it has;
-- only when this fails is each pattern compiled alone, to name the bad one. Reads
-- nothing. Parameter: $patterns, a list of text.
SELECT count(*) FILTER (WHERE regexp_matches('', p)) FROM unnest($patterns) AS t(p);
