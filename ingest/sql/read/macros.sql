-- Macros used while turning one trace file into the rank tables (docs/schema.md lists them).

-- Kineto time in µs -> integer ns, exactly.
-- Text (the exact-text read path) goes through DECIMAL. A DOUBLE is split into its integer
-- part (exact up to 2^53 µs) and its fraction: the fraction of a relative timestamp below
-- 2^43 µs (~100 days) is within 0.5 ns of the printed value, so rounding recovers it.
-- (A DOUBLE -> DECIMAL cast would multiply in floating point and lose the last digits.)
CREATE OR REPLACE TEMP MACRO us_to_ns(x) AS
    CASE WHEN typeof(x) = 'VARCHAR'
         THEN CAST(CAST(CAST(x AS VARCHAR) AS DECIMAL(38, 3)) * 1000 AS BIGINT)
         ELSE CAST(floor(CAST(x AS DOUBLE)) AS BIGINT) * 1000
              + CAST(round((CAST(x AS DOUBLE) - floor(CAST(x AS DOUBLE))) * 1000) AS BIGINT)
    END;

-- First integer inside a string: 'stream 7' -> 7, '25738' -> 25738, 'Spans' -> NULL.
-- Most pids and tids are a plain integer's canonical text, which a cast reads as the regex
-- would (the round trip checks it: '007', '7.5', '1e3' take the regex); only the others
-- pay for the regex.
CREATE OR REPLACE TEMP MACRO leading_int(s) AS
    CASE WHEN CAST(TRY_CAST(CAST(s AS VARCHAR) AS BIGINT) AS VARCHAR) = CAST(s AS VARCHAR)
         THEN TRY_CAST(CAST(s AS VARCHAR) AS BIGINT)
         ELSE TRY_CAST(regexp_extract(CAST(s AS VARCHAR), '(-?\d+)', 1) AS BIGINT) END;

-- Bytes of one element of a c10 ScalarType / gloo type name.
CREATE OR REPLACE TEMP MACRO dtype_size(t) AS
    CASE
        WHEN t IS NULL THEN NULL
        WHEN regexp_matches(lower(t), 'float8|fp8|byte|char|bool|uint8|int8') THEN 1
        WHEN regexp_matches(lower(t), 'bfloat16|half|float16|short|int16') THEN 2
        WHEN regexp_matches(lower(t), 'complexdouble|complex128') THEN 16
        WHEN regexp_matches(lower(t), 'double|float64|long|int64|complexfloat|complex64') THEN 8
        WHEN regexp_matches(lower(t), 'float|int|float32|int32') THEN 4
        ELSE NULL
    END;

-- Canonical collective name from an annotation, a c10d op, a `Collective name`
-- arg or an NCCL kernel name.
CREATE OR REPLACE TEMP MACRO canonical_collective(raw) AS (
    WITH n AS (
        SELECT lower(regexp_replace(
            regexp_replace(coalesce(raw, ''),
                '^(nccl:|gloo:|c10d::|_c10d_functional::|void\s+)', ''),
            '^nccl(symk)?(dev)?kernel_', '', 'i')) AS s
    )
    SELECT CASE
        WHEN raw IS NULL THEN NULL
        WHEN s LIKE 'send %' OR s = 'send' OR s LIKE 'send\_%' ESCAPE '\' THEN 'send'
        WHEN s LIKE 'recv %' OR s = 'recv' OR s LIKE 'recv\_%' ESCAPE '\' THEN 'recv'
        WHEN s LIKE 'sendrecv%' THEN 'send_recv'
        WHEN regexp_matches(s, 'all_?reduce|allreducering|allreducetree') THEN 'all_reduce'
        WHEN regexp_matches(s, 'reduce_?scatter') THEN 'reduce_scatter'
        WHEN regexp_matches(s, 'all_?gather') THEN 'all_gather'
        WHEN regexp_matches(s, 'all_?to_?all') THEN 'all_to_all'
        WHEN regexp_matches(s, 'broadcast') THEN 'broadcast'
        WHEN regexp_matches(s, 'barrier') THEN 'barrier'
        WHEN regexp_matches(s, '^_?reduce') THEN 'reduce'
        WHEN regexp_matches(s, '^_?gather') THEN 'gather'
        WHEN regexp_matches(s, '^_?scatter') THEN 'scatter'
        WHEN regexp_matches(s, 'coalesced') THEN 'coalesced'
        WHEN regexp_matches(s, '^wait') THEN 'wait'
        WHEN regexp_matches(s, '^generic') THEN 'unknown'
        ELSE s
    END FROM n
);

-- The gloo span type that executes a c10d dispatcher op (gloo emulates
-- reduce_scatter with an all_reduce of the full input).
CREATE OR REPLACE TEMP MACRO gloo_span_type(c10d_name) AS
    CASE
        WHEN regexp_matches(c10d_name, 'reduce_scatter|allreduce') THEN 'all_reduce'
        WHEN regexp_matches(c10d_name, 'allgather') THEN 'all_gather'
        WHEN regexp_matches(c10d_name, 'alltoall') THEN 'all_to_all'
        WHEN regexp_matches(c10d_name, 'broadcast') THEN 'broadcast'
        WHEN regexp_matches(c10d_name, 'barrier') THEN 'barrier'
        WHEN regexp_matches(c10d_name, '^c10d::send') THEN 'send'
        WHEN regexp_matches(c10d_name, '^c10d::recv') THEN 'recv'
        WHEN regexp_matches(c10d_name, '^c10d::reduce_') THEN 'reduce'
        WHEN regexp_matches(c10d_name, '^c10d::gather_') THEN 'gather'
        WHEN regexp_matches(c10d_name, '^c10d::scatter_') THEN 'scatter'
        ELSE NULL
    END;

-- Number of elements of one tensor's dims list, e.g. [512, 128] -> 65536; [] -> 1.
CREATE OR REPLACE TEMP MACRO numel(dims) AS
    CASE WHEN dims IS NULL THEN NULL
         ELSE list_reduce(list_prepend(1::BIGINT, CAST(dims AS BIGINT[])), lambda a, b: a * b) END;

-- Split sizes of an all_to_all as written by record_param_comms ("[3, 5, 2]"): the list,
-- or NULL when empty (equal splits), missing or cut short ("[1, 2, ...]").
CREATE OR REPLACE TEMP MACRO split_sizes(txt) AS
    CASE WHEN txt IS NULL OR txt LIKE '%...%' OR NOT regexp_matches(txt, '\d') THEN NULL
         ELSE CAST(regexp_extract_all(txt, '-?\d+') AS BIGINT[]) END;

-- The `args` keys collectives.sql reads (communication metadata), as a narrow struct:
-- carrying the whole `args` struct along costs a scan of every one of its keys. Never
-- NULL itself (testing the whole struct for NULL scans every key too): where that
-- matters, the caller tests `args IS NOT NULL`.
CREATE OR REPLACE TEMP MACRO comm_args(a) AS {
        'Collective name': a."Collective name",
        'Process Group Name': a."Process Group Name",
        'Process Group ID': a."Process Group ID",
        'Process Group Description': a."Process Group Description",
        'Process Group Ranks': a."Process Group Ranks",
        'Group size': a."Group size",
        'dtype': a."dtype",
        'In msg nelems': a."In msg nelems",
        'In msg size': a."In msg size",
        'Out msg nelems': a."Out msg nelems",
        'Out msg size': a."Out msg size",
        'Seq': a."Seq",
        'In split size': a."In split size",
        'Out split size': a."Out split size",
        'Dst Rank': a."Dst Rank",
        'Src Rank': a."Src Rank",
        'Rank': a."Rank"
    };
