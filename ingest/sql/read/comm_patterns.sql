-- The communication-kernel patterns of this read (ingest/comm_kernels.py: the user's
-- --comm-kernels file first, then ingest/data/comm_kernels.json) as the temp table
-- comm_patterns, one row per pattern; lower priority wins. Read by rank_tables.sql.
-- Parameter: $patterns, a list of {priority, pattern, library, collective, op, role}.
CREATE OR REPLACE TEMP TABLE comm_patterns AS
SELECT CAST(p.priority AS INTEGER) AS priority, CAST(p.pattern AS VARCHAR) AS pattern,
       CAST(p.library AS VARCHAR) AS library, CAST(p.collective AS VARCHAR) AS collective,
       CAST(p.op AS VARCHAR) AS op, CAST(p.role AS VARCHAR) AS role
FROM (SELECT unnest($patterns) AS p);
