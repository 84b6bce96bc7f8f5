-- One NCCL evidence file's row: inserts the registered one-row Arrow table `staged_source`
-- (columns by name) into nccl_sources. Writes nccl_sources; no parameters.
INSERT INTO nccl_sources BY NAME SELECT * FROM staged_source
