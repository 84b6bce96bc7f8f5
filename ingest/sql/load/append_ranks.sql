-- Appends one batch of parsed ranks to the run (ingest/writer.py, after ingest/tasks.py).
-- Reads:  the Parquet files of the batch, one per table and accepted rank (written by
--         ingest/reader.py from the out_* tables);
--         $staged_files and $staged_ranks: every Parquet path of the batch (as in the
--         per-table lists) and its rank, zipped in each statement (no temp table: DuckDB
--         keeps every temp table created inside a transaction until its commit, ~270 KB
--         each however small, and one per batch grew the writer with the ranks);
--         $rank_rows: the batch's `ranks` rows, a list of structs named like its columns
--         (plain query parameters: the writer loads neither Arrow nor pandas).
-- Writes: the rank tables of docs/schema.md and ranks; the batch's process groups go to the
--         temp table staged_process_groups (load/stage_groups.sql), one row per pg_name
--         (the lowest rank's so far), which load/process_groups.sql moves to
--         process_groups, so the rows kept do not depend on how the ranks were batched.
-- Parameters: $run, the three above, and per table a list of Parquet paths named after it (cpu_ops_files,
-- ...): a list, not a glob, so no folder name is ever read as a pattern.
-- Every accepted task writes every table (with zero rows where the trace has none).

INSERT INTO cpu_ops BY NAME
SELECT $run AS run, m.rank AS rank, p.* EXCLUDE (filename)
FROM read_parquet($cpu_ops_files, filename = true, union_by_name = true) p
JOIN (SELECT unnest($staged_files) AS file,
             CAST(unnest($staged_ranks) AS INTEGER) AS rank) m ON m.file = p.filename;

INSERT INTO gpu_ops BY NAME
SELECT $run AS run, m.rank AS rank, p.* EXCLUDE (filename)
FROM read_parquet($gpu_ops_files, filename = true, union_by_name = true) p
JOIN (SELECT unnest($staged_files) AS file,
             CAST(unnest($staged_ranks) AS INTEGER) AS rank) m ON m.file = p.filename;

INSERT INTO gpu_annotations BY NAME
SELECT $run AS run, m.rank AS rank, p.* EXCLUDE (filename)
FROM read_parquet($gpu_annotations_files, filename = true, union_by_name = true) p
JOIN (SELECT unnest($staged_files) AS file,
             CAST(unnest($staged_ranks) AS INTEGER) AS rank) m ON m.file = p.filename;

INSERT INTO steps BY NAME
SELECT $run AS run, m.rank AS rank, p.* EXCLUDE (filename)
FROM read_parquet($steps_files, filename = true, union_by_name = true) p
JOIN (SELECT unnest($staged_files) AS file,
             CAST(unnest($staged_ranks) AS INTEGER) AS rank) m ON m.file = p.filename;

INSERT INTO threads BY NAME
SELECT $run AS run, m.rank AS rank, p.* EXCLUDE (filename)
FROM read_parquet($threads_files, filename = true, union_by_name = true) p
JOIN (SELECT unnest($staged_files) AS file,
             CAST(unnest($staged_ranks) AS INTEGER) AS rank) m ON m.file = p.filename;

INSERT INTO collectives BY NAME
SELECT $run AS run, m.rank AS rank, p.* EXCLUDE (filename)
FROM read_parquet($collectives_files, filename = true, union_by_name = true) p
JOIN (SELECT unnest($staged_files) AS file,
             CAST(unnest($staged_ranks) AS INTEGER) AS rank) m ON m.file = p.filename;

INSERT INTO memory_events BY NAME
SELECT $run AS run, m.rank AS rank, p.* EXCLUDE (filename)
FROM read_parquet($memory_events_files, filename = true, union_by_name = true) p
JOIN (SELECT unnest($staged_files) AS file,
             CAST(unnest($staged_ranks) AS INTEGER) AS rank) m ON m.file = p.filename;

-- Process groups: every rank's trace lists every group of the job, so the batch keeps
-- one row per group (its lowest rank's), and a staged row gives way to a lower rank's:
-- the staging table holds one row per group, not one per group and rank (at 1,024 ranks
-- ~600 groups each: 600k rows and their rank lists otherwise).
DELETE FROM staged_process_groups s USING (
 SELECT $run AS run, m.rank AS rank, p.* EXCLUDE (filename)
 FROM read_parquet($process_groups_files, filename = true, union_by_name = true) p
 JOIN (SELECT unnest($staged_files) AS file,
              CAST(unnest($staged_ranks) AS INTEGER) AS rank) m ON m.file = p.filename
 QUALIFY row_number() OVER (PARTITION BY p.pg_name ORDER BY m.rank) = 1) b
WHERE s.pg_name = b.pg_name AND b.rank < s.rank;

INSERT INTO staged_process_groups BY NAME
SELECT * FROM (
 SELECT $run AS run, m.rank AS rank, p.* EXCLUDE (filename)
 FROM read_parquet($process_groups_files, filename = true, union_by_name = true) p
 JOIN (SELECT unnest($staged_files) AS file,
              CAST(unnest($staged_ranks) AS INTEGER) AS rank) m ON m.file = p.filename
 QUALIFY row_number() OVER (PARTITION BY p.pg_name ORDER BY m.rank) = 1) b
WHERE NOT EXISTS (SELECT 1 FROM staged_process_groups s WHERE s.pg_name = b.pg_name);

INSERT INTO ranks BY NAME SELECT unnest($rank_rows, recursive := true);
