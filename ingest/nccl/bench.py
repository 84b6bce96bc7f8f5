"""nccl-tests output in a log: its result tables and `# Avg bus bandwidth` lines
(docs/schema.md, `nccl_bench`, `nccl_bench_summary`).

nccl-tests (`all_reduce_perf`, `sendrecv_perf`, ...) print into the same output as
NCCL_DEBUG (nccl-tests src/util.cu, v2.10-2.19):

    # Collective test starting: all_reduce_perf                      (>= 2.17)
    #  Rank  0 Group  0 Pid 4063850 on   lrdn2296 device  0 [0000:1d:00] NVIDIA A100-SXM-64GB
    #       size         count      type   redop    root     time   algbw   busbw #wrong ...
           8             2     float     sum      -1     9.85    0.00    0.00      0 ...
    # Avg bus bandwidth    : 24.3607

A row is `%12li  %12li  %8s  %6s  %6i` (size, count, type, redop, root; no root column
before 2.10) then, out-of-place and in-place, `%7s  %6s  %6s  %6g|N/A` (time in us,
algbw and busbw in GB/s, wrong elements; `%5.0le` errors before 2.10). Each table header
starts a table (`bench`, 1, 2, ... in the file); the device lines and test name before
it and the average after it belong to it. Rows are taken only after a table header, so
a numeric line elsewhere in a job's stdout is never one. The per-iteration columns of
`-I 1` and the time stamps of `-T` are other shapes and are not read.
"""

from __future__ import annotations

import polars as pl

_NUM = r"(?:\d{1,20}(?:\.\d{1,20})?(?:[eE][+-]?\d{1,3})?)"
_WRONG = rf"(?:N/A|{_NUM})"
HEADER = r"^#\s+size\s+count\s+type\s+redop"
ROW = (rf"^\s*(\d{{1,20}})\s+(\d{{1,20}})\s+([A-Za-z0-9_]{{1,24}})\s+([A-Za-z_]{{1,24}})"
       rf"(?:\s+(-?\d{{1,9}}))?\s+({_NUM})\s+({_NUM})\s+({_NUM})\s+({_WRONG})"
       rf"(?:\s+({_NUM})\s+({_NUM})\s+({_NUM})\s+({_WRONG}))?\s*$")
AVG = rf"^#\s*Avg bus bandwidth\s*:\s*({_NUM})"
DEVICE = (r"^#\s+Rank\s+(\d{1,9})(?:\s+Group\s+\d{1,9})?\s+Pid\s+(\d{1,10})\s+on\s+(\S+)\s+device"
          r"\s+(\d{1,5})\s+\[[^\]]*\]\s+(.+?)\s*$")
TEST = r"^#\s*Collective test starting:\s*(\S+)"
# The test from the file's name (`sendrecv_perf.log`, `all_reduce_perf.2x2.log`) when the
# output does not name it (nccl-tests < 2.17)
TEST_IN_NAME = r"((?:all_reduce|all_gather|reduce_scatter|alltoall|alltoallv|broadcast|reduce|" \
               r"sendrecv|scatter|gather|hypercube)_perf)"
ANY = rf"{HEADER}|{AVG}|{DEVICE}|{TEST}|{ROW}"

I32, I64, F64, STR = pl.Int32, pl.Int64, pl.Float64, pl.String
LINES = pl.Schema({"line_no": I64, "line": STR})
ROWS = pl.Schema([("source_file", STR), ("bench", I32), ("test", STR), ("size_bytes", I64),
                  ("count", I64), ("dtype", STR), ("redop", STR), ("root", I32),
                  ("in_place", pl.Boolean), ("time_us", F64), ("algbw_gbs", F64),
                  ("busbw_gbs", F64), ("n_wrong", I64), ("line_no", I64)])
SUMMARY = pl.Schema([("source_file", STR), ("bench", I32), ("test", STR),
                     ("test_source", STR), ("n_rows", I64), ("avg_busbw_gbs", F64),
                     ("n_ranks", I32), ("hosts", pl.List(STR)), ("pids", pl.List(I64)),
                     ("devices", pl.List(STR)), ("line_no", I64)])


def bench_lines(lines: pl.DataFrame) -> pl.DataFrame:
    """The lines of a block that may be nccl-tests output (line_no, line)."""
    return lines.filter(pl.col("line").str.contains(ANY)).select(LINES.names()).cast(LINES)


def _numbers(expr: pl.Expr) -> pl.Expr:
    return pl.when(expr == "N/A").then(None).otherwise(expr).cast(F64, strict=False)


def tables(lines: pl.DataFrame, display: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(result rows, one summary row per table) of the candidate lines of a whole log."""
    line = pl.col("line")
    marked = lines.sort("line_no").with_columns(
        line.str.contains(HEADER).alias("is_header")).with_columns(
        pl.col("is_header").cum_sum().cast(I32).alias("bench"))
    # device lines and the test name come before their table's header: the next table
    before = marked.with_columns((pl.col("bench") + 1).alias("next"))
    devices = before.select("next", line.str.extract_groups(DEVICE).alias("g")).unnest(
        "g").filter(pl.col("1").is_not_null()).select(
        pl.col("next").alias("bench"), pl.col("1").cast(I32).alias("rank"),
        pl.col("2").cast(I64).alias("pid"), pl.col("3").alias("host"),
        pl.col("5").alias("device"))
    named = before.select(pl.col("next").alias("bench"),
                          line.str.extract(TEST).alias("test")).drop_nulls()
    rows = _rows(marked.filter(pl.col("bench") > 0))
    avg = marked.filter(pl.col("bench") > 0).select(
        "bench", line.str.extract(AVG).cast(F64, strict=False).alias("avg")).drop_nulls()
    headers = marked.filter("is_header").select("bench", "line_no")
    file_test = pl.Series([display]).str.extract(TEST_IN_NAME)[0]
    summary = headers.join(named.unique("bench", keep="last"), on="bench", how="left").join(
        avg.unique("bench", keep="first"), on="bench", how="left").join(
        rows.group_by("bench").len("n_rows"), on="bench", how="left").join(
        devices.group_by("bench").agg(
            pl.col("rank").n_unique().alias("n_ranks"),
            pl.col("host").unique().sort().alias("hosts"),
            pl.col("pid").unique().sort().alias("pids"),
            pl.col("device").unique().sort().alias("devices")), on="bench", how="left")
    summary = summary.with_columns(
        pl.when(pl.col("test").is_not_null()).then(pl.lit("log"))
        .when(pl.lit(file_test).is_not_null()).then(pl.lit("file_name")).alias("test_source"),
        pl.coalesce("test", pl.lit(file_test, STR)).alias("test"),
        pl.col("n_rows").fill_null(0), pl.col("avg").alias("avg_busbw_gbs"),
        pl.lit(display).alias("source_file")).sort("bench")
    summary = summary.select(SUMMARY.names()).cast(SUMMARY)
    rows = rows.join(summary.select("bench", "test"), on="bench", how="left").with_columns(
        pl.lit(display).alias("source_file")).select(ROWS.names()).cast(ROWS)
    return rows.sort("line_no", "in_place"), summary


def _rows(lines: pl.DataFrame) -> pl.DataFrame:
    """Each result line as its out-of-place row and, when printed, its in-place row."""
    g = lines.select("bench", "line_no", pl.col("line").str.extract_groups(ROW).alias("g")
                     ).unnest("g").filter(pl.col("1").is_not_null())
    common = [pl.col("bench"), pl.col("line_no"), pl.col("1").cast(I64).alias("size_bytes"),
              pl.col("2").cast(I64).alias("count"), pl.col("3").alias("dtype"),
              pl.col("4").alias("redop"), pl.col("5").cast(I32).alias("root")]

    def half(first: int, in_place: bool) -> pl.DataFrame:
        t, a, b, w = (pl.col(str(first + i)) for i in range(4))
        return g.filter(t.is_not_null()).select(
            *common, pl.lit(in_place).alias("in_place"), _numbers(t).alias("time_us"),
            _numbers(a).alias("algbw_gbs"), _numbers(b).alias("busbw_gbs"),
            # a count of wrong elements (>= 2.10); the older `error` column is a relative
            # error (`4e-07`), not a count
            pl.when(w.str.contains(r"^\d+$")).then(w).cast(I64, strict=False)
            .alias("n_wrong"))

    return pl.concat([half(6, False), half(10, True)])
