-- Forgets the attribution's scratch folder (attribution/scratch.sql) once its files are
-- removed, so that no later statement reads a stale path. Writes the variable only; no
-- parameters.
RESET VARIABLE stepscope_scratch
