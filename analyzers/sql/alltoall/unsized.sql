-- all_to_all calls of run $run in complete steps whose sizes the traces do not give
-- (kernels of the communication-kernel table such as DeepEP's, annotations without
-- collective args), by library. Reads collectives, complete_steps. Parameter: $run.
SELECT coalesce(c.library, 'nccl') AS library, count(*) AS calls
FROM collectives c
JOIN complete_steps s ON s.run = c.run AND s.rank = c.rank AND s.step = c.step
WHERE c.run = $run AND c.collective = 'all_to_all'
  AND (c.in_bytes IS NULL OR c.out_bytes IS NULL)
GROUP BY 1 ORDER BY 2 DESC;
