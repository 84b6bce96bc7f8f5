-- Appends one batch of parsed ranks to the run (ingest/loader.py, after ingest/tasks.py).
-- Reads:  the Parquet files of the batch, one per table and accepted rank (written by
--         ingest/reader.py from the out_* tables);
--         staged_files (registered by the loader): file VARCHAR (a Parquet path, as in
--         the lists), rank INTEGER;
--         staged_rank_rows (registered): the batch's `ranks` rows.
-- Writes: the rank tables of docs/schema.md and ranks; the batch's process groups go to the
--         temp table staged_process_groups (load/stage_groups.sql), from which
--         load/process_groups.sql keeps each pg_name once per run (its lowest rank's row),
--         so the rows kept do not depend on how the ranks were batched.
-- Parameters: $run, and per table a list of Parquet paths named after it (cpu_ops_files,
-- ...): a list, not a glob, so no folder name is ever read as a pattern.
-- Every accepted task writes every table (with zero rows where the trace has none).

INSERT INTO cpu_ops BY NAME
SELECT $run AS run, m.rank AS rank, p.* EXCLUDE (filename)
FROM read_parquet($cpu_ops_files, filename = true, union_by_name = true) p
JOIN staged_files m ON m.file = p.filename;

INSERT INTO gpu_ops BY NAME
SELECT $run AS run, m.rank AS rank, p.* EXCLUDE (filename)
FROM read_parquet($gpu_ops_files, filename = true, union_by_name = true) p
JOIN staged_files m ON m.file = p.filename;

INSERT INTO gpu_annotations BY NAME
SELECT $run AS run, m.rank AS rank, p.* EXCLUDE (filename)
FROM read_parquet($gpu_annotations_files, filename = true, union_by_name = true) p
JOIN staged_files m ON m.file = p.filename;

INSERT INTO steps BY NAME
SELECT $run AS run, m.rank AS rank, p.* EXCLUDE (filename)
FROM read_parquet($steps_files, filename = true, union_by_name = true) p
JOIN staged_files m ON m.file = p.filename;

INSERT INTO threads BY NAME
SELECT $run AS run, m.rank AS rank, p.* EXCLUDE (filename)
FROM read_parquet($threads_files, filename = true, union_by_name = true) p
JOIN staged_files m ON m.file = p.filename;

INSERT INTO collectives BY NAME
SELECT $run AS run, m.rank AS rank, p.* EXCLUDE (filename)
FROM read_parquet($collectives_files, filename = true, union_by_name = true) p
JOIN staged_files m ON m.file = p.filename;

INSERT INTO staged_process_groups BY NAME
SELECT $run AS run, m.rank AS rank, p.* EXCLUDE (filename)
FROM read_parquet($process_groups_files, filename = true, union_by_name = true) p
JOIN staged_files m ON m.file = p.filename;

INSERT INTO ranks BY NAME SELECT * FROM staged_rank_rows;
