"""Reading single trace files: every era, exact timestamps, tables, links."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest
from conftest import SAMPLES, SIM, kineto_trace, real_trace_files, write_trace

from stepscope.ingest import read_trace

HTA = "HolisticTraceAnalysis/tests/data"
SAMPLE_FILES = sorted(SAMPLES.rglob("rank*.json.gz"))


def frames(path: Path) -> dict[str, pl.DataFrame]:
    tables = read_trace(path).tables
    return {name: pl.from_arrow(t) for name, t in tables.items()}  # type: ignore[misc]


def test_bundled_samples_exist() -> None:
    variants = {p.parent.name for p in SAMPLE_FILES}
    assert variants == {"ddp", "pipeline", "ckpt", "ckpt_reent", "straggler", "fsdp2"}
    assert len(SAMPLE_FILES) == 24


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_sample_trace_reads(path: Path) -> None:
    rt = read_trace(path)
    assert rt.distributed_info and rt.distributed_info["world_size"] == 4
    assert rt.trace_format == "relative_ns"
    f = {name: pl.from_arrow(t) for name, t in rt.tables.items()}
    assert sorted(f["steps"]["step"].to_list()) == [2, 3, 4]
    assert f["cpu_ops"].height > 1000
    assert f["collectives"].height > 0
    assert f["gpu_ops"].height == 0  # CPU-only (gloo) traces


@pytest.mark.slow
@pytest.mark.parametrize("path", real_trace_files(), ids=lambda p: p.name)
def test_every_shared_trace_reads(path: Path) -> None:
    rt = read_trace(path)
    assert rt.n_events > 0
    cpu = pl.from_arrow(rt.tables["cpu_ops"])
    assert cpu.height > 0
    assert (cpu["end_ns"] >= cpu["start_ns"]).all()


def test_relative_timestamps_keep_every_ns(real_traces: Path) -> None:
    f = frames(real_traces / HTA / "nccl_parser_config/nccl_data.json.gz")
    kernel = f["gpu_ops"].filter(pl.col("correlation") == 60047).row(0, named=True)
    # ts 4458677009853.422 µs + baseTimeNanoseconds 1711964646000000000
    assert kernel["start_ns"] == 1711964646000000000 + 4458677009853422
    assert kernel["dur_ns"] == 2636669
    assert kernel["kind"] == "comm"


def test_absolute_timestamps_with_ns_fraction_are_exact(real_traces: Path) -> None:
    path = next((real_traces / HTA / "ns_resolution_trace").glob("*.gz"))
    rt = read_trace(path)
    assert rt.trace_format == "absolute_ns"
    cpu = pl.from_arrow(rt.tables["cpu_ops"])
    # the file's first X event: "ts": 1712195495519689.047, "dur": 63.813
    assert cpu.filter(pl.col("start_ns") == 1712195495519689047).height >= 1
    # a DOUBLE would round this to ...689.0 -> no op may land on a coarser grid only
    assert (cpu["start_ns"] % 1000 != 0).mean() > 0.9  # type: ignore[operator]


def test_integer_microsecond_timestamps(real_traces: Path) -> None:
    f = frames(real_traces / HTA / "trace_filter/sampled_rank-0.json.gz")
    kernel = f["gpu_ops"].filter(pl.col("correlation") == 6935929).row(0, named=True)
    assert kernel["start_ns"] == 1682725898082228 * 1000
    assert kernel["dur_ns"] == 10_000


def test_legacy_2021_categories(real_traces: Path) -> None:
    path = next((real_traces / "kineto").rglob("*.json.gz"))
    rt = read_trace(path)
    assert rt.trace_format == "legacy_2021"
    f = {name: pl.from_arrow(t) for name, t in rt.tables.items()}
    gpu = f["gpu_ops"]
    assert set(gpu["kind"].unique()) == {"compute", "memcpy", "memset"}
    # string tids "stream 7" -> stream 7; lower-case `external id` is read
    assert gpu["stream"].unique().to_list() == [7]
    assert gpu["external_id"].null_count() == 0
    # every kernel links to its launching runtime call (legacy cat "Runtime")
    assert gpu["launch_op_id"].null_count() == 0
    assert f["steps"].height > 0  # ProfilerStep#N recorded as cat "Operator"


def test_synthetic_trace_tables_and_links(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "rank0.json.gz", kineto_trace(rank=0, steps=2))
    f = frames(path)
    gpu, cpu, coll = f["gpu_ops"], f["cpu_ops"], f["collectives"]
    assert gpu.group_by("kind").len().sort("kind").rows() == [
        ("comm", 2), ("compute", 2), ("memcpy", 2)]
    gemm = gpu.filter(pl.col("kind") == "compute").row(0, named=True)
    launch = cpu.filter(pl.col("op_id") == gemm["launch_op_id"]).row(0, named=True)
    assert launch["name"] == "cudaLaunchKernel"
    assert cpu.filter(pl.col("op_id") == gemm["cpu_op_id"])["name"].item() == "aten::mm"
    assert gemm["step"] == 1
    steps = f["steps"].sort("step")
    assert steps["step"].to_list() == [1, 2]
    assert steps["n_gpu_ops"].to_list() == [3, 3]
    # the first GPU op launched in step 1 starts 30 µs after the step's CPU start
    assert steps["gpu_start_ns"][0] - steps["start_ns"][0] == 30_000
    assert coll.height == 2
    row = coll.row(0, named=True)
    assert row["collective"] == "all_reduce" and row["source"] == "record_param_comms"
    assert row["pg_name"] == "0" and row["group_size"] == 2 and row["pg_desc"] == "default_pg"
    assert row["in_bytes"] == 2048 and row["dtype"] == "BFloat16"
    assert row["kernel_count"] == 1 and row["kernel_end_ns"] - row["kernel_start_ns"] == 400_000
    # the CPU call interval is the c10d op around record_param_comms
    assert row["cpu_end_ns"] - row["cpu_start_ns"] == 100_000
    assert coll["seq_in_group"].to_list() == [0, 1]


def test_nesting_parent_and_depth(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "rank0.json.gz", kineto_trace(rank=0, steps=1))
    cpu = frames(path)["cpu_ops"]
    by_name = {r["name"]: r for r in cpu.iter_rows(named=True)}
    step = by_name["ProfilerStep#1"]
    assert step["depth"] == 0 and step["parent_id"] is None
    assert by_name["aten::mm"]["parent_id"] == step["op_id"]
    assert by_name["aten::mm"]["depth"] == 1
    rpc = by_name["record_param_comms"]
    assert cpu.filter(pl.col("op_id") == rpc["parent_id"])["name"].item() == "c10d::allreduce_"
    ann = by_name["nccl:all_reduce"]
    assert ann["parent_id"] == rpc["op_id"] and ann["depth"] == 2


def test_nesting_contains_children_on_real_trace() -> None:
    cpu = frames(SAMPLES / "ddp" / "rank0.json.gz")["cpu_ops"]
    joined = cpu.join(cpu.select(pl.col("op_id").alias("parent_id"),
                                 pl.col("start_ns").alias("p_start"),
                                 pl.col("end_ns").alias("p_end"),
                                 pl.col("tid").alias("p_tid"),
                                 pl.col("depth").alias("p_depth")), on="parent_id")
    assert joined.height > 0.9 * cpu.filter(pl.col("depth") > 0).height
    assert (joined["p_tid"] == joined["tid"]).all()
    assert (joined["p_start"] <= joined["start_ns"]).all()
    assert ((joined["p_end"] >= joined["end_ns"]).mean() or 0) > 0.999
    assert (joined["p_depth"] < joined["depth"]).all()


def test_gloo_collectives_pair_c10d_ops_with_gloo_spans() -> None:
    coll = frames(SAMPLES / "ddp" / "rank1.json.gz")["collectives"]
    assert set(coll["collective"]) == {"all_reduce"}
    assert set(coll["source"]) == {"gloo"}
    assert coll["work_start_ns"].null_count() == 0 and coll["cpu_start_ns"].null_count() == 0
    assert (coll["in_bytes"] == coll["in_nelems"] * 4).all()
    assert set(coll["pg_name"]) == {"0"} and set(coll["group_size"]) == {4}
    # each step issues the same buckets
    per_step = coll.group_by("step").len().sort("step")["len"].to_list()
    assert len(set(per_step)) == 1 and per_step[0] >= 1
    # the gloo transfer runs on a worker thread, not the calling thread
    assert (coll["work_tid"] != coll["cpu_tid"]).all()


def test_pipeline_p2p_peers() -> None:
    for rank, peer in ((0, 2), (1, 3), (2, 0), (3, 1)):
        coll = frames(SAMPLES / "pipeline" / f"rank{rank}.json.gz")["collectives"]
        p2p = coll.filter(pl.col("is_p2p"))
        assert set(p2p["collective"]) == {"send", "recv"}
        assert set(p2p["peer_rank"]) == {peer}
        # 4 microbatches forward + 4 backward per step, 3 steps
        assert p2p.height == 24


def test_fsdp2_collectives() -> None:
    coll = frames(SAMPLES / "fsdp2" / "rank0.json.gz")["collectives"]
    kinds = set(coll["collective"])
    assert kinds == {"all_gather", "reduce_scatter"}


def test_rccl_kernels_without_runtime_link(real_traces: Path) -> None:
    f = frames(real_traces / "TraceLens/tests/traces/mi300/resnet_act_checkpoint.json.gz")
    comm = f["gpu_ops"].filter(pl.col("kind") == "comm")
    assert comm.height == 17 and comm["name"].str.starts_with("ncclDevKernel_Generic").all()
    coll = f["collectives"]
    # 12 kernels are launched inside the profiled window and link to record_param_comms
    linked = coll.filter(pl.col("source") == "record_param_comms")
    assert linked.height == 12
    assert dict(linked.group_by("collective").len().rows()) == {"all_reduce": 6, "broadcast": 6}
    # 5 ran before the first CPU event (launched before the window): kept, name unknown
    orphans = coll.filter(pl.col("source") == "nccl_kernel")
    assert orphans.height == 5 and set(orphans["collective"]) == {"unknown"}
    assert orphans["kernel_start_ns"].max() < linked["kernel_start_ns"].min()


def test_older_torch_collectives_come_from_annotations(real_traces: Path) -> None:
    f = frames(real_traces / HTA / "trace_filter/sampled_rank-0.json.gz")
    coll = f["collectives"]
    names = coll.group_by("collective").len().sort("collective").rows()
    assert dict(names) == {"all_gather": 2, "all_reduce": 4, "all_to_all": 4}
    assert coll.filter(pl.col("collective") == "all_reduce")["in_nelems"].to_list()[0] == 19618307


def test_reads_share_one_database_but_no_tables(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Reads in one process share one in-memory DuckDB (ingest/read_pool.py) so a worker
    keeps its memory warm, but nothing of a read outlives it: a trace read after other
    traces and after two reads that failed half-way (in DuckDB's JSON read, and in the
    analysis once the event tables existed) gives exactly the tables it gives when it
    is the process's first read."""
    from stepscope.ingest import read_pool
    from stepscope.ingest.errors import TraceFileError

    target = SIM / "moe_roofline/rank1.json.gz"  # [memory] events too
    others = [SAMPLE_FILES[0], SIM / "healthy/rank0.json.gz"]
    bad_json = write_trace(tmp_path / "bad.json", '{"traceEvents": [1, 2, 3]}')
    huge = kineto_trace(rank=1, world_size=2)
    for event in huge["traceEvents"]:
        if "ts" in event:
            event["ts"] = 1e300
    bad_ts = write_trace(tmp_path / "huge.json", huge)

    monkeypatch.setattr(read_pool, "_DATABASES", {})
    alone = read_trace(target)
    assert alone.tables["memory_events"].num_rows > 0
    assert alone.tables["memory_events"].column("addr").null_count == 0

    monkeypatch.setattr(read_pool, "_DATABASES", {})
    for path in others:
        read_trace(path)
    for path, problem in ((bad_json, "invalid JSON in traceEvents"),
                          (bad_ts, "an event's time (ts or dur) is not a number")):
        with pytest.raises(TraceFileError, match=re.escape(problem)):
            read_trace(path)
    after = read_trace(target)
    assert len(read_pool._DATABASES) == 1  # the same database served every read
    assert after.tables.keys() == alone.tables.keys()
    for name, table in alone.tables.items():
        assert after.tables[name].equals(table), name
    assert (after.summary, after.category_counts, after.step_source) \
        == (alone.summary, alone.category_counts, alone.step_source)


def test_a_fresh_database_serves_reads_after_reads_per_database(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One in-memory database serves READS_PER_DATABASE reads, then a new one replaces it
    (one that served hundreds gets slower with each); the tables do not change."""
    from stepscope.ingest import read_pool

    monkeypatch.setattr(read_pool, "_DATABASES", {})
    monkeypatch.setattr(read_pool, "READS_PER_DATABASE", 2)
    target = SAMPLE_FILES[0]
    first = read_trace(target, threads=1)
    database, reads = read_pool._DATABASES[1]
    assert reads == 1
    read_trace(target, threads=1)
    assert read_pool._DATABASES[1] == (database, 2)
    third = read_trace(target, threads=1)
    assert read_pool._DATABASES[1][0] is not database and read_pool._DATABASES[1][1] == 1
    for name, table in first.tables.items():
        assert third.tables[name].equals(table), name
