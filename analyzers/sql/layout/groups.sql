-- Process-group descriptions and sizes of run $run (the layout reads TP/PP/DP/CP/EP
-- from Megatron-style descriptions). Reads process_groups. Parameter: $run.
SELECT pg_desc, size FROM process_groups WHERE run = $run;
