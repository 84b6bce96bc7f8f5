-- The world size of run $run: the largest distributedInfo.world_size of its ranks, else
-- (no Kineto trace says) the largest process group its Flight Recorder dumps name; NULL
-- when neither. Reads ranks, fr_groups; writes nothing. Parameter: $run.
SELECT coalesce(
    (SELECT max(world_size) FROM ranks WHERE run = $run),
    (SELECT max(len(ranks)) FROM fr_groups WHERE run = $run)) AS world_size
