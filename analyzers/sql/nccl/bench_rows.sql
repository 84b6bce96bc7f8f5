-- The result rows of nccl-tests table $bench of file $file in run $run, by size then
-- placement (out-of-place first). Reads nccl_bench; writes nothing.
SELECT size_bytes, dtype, in_place, time_us, algbw_gbs, busbw_gbs
FROM nccl_bench
WHERE run = $run AND source_file = $file AND bench = $bench
ORDER BY line_no, in_place
