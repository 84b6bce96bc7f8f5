-- The attribution's per-batch scratch (analyzers/breakdown/attribution.py): attribution.sql and
-- idle.sql write each intermediate result a later statement of the batch reads (a_tree,
-- a_timeline, a_intervals, a_windows, a_segments, a_coll_parts, i_gaps, i_hwin) as a
-- Parquet file in the folder $dir, `COPY (...) TO (a_scratch_file('a_windows'))`, and
-- read it back as `a_scratch('a_windows')`; the next batch overwrites it.
-- Why files and not temporary tables: the attribution runs inside the ingest's
-- transaction, and DuckDB keeps every temporary table created or replaced there, with
-- ~50 KB of bookkeeping outside its buffer pool, until the commit; 14 tables per batch
-- of 64 ranks made the writer grow with the ranks, and the commit ran out of memory at
-- 2,048 (benchmarks/README.md). A file written by COPY is not part of the transaction.
-- Writes the variable stepscope_scratch and two temporary macros; parameters: $dir.
SET VARIABLE stepscope_scratch = $dir;

CREATE OR REPLACE TEMP MACRO a_scratch_file(name) AS
    getvariable('stepscope_scratch') || '/' || name || '.parquet';

CREATE OR REPLACE TEMP MACRO a_scratch(name) AS TABLE
    FROM read_parquet(a_scratch_file(name));
