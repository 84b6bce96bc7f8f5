-- After an upload: the temporary upload folder $prefix in the stored file names of run $run
-- becomes $label (e.g. 'upload:'), so the run lists 'upload:rank3.json.gz' and not a path
-- that no longer exists (ingest.runs.relabel_files). Writes runs.sources,
-- runs.failed_files and the source_file column of ranks and of the NCCL tables.
UPDATE runs
SET sources = replace(CAST(sources AS VARCHAR), $prefix, $label),
    failed_files = replace(CAST(failed_files AS VARCHAR), $prefix, $label)
WHERE run = $run;
UPDATE ranks SET source_file = replace(source_file, $prefix, $label) WHERE run = $run;
UPDATE nccl_sources SET source_file = replace(source_file, $prefix, $label) WHERE run = $run;
UPDATE nccl_processes SET source_file = replace(source_file, $prefix, $label) WHERE run = $run;
UPDATE nccl_comms SET source_file = replace(source_file, $prefix, $label) WHERE run = $run;
UPDATE nccl_channels SET source_file = replace(source_file, $prefix, $label) WHERE run = $run;
UPDATE nccl_warnings SET source_file = replace(source_file, $prefix, $label) WHERE run = $run;
UPDATE nccl_ops SET source_file = replace(source_file, $prefix, $label) WHERE run = $run;
