-- The `runs` row of an ingest (docs/schema.md), written last, in the ingest's transaction.
-- Reads nothing; writes runs. Parameters: $run, $ingested_at, $status, $world_size,
-- $n_ranks, $n_files, $sources, $failed, $version, $rank_subset.
INSERT INTO runs (run, ingested_at, status, world_size, n_ranks, n_files, sources,
                  failed_files, stepscope_version, rank_subset)
VALUES ($run, $ingested_at, $status, $world_size, $n_ranks, $n_files, $sources, $failed,
        $version, $rank_subset)
