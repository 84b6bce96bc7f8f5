-- Ranks of run $run with at least one Flight Recorder entry (collective or P2P) not
-- completed: what was in flight. Reads fr_entries; writes nothing.
SELECT DISTINCT rank FROM fr_entries WHERE run = $run AND state <> 'completed'
