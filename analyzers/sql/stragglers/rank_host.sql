-- The host of rank $rank of run $run (no row when the rank is unknown). Reads ranks;
-- writes nothing.
SELECT host FROM ranks WHERE run = $run AND rank = $rank
