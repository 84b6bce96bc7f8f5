"""A discrete-event simulator of a Megatron-style TP x PP x DP GPU job, with ground truth.

It writes one Kineto trace per rank, shaped like real PyTorch/Kineto/NCCL output (CPU
ops, runtime launches with correlation ids, kernels on streams, record_param_comms
collective args, NCCL kernels of a chosen era, ProfilerStep#N), plus `ground_truth.json`
with the exact step-time attribution of docs/attribution.md, computed here from the
simulator's own knowledge of what every GPU interval is (not from the traces).

Model of one step on each rank:
* optional host gap (input-bound: the CPU loads data before launching anything);
* 1F1B pipeline schedule over M microbatches: per layer and microbatch, GEMM and
  attention kernels sized from their FLOPs at a given efficiency; a TP all-reduce after
  attention and after the MLP that completes together across the TP group (a rank that
  arrives early waits); activations / gradients sent between stages with send/recv
  where the receiver waits for the sender;
* backward = 2x forward FLOPs, with optional recompute of the forward (non-reentrant or
  reentrant checkpointing) before each layer's backward;
* DP gradient all-reduce per layer bucket on a separate stream, overlapping backward;
  the optimizer waits for all buckets;
* an optional slow rank (its kernels take longer), per-host clock offsets;
* optional host-bound shapes: a `.item()` after each microbatch's forward (the host
  synchronizes, then runs CPU work before launching on), tiny elementwise kernels, and
  an optimizer that waits for an event the host records after the gradients are in.
* optionally (`nvlink_gbs` set) a link model: a collective costs ring hops x the
  latency of its slowest tier plus bus bytes / that tier's bandwidth, NVLink inside a
  node, the network across nodes, and small per-step all-reduces (loss over DP, grad
  norm over TP) that give the planner a second message size on each tier (issue 23).

Usage: python sample_traces/simulate_gpu.py [--out DIR] [--sets a,b]
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import io
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim_idle import window_split

# sim_shapes (the shapes of issue 20) imports this module; running as a script, share it
sys.modules.setdefault("simulate_gpu", sys.modules[__name__])

BASE_NS = 1_767_189_312_000_000_000  # a trimonth boundary, like Kineto's base
CATEGORIES = ("compute", "recompute", "exposed_comm", "straggler_wait", "bubble", "memory",
              "idle")
DATALOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
COMPUTE_STREAM, DP_STREAM, SEND_STREAM, RECV_STREAM = 7, 21, 22, 23


@dataclass
class Config:
    name: str
    tp: int = 2
    pp: int = 2
    dp: int = 2
    microbatches: int = 16
    layers_per_stage: int = 1
    hidden: int = 2048
    seq: int = 2048
    micro_batch: int = 1
    heads: int = 16
    steps: int = 3
    peak_tflops: float = 989.0
    efficiency: float = 0.6
    gpus_per_node: int = 8
    recompute: str | None = None  # None | "non_reentrant" | "reentrant"
    slow_rank: int | None = None
    slow_factor: float = 1.0
    host_gap_ms: float = 0.0
    clock_offset_ms: float = 7.0  # host h is offset by h * this
    nccl_era: str = "2.21"  # "2.17": ncclKernel_*, "2.21": ncclDevKernel_*
    ts_style: str = "relative"  # relative | int_us
    tp_bw_gbs: float = 300.0
    dp_bw_gbs: float = 200.0
    p2p_bw_gbs: float = 200.0
    device_name: str = "NVIDIA H100 80GB HBM3"
    compute_major: int = 9
    truth_peak_tflops: float = 989.4  # the table's peak for the device and dtype
    dtype: str = "bf16"  # bf16 | fp32: matmul Input type, kernel names, comm dtype
    input_types: bool = True  # cpu ops with Input Dims also record "Input type" (below)
    host_naming: str = "host_name"  # host_name | tensorboard ({host}_{pid}.{ms}.pt.trace.json.gz)
    p2p_meta: str = "2.4"  # "2.4": Dst/Src Rank (global); "2.3": Rank = peer's group rank
    step_marker: str = "ProfilerStep"  # ProfilerStep | train_step (record_function) | none
    # shapes of issue 20 (sample_traces/sim_shapes.py): megatron | moe_ep | graph
    shape: str = "megatron"
    host_ms: float = 0.0            # CPU time at the start of a step before any launch
    graph_link: str = "correlation"  # graph kernels carry the launch's correlation | none
    runtime: str = "cuda"            # cuda | hip (API names, ROCm metadata)
    device_offset: int = 0           # GPU events' device = local GPU + this (ROCm agents)
    device_props: int | None = None  # deviceProperties entries (default gpus_per_node)
    ep_imbalance: float = 0.0        # MoE: expert time of rank r is x (1 + r * this)
    sync_host_us: float = 0.0  # .item() after each forward, then this much CPU work
    small_kernels: int = 0  # tiny elementwise kernels per layer forward
    host_event_us: float = 0.0  # the optimizer waits this long past its dependencies
    step_sync: bool = False  # cudaDeviceSynchronize at the end of each step (loss.item())
    # (pattern, k): ops whose kernel name (or `all_reduce:tp`, `send`...) contains pattern
    # run k x faster; what-if re-simulations (sample_traces/sim_critical_path.py)
    speedups: tuple[tuple[str, float], ...] = ()
    # link model (None: the per-kind tp/dp/p2p bandwidths above, no latency)
    nvlink_gbs: float | None = None
    network_gbs: float = 50.0
    nvlink_latency_us: float = 0.0   # per ring hop
    network_latency_us: float = 0.0
    small_collectives: bool = False  # per step: loss all-reduce (DP), grad norm (TP)
    # steps simulated before the profiled ones and not written (torch.profiler's warmup):
    # the profiled steps then start in the pipeline's steady state
    warmup_steps: int = 0
    # per-node clocks (issue 46): node h's clock leads the true time by clock_offsets_us[h]
    # µs (instead of h x clock_offset_ms) and runs clock_drift_ppm[h] ppm fast (its lead
    # grows by that many µs per second from the trace's time 0); ground truth "clocks"
    clock_offsets_us: tuple[float, ...] = ()
    clock_drift_ppm: tuple[float, ...] = ()

    @property
    def world(self) -> int:
        return self.tp * self.pp * self.dp


SETS: dict[str, Config] = {
    "healthy": Config("healthy"),
    "straggler": Config("straggler", slow_rank=3, slow_factor=1.5),
    "recompute": Config("recompute", recompute="non_reentrant", nccl_era="2.17"),
    "recompute_reentrant": Config("recompute_reentrant", recompute="reentrant", pp=1),
    "input_bound": Config("input_bound", host_gap_ms=12.0, pp=1, ts_style="int_us"),
    "tp_across_nodes": Config("tp_across_nodes", tp=4, pp=1, dp=2, gpus_per_node=2,
                              tp_bw_gbs=25.0, dp_bw_gbs=25.0),
    "deep_pipeline": Config("deep_pipeline", tp=1, pp=4, dp=1, microbatches=4,
                            layers_per_stage=1),
    "dp_exposed": Config("dp_exposed", tp=2, pp=1, dp=4, gpus_per_node=2, dp_bw_gbs=5.0),
    # a pair for `stepscope diff`: the same model and global batch on twice the nodes,
    # with a slower network and a straggler
    "diff_base": Config("diff_base", tp=2, pp=1, dp=4, gpus_per_node=4, dp_bw_gbs=100.0),
    "diff_scaled": Config("diff_scaled", tp=2, pp=1, dp=8, gpus_per_node=4, microbatches=8,
                          dp_bw_gbs=20.0, slow_rank=13, slow_factor=1.3),
    # shapes real jobs write (issue 8): hosts only in tensorboard_trace_handler file names;
    "tb_names": Config("tb_names", tp=4, pp=1, dp=2, gpus_per_node=2, tp_bw_gbs=25.0,
                       dp_bw_gbs=25.0, host_naming="tensorboard"),
    # torch <= 2.3 send/recv metadata (group-local `Rank`, no Dst/Src Rank);
    "pipeline_torch23": Config("pipeline_torch23", tp=2, pp=4, dp=1, microbatches=6,
                               p2p_meta="2.3"),
    # fp32 matmuls on V100 (no TF32, no bf16);
    "fp32_v100": Config("fp32_v100", tp=2, pp=1, dp=2, microbatches=4, hidden=1024, seq=1024,
                        heads=8, dtype="fp32", device_name="Tesla V100-SXM2-32GB",
                        compute_major=7, peak_tflops=15.7, truth_peak_tflops=15.7),
    # TP8 x DP4 on four 8-GPU nodes, one rank 25% slower in compute;
    "hidden_straggler": Config("hidden_straggler", tp=8, pp=1, dp=4, microbatches=2,
                               layers_per_stage=2, hidden=4096, seq=4096, heads=32,
                               slow_rank=13, slow_factor=1.25, dp_bw_gbs=50.0),
    # steps annotated with record_function("train_step"), no ProfilerStep#N;
    "no_profilerstep": Config("no_profilerstep", tp=2, pp=1, dp=2, microbatches=4,
                              step_marker="train_step"),
    # issue 20 (sample_traces/sim_shapes.py): MoE EP 4 with DeepEP kernels on their own
    # stream, two micro-batches overlapped, uneven expert load;
    "moe_ep": Config("moe_ep", shape="moe_ep", tp=1, pp=1, dp=4, gpus_per_node=4,
                     layers_per_stage=2, steps=3, ep_imbalance=0.05),
    # an inference decode step (TP 2, custom all-reduce) replayed as a CUDA graph;
    "cuda_graph": Config("cuda_graph", shape="graph", tp=2, pp=1, dp=1, gpus_per_node=2,
                         layers_per_stage=12, steps=3, host_ms=4.0, ep_imbalance=0.1),
    # the same on ROCm as HIP graph whose kernels the trace does not link to the launch;
    # one GPU visible (deviceProperties lists it as id 0, its events say device 2).
    "hip_graph": Config("hip_graph", shape="graph", tp=1, pp=1, dp=1, gpus_per_node=8,
                        device_props=1, layers_per_stage=12, steps=3, host_ms=4.0,
                        runtime="hip", device_offset=2, graph_link="none",
                        device_name="AMD Instinct MI300X", truth_peak_tflops=1307.4),
    # a host-bound step (issue 20): syncs, tiny kernels, a wait on a host-recorded event.
    "host_bound": Config("host_bound", tp=1, pp=1, dp=2, microbatches=3, layers_per_stage=2,
                         hidden=1024, seq=1024, heads=8, sync_host_us=400.0, small_kernels=6,
                         host_event_us=250.0),
    # ... and one launch-bound: many tiny kernels, each gap between them short.
    "launch_bound": Config("launch_bound", tp=1, pp=1, dp=2, microbatches=3,
                           layers_per_stage=2, hidden=1024, seq=1024, heads=8,
                           small_kernels=40),
    # a known critical path across ranks (docs/critical_path.md): TP2 x PP2 x DP2 with a
    # slow rank in stage 1, a sync at each step's end; the path crosses from stage 0 to
    # the straggler and back at every microbatch. Ground truth: the path and what-if
    # re-simulations (sample_traces/sim_critical_path.py).
    "critical_path": Config("critical_path", tp=2, pp=2, dp=2, microbatches=4, steps=4,
                            slow_rank=5, slow_factor=1.4, step_sync=True, dp_bw_gbs=50.0),
    # one slow stage of four (a rank each): the others wait for it at every microbatch
    "pipeline_imbalance": Config("pipeline_imbalance", tp=1, pp=4, dp=1, microbatches=8,
                                 slow_rank=2, slow_factor=1.3, step_sync=True),
    # issue 22 (sample_traces/sim_roofline.py): MoE layer, EP 4, GEMMs / attention / GELU
    # at known shares of their roofs, uneven all_to_all splits, profile_memory events.
    "moe_roofline": Config("moe_roofline", shape="roofline", tp=1, pp=1, dp=4,
                           gpus_per_node=4, microbatches=2, steps=3, ep_imbalance=0.2),
}
# The first bundled sets were written before the simulator recorded "Input type"; they keep
# that shape (MFU's dtype then comes from kernel names, docs/mfu.md), so regenerating them
# reproduces the committed traces (tests/project/test_sample_drift.py).
for _name in ("healthy", "straggler", "recompute", "recompute_reentrant", "input_bound",
              "tp_across_nodes", "deep_pipeline", "dp_exposed", "diff_base", "diff_scaled"):
    SETS[_name] = dataclasses.replace(SETS[_name], input_types=False)
# Pairs for `stepscope plan --from A` / `diff A B` (issue 23): B differs from A only in
# scale or layout, with the same kernel efficiency and links (the link model above), so
# the planner's prediction of B from A can be checked against B's ground truth. Only the
# small micro-batch pair is bundled; tests write the others into a temporary folder.
def linked(name: str, **kw: Any) -> Config:
    """A set under the link model: NVLink 300 GB/s and 2 us per hop inside a node, the
    network 40 GB/s per GPU and 8 us per hop across nodes, small per-step all-reduces,
    one unwritten warmup step."""
    return Config(name, nvlink_gbs=300.0, network_gbs=40.0, nvlink_latency_us=2.0,
                  network_latency_us=8.0, small_collectives=True, warmup_steps=1, **kw)


PLAN_PAIRS: dict[str, tuple[Config, Config]] = {
    # DP x2 across more nodes: TP4 x DP2 on 2 nodes -> TP4 x DP4 on 4 nodes
    "dp2x": (linked("plan_dp_a", tp=4, pp=1, dp=2, gpus_per_node=4, microbatches=8,
                    layers_per_stage=4),
             linked("plan_dp_b", tp=4, pp=1, dp=4, gpus_per_node=4, microbatches=4,
                    layers_per_stage=4)),
    # TP 8 -> 4 with PP x2 inside one 8-GPU node
    "tp_to_pp": (linked("plan_tp8", tp=8, pp=1, dp=1, microbatches=4, layers_per_stage=4,
                        hidden=4096, heads=32),
                 linked("plan_tp4_pp2", tp=4, pp=2, dp=1, microbatches=4, layers_per_stage=2,
                        hidden=4096, heads=32)),
    # more micro-batches for the same global batch: b 2 -> 1, M 4 -> 8 on a 4-stage pipe
    "microbatches": (linked("plan_mb4", tp=2, pp=4, dp=1, microbatches=4, micro_batch=2),
                     linked("plan_mb8", tp=2, pp=4, dp=1, microbatches=8, micro_batch=1)),
}
PLAN_SETS = {c.name: c for pair in PLAN_PAIRS.values() for c in pair}
SETS.update({c.name: c for c in PLAN_PAIRS["microbatches"]})  # bundled (small)
# Larger sets for benchmarks/ (not bundled; no ground truth needed there).
BENCH_SETS: dict[str, Config] = {
    # 64 ranks, ~1,100 GPU ops per step per rank, 10 steps
    "bench64": Config("bench64", tp=8, pp=4, dp=2, microbatches=16, layers_per_stage=4,
                      steps=10, gpus_per_node=8),
    # benchmarks/bench_scale.py: the same TP8 x PP2 layout at 64, 256 and 1,024 ranks
    # (~300 GPU ops per step per rank, 3 steps), so cost growth with rank count shows;
    # 2,048 for the writer's memory past 1,024 ranks (benchmarks/README.md)
    **{f"scale{n}": Config(f"scale{n}", tp=8, pp=2, dp=n // 16, microbatches=4,
                           layers_per_stage=1, steps=3, gpus_per_node=8)
       for n in (64, 256, 1024, 2048)},
    # issue 44's two shapes at the defaults (benchmarks/bench_scale.py --shape):
    # TP8 x PP4 with 4 microbatches and TP8 x PP8 with 8, 64 to 4,096 ranks
    **{f"tp8pp{pp}_{n}": Config(f"tp8pp{pp}_{n}", tp=8, pp=pp, dp=n // (8 * pp),
                               microbatches=pp, layers_per_stage=1, steps=3, gpus_per_node=8)
       for pp in (4, 8) for n in (64, 256, 1024, 2048, 4096)},
    # issue 44's many small ranks: data parallel only, one layer, 2 steps (about 60 GPU ops
    # per rank), 8 GPUs a node: the per-rank and per-file costs, not the events, dominate
    **{f"small{n}": Config(f"small{n}", tp=1, pp=1, dp=n, microbatches=1, layers_per_stage=1,
                           steps=2, gpus_per_node=8)
       for n in (64, 5000)},
    # benchmarks/bench_analyses.py: the roofline shape (EP 8 per node) at 1,024 ranks
    "roofline1024": Config("roofline1024", shape="roofline", tp=1, pp=1, dp=1024,
                           gpus_per_node=8, microbatches=2, steps=3, ep_imbalance=0.2),
}


@dataclass(eq=False)  # identity: ops point at each other (why, last)
class Op:
    """One GPU activity in program order on a rank."""
    kind: str  # kernel | coll | p2p
    name: str
    stream: int
    category: str  # compute | recompute | memory | comm | p2p
    dur_ns: int = 0  # kernels; transfer time for collectives
    group: tuple[int, ...] = ()
    key: str = ""  # shared by the participants of a collective / p2p pair
    deps: list[int] = field(default_factory=list)  # indices of ops whose end it waits for
    cpu: dict[str, Any] = field(default_factory=dict)  # how the CPU launched it
    start: int | None = None
    end: int | None = None
    step: int = 0
    launch_ns: int = 0
    flops: float = 0.0
    gate_ns: int = 0  # starts no earlier than this long after its dependencies end
    rank: int = -1
    why: Any = None  # what set its start: "launch", or the Op whose end it waited for
    last: Any = None  # collectives: the member Op that arrived last (it set the end)


def rank_coords(cfg: Config, rank: int) -> tuple[int, int, int]:
    """(tp index, pp stage, dp index): TP fastest, then DP, then PP (Megatron order)."""
    tp_i = rank % cfg.tp
    dp_i = (rank // cfg.tp) % cfg.dp
    stage = rank // (cfg.tp * cfg.dp)
    return tp_i, stage, dp_i


def rank_of(cfg: Config, tp_i: int, stage: int, dp_i: int) -> int:
    return stage * cfg.tp * cfg.dp + dp_i * cfg.tp + tp_i


def groups(cfg: Config, rank: int) -> dict[str, tuple[int, ...]]:
    tp_i, stage, dp_i = rank_coords(cfg, rank)
    return {
        "tp": tuple(rank_of(cfg, t, stage, dp_i) for t in range(cfg.tp)),
        "dp": tuple(rank_of(cfg, tp_i, stage, d) for d in range(cfg.dp)),
        "pp": tuple(rank_of(cfg, tp_i, s, dp_i) for s in range(cfg.pp)),
    }


PG_NAMES = {"tp": ("1", "TENSOR_MODEL_PARALLEL_GROUP"), "dp": ("2", "DATA_PARALLEL_GROUP"),
            "pp": ("3", "PIPELINE_MODEL_PARALLEL_GROUP")}


def pg_name(cfg: Config, kind: str, members: tuple[int, ...]) -> str:
    """Distinct group names per group instance (as torch numbers every group)."""
    base = {"tp": 100, "dp": 200, "pp": 300}[kind]
    # past 100 ranks base + min(members) collides (TP group 612 and DP group 712 of 512)
    return str(base * (1 if cfg.world <= 100 else 100) + min(members))


def link_ns(cfg: Config, members: tuple[int, ...], nbytes: float, p2p: bool = False) -> int:
    """Transfer time under the link model: ring all-reduce 2(n-1) hops and
    2(n-1)/n x bytes, a send 1 hop and its bytes, over NVLink when every member sits on
    one node, else the network."""
    n = len(members)
    hops, factor = (1, 1.0) if p2p else (2 * (n - 1), 2 * (n - 1) / n)
    inside = len({m // cfg.gpus_per_node for m in members}) == 1
    assert cfg.nvlink_gbs is not None
    bw, lat = ((cfg.nvlink_gbs, cfg.nvlink_latency_us) if inside
               else (cfg.network_gbs, cfg.network_latency_us))
    return int(hops * lat * 1e3 + factor * nbytes / (bw * 1e9) * 1e9)


def kernel_ns(cfg: Config, flops: float, rank: int) -> int:
    ns = flops / (cfg.peak_tflops * 1e12 * cfg.efficiency) * 1e9
    if rank == cfg.slow_rank:
        ns *= cfg.slow_factor
    return max(1000, int(ns))


def _fp32_kernels(ops: list[tuple[str, str, float, tuple[int, ...]]]
                  ) -> list[tuple[str, str, float, tuple[int, ...]]]:
    """Volta fp32 names: SGEMM and a fp32 attention kernel."""
    names = {"aten::linear": "volta_sgemm_128x64_tn",
             "aten::gelu": "vectorized_elementwise_kernel_gelu",
             "aten::_flash_attention_forward": "fmha_cutlassF_f32_aligned_64x64_rf_sm70"}
    return [(op, names.get(op, k) if k else k, f, s) for op, k, f, s in ops]


def layer_kernels(cfg: Config) -> list[tuple[str, str, float, tuple[int, ...]]]:
    """(cpu op, kernel, flops, shape) of one layer's forward on one microbatch, per TP
    rank. Shape: (m, k, n) of a GEMM, or (batch, seq, heads, head_dim) of attention."""
    ops = _bf16_layer_kernels(cfg)
    return _fp32_kernels(ops) if cfg.dtype == "fp32" else ops


def _bf16_layer_kernels(cfg: Config) -> list[tuple[str, str, float, tuple[int, ...]]]:
    b, s, h, t = cfg.micro_batch, cfg.seq, cfg.hidden, cfg.tp
    heads, d = cfg.heads // t, h // cfg.heads
    return [
        ("aten::linear", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_qkv",
         2 * b * s * h * 3 * h / t, (b * s, h, 3 * h // t)),
        ("aten::_flash_attention_forward", "flash_fwd_kernel", 4 * b * s * s * h / t,
         (b, s, heads, d)),
        ("aten::linear", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_proj",
         2 * b * s * h * h / t, (b * s, h // t, h)),
        ("tp_all_reduce", "", 0, ()),
        ("aten::linear", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_fc1",
         2 * b * s * h * 4 * h / t, (b * s, h, 4 * h // t)),
        ("aten::gelu", "vectorized_elementwise_kernel_gelu", 0, ()),
        ("aten::linear", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_fc2",
         2 * b * s * 4 * h * h / t, (b * s, 4 * h // t, h)),
        ("tp_all_reduce", "", 0, ()),
    ]


def one_f_one_b(cfg: Config, stage: int) -> list[tuple[str, int]]:
    """The 1F1B order of (fwd|bwd, microbatch) on a stage."""
    m, warm = cfg.microbatches, min(cfg.pp - stage - 1, cfg.microbatches)
    order = [("fwd", i) for i in range(warm)]
    f, b = warm, 0
    while f < m:
        order.append(("fwd", f))
        f += 1
        order.append(("bwd", b))
        b += 1
    order += [("bwd", i) for i in range(b, m)]
    return order


def build_program(cfg: Config, rank: int, step: int) -> list[Op]:
    """The GPU ops of one step on one rank, in program (launch) order."""
    tp_i, stage, dp_i = rank_coords(cfg, rank)
    g = groups(cfg, rank)
    b, s, h = cfg.micro_batch, cfg.seq, cfg.hidden
    act_bytes = 2 * b * s * h
    ops: list[Op] = []
    last_recv: dict[tuple[str, int], int] = {}

    def add(op: Op) -> int:
        op.step, op.rank = step, rank
        ops.append(op)
        return len(ops) - 1

    def tp_all_reduce(tag: str) -> None:
        if cfg.tp == 1:
            return
        nbytes = act_bytes
        t = int(2 * (cfg.tp - 1) / cfg.tp * nbytes / (cfg.tp_bw_gbs * 1e9) * 1e9)
        if cfg.nvlink_gbs is not None:
            t = link_ns(cfg, g["tp"], nbytes)
        add(Op("coll", "all_reduce", COMPUTE_STREAM, "comm", max(t, 2000), g["tp"],
               f"tp{g['tp']}-s{step}-{tag}", cpu={"pg": "tp", "nelems": nbytes // 2}))

    def layer_pass(direction: str, mb: int, layer: int, recompute: bool = False) -> None:
        for j, (cpu_op, kname, flops, shape) in enumerate(layer_kernels(cfg)):
            if cpu_op == "tp_all_reduce":
                tp_all_reduce(f"{direction}{'r' if recompute else ''}-mb{mb}-l{layer}-{j}")
                continue
            if flops == 0:  # elementwise
                dur = max(2000, int(act_bytes * 4 / 3.0e12 * 1e9))
            else:
                dur = kernel_ns(cfg, flops if direction == "fwd" else 2 * flops, rank)
            if direction == "fwd":
                cat = "recompute" if recompute else "compute"
                add(Op("kernel", kname, COMPUTE_STREAM, cat, dur, flops=flops,
                       cpu={"op": cpu_op, "recompute": recompute, "layer": layer,
                            "shape": shape}))
                for _ in range(cfg.small_kernels if cpu_op == "aten::gelu" else 0):
                    add(Op("kernel", "vectorized_elementwise_kernel_add", COMPUTE_STREAM,
                           cat, 1_500, cpu={"op": "aten::add", "recompute": recompute}))
            else:
                add(Op("kernel", kname.replace("_tn_", "_nt_") + "_bwd", COMPUTE_STREAM,
                       "compute", dur, flops=2 * flops,
                       cpu={"op": "backward", "fwd_op": cpu_op, "layer": layer,
                            "shape": shape}))

    for direction, mb in one_f_one_b(cfg, stage):
        pp_prev = g["pp"][stage - 1] if stage > 0 else None
        pp_next = g["pp"][stage + 1] if stage < cfg.pp - 1 else None
        p2p_ns = int(act_bytes / (cfg.p2p_bw_gbs * 1e9) * 1e9)
        if cfg.nvlink_gbs is not None and pp_prev is not None:
            p2p_ns = link_ns(cfg, (pp_prev, rank), act_bytes, p2p=True)
        elif cfg.nvlink_gbs is not None and pp_next is not None:
            p2p_ns = link_ns(cfg, (rank, pp_next), act_bytes, p2p=True)
        if direction == "fwd":
            if pp_prev is not None:
                i = add(Op("p2p", "recv", RECV_STREAM, "p2p", p2p_ns, (pp_prev, rank),
                           f"act-s{step}-mb{mb}-{pp_prev}-{rank}",
                           cpu={"peer": pp_prev, "nelems": act_bytes // 2}))
                last_recv[("fwd", mb)] = i
            else:
                add(Op("kernel", "Memcpy HtoD (Pinned -> Device)", COMPUTE_STREAM, "memory",
                       max(2000, int(b * s * 8 / 20e9 * 1e9)), cpu={"op": "aten::copy_"}))
            first = True
            for layer in range(cfg.layers_per_stage):
                before = len(ops)
                layer_pass("fwd", mb, layer)
                if first and ("fwd", mb) in last_recv:
                    ops[before].deps.append(last_recv[("fwd", mb)])
                first = False
            if pp_next is not None:
                add(Op("p2p", "send", SEND_STREAM, "p2p", p2p_ns, (rank, pp_next),
                       f"act-s{step}-mb{mb}-{rank}-{pp_next}",
                       cpu={"peer": pp_next, "nelems": act_bytes // 2},
                       deps=[len(ops) - 1]))
            if cfg.sync_host_us:  # loss.item(): a tiny copy the host waits for
                add(Op("kernel", "Memcpy DtoH (Device -> Pageable)", COMPUTE_STREAM,
                       "memory", 2_000, cpu={"op": "aten::item",
                                             "sync_host_ns": int(cfg.sync_host_us * 1e3)}))
        else:
            if pp_next is not None:
                i = add(Op("p2p", "recv", RECV_STREAM, "p2p", p2p_ns, (pp_next, rank),
                           f"grad-s{step}-mb{mb}-{pp_next}-{rank}",
                           cpu={"peer": pp_next, "nelems": act_bytes // 2}))
                last_recv[("bwd", mb)] = i
            first = True
            for layer in reversed(range(cfg.layers_per_stage)):
                before = len(ops)
                if cfg.recompute:
                    layer_pass("fwd", mb, layer, recompute=True)
                layer_pass("bwd", mb, layer)
                if first and ("bwd", mb) in last_recv:
                    ops[before].deps.append(last_recv[("bwd", mb)])
                first = False
                if mb == cfg.microbatches - 1 and cfg.dp > 1:
                    nbytes = 2 * 12 * h * h // cfg.tp  # bf16 grads of one layer
                    t = int(2 * (cfg.dp - 1) / cfg.dp * nbytes / (cfg.dp_bw_gbs * 1e9) * 1e9)
                    if cfg.nvlink_gbs is not None:
                        t = link_ns(cfg, g["dp"], nbytes)
                    add(Op("coll", "all_reduce", DP_STREAM, "comm", max(t, 2000), g["dp"],
                           f"dp{g['dp']}-s{step}-l{layer}", deps=[len(ops) - 1],
                           cpu={"pg": "dp", "nelems": nbytes // 2}))
            if pp_prev is not None:
                add(Op("p2p", "send", SEND_STREAM, "p2p", p2p_ns, (rank, pp_prev),
                       f"grad-s{step}-mb{mb}-{rank}-{pp_prev}",
                       cpu={"peer": pp_prev, "nelems": act_bytes // 2},
                       deps=[len(ops) - 1]))
    dp_ops = [i for i, op in enumerate(ops) if op.stream == DP_STREAM]
    if cfg.small_collectives:
        small_all_reduces(cfg, rank, step, add, dp_ops)
    add(Op("kernel", "multi_tensor_apply_kernel_adam", COMPUTE_STREAM, "compute",
           kernel_ns(cfg, 12 * 12 * h * h * cfg.layers_per_stage / cfg.tp, rank),
           deps=dp_ops, cpu={"op": "aten::_fused_adam_"},
           gate_ns=int(cfg.host_event_us * 1e3)))
    return _sped_up(cfg, ops)


def _sped_up(cfg: Config, ops: list[Op]) -> list[Op]:
    """Apply the config's what-if speedups: an op whose name (collectives:
    `all_reduce:tp`, `all_reduce:dp`; point-to-point: `send` / `recv`) contains a pattern
    runs k x faster."""
    for op in ops:
        label = f"{op.name}:{op.cpu.get('pg')}" if op.kind == "coll" else op.name
        for pattern, k in cfg.speedups:
            if pattern in label:
                op.dur_ns = max(1, int(op.dur_ns / k))
    return ops


def small_all_reduces(cfg: Config, rank: int, step: int, add: Any, dp_ops: list[int]) -> None:
    """Per step, once the gradients are reduced and before the optimizer: the loss
    averaged over DP and the gradient norm over TP, one element each (latency-bound: the
    small message size of each tier)."""
    g = groups(cfg, rank)
    for kind, tag in (("dp", "loss"), ("tp", "gradnorm")):
        if len(g[kind]) > 1:
            add(Op("coll", "all_reduce", COMPUTE_STREAM, "comm",
                   max(1000, link_ns(cfg, g[kind], 2)), g[kind],
                   f"{kind}{g[kind]}-s{step}-{tag}", deps=list(dp_ops),
                   cpu={"pg": kind, "nelems": 1}))


def simulate(cfg: Config) -> tuple[dict[int, list[Op]], dict[int, list[tuple[int, int]]]]:
    """Run every rank's steps; returns the ops per rank and the CPU step spans."""
    programs: dict[int, list[Op]] = {r: [] for r in range(cfg.world)}
    step_spans: dict[int, list[tuple[int, int]]] = {r: [] for r in range(cfg.world)}
    cpu_ready = dict.fromkeys(range(cfg.world), 10_000_000)
    for step in range(1, cfg.warmup_steps + cfg.steps + 1):
        progs = {r: program_builder(cfg)(cfg, r, step) for r in range(cfg.world)}
        step_start = dict(cpu_ready)
        for r, ops in progs.items():
            t = step_start[r] + int((cfg.host_gap_ms + cfg.host_ms) * 1e6) + 20_000
            graph_launch = t
            for op in ops:
                if op.cpu.get("graph") and not op.cpu.get("graph_first"):
                    op.launch_ns = graph_launch  # replayed by the one graph launch
                    continue
                t += 12_000 if op.kind != "kernel" else 8_000  # CPU time per launch
                op.launch_ns = graph_launch = t
        _run_gpu(progs)
        for r, ops in progs.items():
            end = max(op.end for op in ops if op.end is not None)
            cpu_ready[r] = end + 15_000 + 5_000
            if step > cfg.warmup_steps:  # warmup steps are run, not written
                step_spans[r].append((step_start[r], end + 15_000))
                programs[r].extend(ops)
    return programs, step_spans


def _run_gpu(progs: dict[int, list[Op]]) -> None:
    """Resolve start/end of every op: stream order, dependencies, and collectives that
    end together (last arrival + transfer time) across their group."""
    pos = dict.fromkeys(progs, 0)
    last_on_stream: dict[tuple[int, int], int] = {}
    arrivals: dict[str, dict[int, tuple[int, Op]]] = {}
    while any(pos[r] < len(ops) for r, ops in progs.items()):
        progressed = False
        for r, ops in progs.items():
            while pos[r] < len(ops):
                i = pos[r]
                op = ops[i]
                prev = last_on_stream.get((r, op.stream))
                blockers = ([prev] if prev is not None else []) + op.deps
                if any(ops[d].end is None for d in blockers):
                    break
                if i and not _host_synced(ops, i):
                    break
                dep_end = max([ops[d].end or 0 for d in blockers], default=0)
                gate = dep_end + op.gate_ns if op.deps and op.gate_ns else 0
                ready = max([op.launch_ns + 2_000, gate] + [ops[d].end for d in blockers])  # type: ignore[misc]
                # what set the start: the stream, then the dependencies (a gate counts from
                # the latest of them), then the launch
                gated = gate == ready and bool(gate)
                op.why = next((ops[d] for d in blockers if ops[d].end == ready),
                              max((ops[d] for d in op.deps), key=lambda o: o.end or 0)
                              if gated else "launch")
                last_on_stream[(r, op.stream)] = i
                pos[r] += 1
                progressed = True
                if op.kind == "kernel":
                    op.start, op.end = ready, ready + op.dur_ns
                    continue
                members = arrivals.setdefault(op.key, {})
                members[r] = (ready, op)
                if len(members) == len(op.group):
                    last = max(t for t, _ in members.values())
                    lasts = [mop for t, mop in members.values() if t == last]
                    for t, mop in members.values():
                        mop.start, mop.end = t, last + mop.dur_ns
                        # in a tie the path stays on the member's own rank
                        mop.last = mop if mop in lasts else min(lasts, key=lambda o: o.rank)
        if not progressed:
            raise RuntimeError("simulation deadlock")


def _host_synced(ops: list[Op], i: int) -> bool:
    """After a synchronizing op the host waits for it, runs its CPU work, then launches
    the rest: shift the launches from op i on. False while the synced op is unfinished."""
    synced = ops[i - 1]
    host_ns = synced.cpu.get("sync_host_ns")
    if not host_ns:
        return True
    if synced.end is None:
        return False
    delta = synced.end + 1_000 + host_ns + 8_000 - ops[i].launch_ns
    for later in ops[i:] if delta > 0 else ():
        later.launch_ns += delta
    return True


# ------------------------------------------------------------------ ground truth
def program_builder(cfg: Config) -> Any:
    """build_program, or the builder of one of sim_shapes' / sim_roofline's shapes."""
    if cfg.shape == "megatron":
        return build_program
    return shape_module(cfg).BUILDERS[cfg.shape]


def shape_module(cfg: Config) -> Any:
    """The module of a shape other than megatron (sim_shapes, sim_roofline)."""
    import sim_roofline
    import sim_shapes
    return sim_roofline if cfg.shape in sim_roofline.BUILDERS else sim_shapes


def ground_truth(cfg: Config, programs: dict[int, list[Op]], quantum: int,
                 spans: dict[int, list[tuple[int, int]]] | None = None) -> dict[str, Any]:
    """Attribution per rank and step from the simulator's own intervals (docs/attribution.md),
    with the idle split (sample_traces/sim_idle.py). Graph launches the trace does not link
    to their kernels (graph_link none) make every window the CPU step (`spans`)."""
    per_rank = {}
    instances = collective_instances(programs)
    for r, ops in programs.items():
        idle_facts = _idle_facts(cfg, ops, quantum, (spans or {}).get(r, []))
        ivs: list[tuple[int, int, int]] = []
        for op in ops:
            s, e = _q(op.start, quantum), _q(op.end, quantum)
            if op.kind == "kernel":
                # a comm kernel of one GPU (DeepEP's get_dispatch_layout) waits for no
                # peer: all of it is communication
                cat = {"compute": 0, "recompute": 1, "comm": 2, "memory": 5}[op.category]
                ivs.append((s, e, cat))
            elif op.kind == "p2p":
                ivs.append((s, e, 4))
            else:
                d = e - s
                d_min = min(_q(o.end, quantum) - _q(o.start, quantum)
                            for o in instances[op.key])
                ivs.append((s, s + (d - d_min), 3))
                ivs.append((s + (d - d_min), e, 2))
        steps = sorted({op.step for op in ops})
        first = {k: min(_q(op.start, quantum) for op in ops if op.step == k) for k in steps}
        last = {k: max(_q(op.end, quantum) for op in ops if op.step == k) for k in steps}
        rows = []
        for k in steps:
            has_next = k + 1 in first
            ws, we = first[k], first[k + 1] if has_next else last[k]
            if cfg.graph_link == "none" and spans is not None:  # window_source cpu_step
                ws, we = (_q(t, quantum) for t in spans[r][k - 1])
            rows.append({"step": k, "has_successor": has_next, "window_start_ns": ws,
                         "window_end_ns": we, **_sweep(ivs, ws, we),
                         **window_split(*idle_facts[:2], ws, we, *idle_facts[2:])})
        per_rank[str(r)] = rows
    return {"categories": list(CATEGORIES), "per_rank": per_rank}




def _idle_facts(cfg: Config, ops: list[Op], quantum: int, spans: list[tuple[int, int]]
                ) -> tuple[list[tuple[int, int]], dict[int, tuple[int, int]], set[int],
                           list[tuple[int, int]]]:
    """What the idle split needs of one rank: every GPU interval, the launch call (2 us,
    as TraceWriter.launch writes it) of the ops starting at each time, the earliest first,
    the ends of the ops the host synchronized on, and the DataLoader spans (as written by
    write_set)."""
    busy = [(_q(op.start, quantum), _q(op.end, quantum)) for op in ops]
    starts: dict[int, tuple[int, int]] = {}
    for op in ops:
        s = _q(op.start, quantum)
        call = (_q(op.launch_ns, quantum), _q(op.launch_ns + 2_000, quantum))
        starts[s] = min(starts.get(s, call), call)
    syncs = {_q(op.end, quantum) for op in ops if op.cpu.get("sync_host_ns")}
    gap = int(cfg.host_gap_ms * 1e6)
    loader = [(_q(s + 5_000, quantum), _q(s + 5_000 + gap, quantum)) for s, _ in spans] \
        if gap else []
    return busy, starts, syncs, loader


def model_spec(cfg: Config) -> dict[str, Any]:
    """The model as a stepscope --model spec (PaLM convention, full attention): the
    simulated layers have 12 h^2 weights each and no embedding."""
    layers = cfg.layers_per_stage * cfg.pp
    return {"n_params": 12 * cfg.hidden**2 * layers, "n_layers": layers,
            "hidden": cfg.hidden, "seq_len": cfg.seq,
            "global_batch_tokens": cfg.microbatches * cfg.micro_batch * cfg.seq * cfg.dp,
            "attention": "full", "convention": "palm"}


def mfu_truth(cfg: Config, programs: dict[int, list[Op]], facts: dict[str, Any]
              ) -> dict[str, Any]:
    """MFU / HFU from the simulator's own FLOPs and the ground-truth step times."""
    first = cfg.warmup_steps + 1  # the first written step
    model = sum(op.flops for ops in programs.values() for op in ops
                if op.step == first and op.kind == "kernel" and op.category == "compute")
    recompute = sum(op.flops for ops in programs.values() for op in ops
                    if op.step == first and op.category == "recompute")
    # FlashAttention backward re-computes QK^T: 2.5x forward instead of the model's 2x
    fa_extra = sum(0.25 * op.flops for ops in programs.values() for op in ops
                   if op.step == first and op.cpu.get("fwd_op") == "aten::_flash_attention_forward")
    per_rank = []
    for rows in facts["per_rank"].values():
        full = [r for r in rows if r["has_successor"]]
        per_rank.append(sum(r["window_end_ns"] - r["window_start_ns"] for r in full) / len(full))
    step_s = sum(per_rank) / len(per_rank) / 1e9
    peak = cfg.truth_peak_tflops * 1e12  # analyzers/data/peaks.json
    denom = step_s * cfg.world * peak
    return {"model_flops_per_step": model, "recompute_flops_per_step": recompute,
            "peak_flops_per_gpu": peak, "dtype": cfg.dtype, "step_time_ms": step_s * 1e3,
            "mfu": model / denom, "hfu": (model + recompute + fa_extra) / denom}


def collective_instances(programs: dict[int, list[Op]]) -> dict[str, list[Op]]:
    """Every op of every rank by its `key` (what the participants of one collective or
    send/recv pair share), in rank then program order: one pass over all ops, so the
    ground truth's lookups are linear in ranks (a scan of all programs per instance was
    quadratic: 4,096 ranks of TP8 x PP8 ran over 60 CPU-minutes unfinished)."""
    instances: dict[str, list[Op]] = {}
    for ops in programs.values():
        for op in ops:
            instances.setdefault(op.key, []).append(op)
    return instances


def clock_lead_ns(cfg: Config, host: int, t: int) -> int:
    """How far node `host`'s clock leads the true time at simulated time t (ns)."""
    offset = (int(cfg.clock_offsets_us[host] * 1e3) if cfg.clock_offsets_us
              else int(host * cfg.clock_offset_ms * 1e6))
    drift = cfg.clock_drift_ppm[host] * 1e-6 if cfg.clock_drift_ppm else 0.0
    return offset + round(drift * t)


def clocks_truth(cfg: Config) -> dict[str, Any]:
    """Each node's clock: its lead over the true time at time 0 and its drift (issue 46);
    the ends of matched collectives and send/recv pairs coincide in true time here, so
    after a perfect alignment they disagree by 0 µs (`end_residual_us`)."""
    nodes = (cfg.world + cfg.gpus_per_node - 1) // cfg.gpus_per_node
    return {"hosts": {f"node{h:03d}": {"offset_ns": clock_lead_ns(cfg, h, 0),
                                        "drift_ppm": (cfg.clock_drift_ppm[h]
                                                      if cfg.clock_drift_ppm else 0.0)}
                      for h in range(nodes)},
            "base_ns": BASE_NS, "end_residual_us": 0.0}


def _q(t: int | None, quantum: int) -> int:
    assert t is not None
    return (t // quantum) * quantum


def _sweep(ivs: list[tuple[int, int, int]], ws: int, we: int) -> dict[str, int]:
    """Priority sweep of one window: each instant to the first running category."""
    points = sorted({ws, we} | {t for s, e, _ in ivs for t in (s, e) if ws < t < we})
    out = dict.fromkeys(CATEGORIES, 0)
    for a, b in zip(points, points[1:], strict=False):
        active = [c for s, e, c in ivs if s <= a and e >= b and e > s]
        out[CATEGORIES[min(active)] if active else "idle"] += b - a
    return {f"{k}_ns": v for k, v in out.items()}


# ------------------------------------------------------------------ trace writing
def _forward_dims(op: str, shape: tuple[int, ...]) -> dict[str, Any]:
    """Input Dims of a forward op as PyTorch records them (record_shapes)."""
    if op == "aten::linear" and shape:
        m, k, n = shape
        return {"Input Dims": [[m, k], [n, k], [n]]}
    if op == "aten::_flash_attention_forward" and shape:
        return {"Input Dims": [list(shape), list(shape), list(shape)]}
    if op == "aten::gelu" and shape:
        return {"Input Dims": [list(shape)]}
    return {}


def _forward_primitive(op: str, shape: tuple[int, ...]) -> tuple[str | None, dict[str, Any]]:
    """The primitive a forward op calls (the one that launches the kernel)."""
    if op == "aten::linear" and shape:
        m, k, n = shape
        return "aten::addmm", {"Input Dims": [[n], [m, k], [k, n]]}
    return None, {}


def _backward_op(fwd_op: str, shape: tuple[int, ...]) -> tuple[str, dict[str, Any]]:
    """The op launching a backward kernel, shaped so its FLOPs are 2x the forward's
    (the simulator fuses data and weight gradients into one kernel)."""
    if fwd_op == "aten::_flash_attention_forward" and shape:
        return "aten::_flash_attention_backward", {"Input Dims": [list(shape)] * 4}
    if fwd_op == "aten::linear" and shape:
        m, k, n = shape
        return "aten::mm", {"Input Dims": [[m, 2 * k], [2 * k, n]]}
    if fwd_op == "aten::gelu" and shape:
        return "aten::gelu_backward", {"Input Dims": [list(shape), list(shape)]}
    return "aten::mul", {}



class TraceWriter:
    """Kineto JSON events of one rank."""

    def __init__(self, cfg: Config, rank: int) -> None:
        self.cfg, self.rank = cfg, rank
        self.pid, self.tid, self.bwd_tid = 1000 + rank, 1000 + rank, 5000 + rank
        self.events: list[dict[str, Any]] = []
        self.ext = rank * 1_000_000
        self.corr = rank * 1_000_000
        self.seq = 0
        host = rank // cfg.gpus_per_node
        self.offset = clock_lead_ns(cfg, host, 0)
        self.drift = cfg.clock_drift_ppm[host] * 1e-6 if cfg.clock_drift_ppm else 0.0
        self.quantum = 1000 if cfg.ts_style == "int_us" else 1

    @property
    def host(self) -> str:
        return f"node{self.rank // self.cfg.gpus_per_node:03d}"

    @property
    def file_name(self) -> str:
        """rank<r>.json.gz, or tensorboard_trace_handler's `{host}_{pid}.{ms}.pt.trace.json.gz`."""
        if self.cfg.host_naming == "tensorboard":
            return f"{self.host}_{self.pid}.{BASE_NS // 1_000_000 + self.rank}.pt.trace.json.gz"
        return f"rank{self.rank}.json.gz"

    def ts(self, t: int) -> float | int:
        t = _q(t, self.quantum) + self.offset + round(self.drift * t)
        if self.cfg.ts_style == "int_us":
            return (BASE_NS + t) // 1000
        return round(t / 1000, 3)

    def dur(self, s: int, e: int) -> float | int:
        s, e = _q(s, self.quantum), _q(e, self.quantum)
        if self.drift:  # the local clock's duration: its ends are ts(s) and ts(e)
            s, e = s + round(self.drift * s), e + round(self.drift * e)
        return (e - s) // 1000 if self.cfg.ts_style == "int_us" else round((e - s) / 1000, 3)

    def x(self, cat: str, name: str, s: int, e: int, tid: int | str, args: dict[str, Any],
          pid: int | None = None) -> None:
        self.events.append({"ph": "X", "cat": cat, "name": name,
                            "pid": self.pid if pid is None else pid, "tid": tid,
                            "ts": self.ts(s), "dur": self.dur(s, e), "args": args})

    def cpu_op(self, name: str, s: int, e: int, tid: int, **args: Any) -> int:
        self.ext += 1
        if "Input Dims" in args and self.cfg.input_types:  # a type per input
            torch_type = "float" if self.cfg.dtype == "fp32" else "c10::BFloat16"
            args["Input type"] = [torch_type] * len(args["Input Dims"])
        self.x("cpu_op", name, s, e, tid, {"External id": self.ext, **args})
        return self.ext

    def launch(self, op: Op, t: int, tid: int, ext: int) -> None:
        self.corr += 1
        api = "cudaMemcpyAsync" if op.category == "memory" else "cudaLaunchKernel"
        self.x("cuda_runtime", api, t, t + 2_000, tid,
               {"External id": ext, "cbid": 211, "correlation": self.corr})
        device = self.rank % self.cfg.gpus_per_node
        gpu_args: dict[str, Any] = {"External id": ext, "device": device,
                                    "stream": op.stream, "correlation": self.corr}
        cat = "gpu_memcpy" if op.category == "memory" else "kernel"
        if op.kind != "kernel":
            gpu_args.update(self.comm_args(op))
        assert op.start is not None and op.end is not None
        self.x(cat, self.kernel_name(op), op.start, op.end, op.stream, gpu_args,
               pid=self.rank % self.cfg.gpus_per_node)

    def kernel_name(self, op: Op) -> str:
        if op.kind == "kernel":
            return op.name
        coll = "SendRecv" if op.kind == "p2p" else "AllReduce"
        if self.cfg.nccl_era == "2.17":
            suffix = "_RING_SIMPLE_Sum_int8_t" if op.kind == "p2p" else "_RING_LL_Sum_bfloat16"
            return f"ncclKernel_{coll}{suffix}(ncclDevComm*, unsigned long, ncclWork*)"
        suffix = "" if op.kind == "p2p" else (
            "_Sum_f32_RING_LL" if self.cfg.dtype == "fp32" else "_Sum_bf16_RING_LL")
        return f"ncclDevKernel_{coll}{suffix}(ncclDevKernelArgsStorage<4096ul>)"

    def comm_args(self, op: Op) -> dict[str, Any]:
        g = groups(self.cfg, self.rank)
        if op.kind == "p2p":
            kind, members = "pp", op.group
            name = "send" if op.name == "send" else "recv"
            pg = pg_name(self.cfg, "pp", g["pp"])
            peer = op.cpu["peer"]
            args = {"Collective name": name, "Group size": len(g["pp"]),
                    "Process Group Name": pg, "Process Group Description": PG_NAMES["pp"][1],
                    "Process Group Ranks": str(list(g["pp"]))}
            if self.cfg.p2p_meta == "2.3":  # the peer's rank inside the group
                args["Rank"] = g["pp"].index(peer)
            else:
                args["Dst Rank" if name == "send" else "Src Rank"] = peer
        else:
            kind = op.cpu["pg"]
            members = g[kind]
            args = {"Collective name": "allreduce", "Group size": len(members),
                    "Process Group Name": pg_name(self.cfg, kind, members),
                    "Process Group Description": PG_NAMES[kind][1],
                    "Process Group Ranks": str(list(members))}
        args.update({"dtype": "Float" if self.cfg.dtype == "fp32" else "BFloat16",
                     "In msg nelems": op.cpu["nelems"],
                     "Out msg nelems": op.cpu["nelems"], "In split size": "[]",
                     "Out split size": "[]"})
        return args

    def write_op(self, op: Op) -> None:
        """CPU ops that launched `op`, nested like PyTorch's."""
        # every chain fits in [launch - 3 µs, launch + 4 µs]; launches are >= 8 µs apart
        t = op.launch_ns - 3_000
        c = op.cpu
        if op.kind == "kernel" and c.get("op") == "backward":
            node = {"aten::linear": "AddmmBackward0",
                    "aten::_flash_attention_forward": "FlashAttentionBackward0",
                    "aten::gelu": "GeluBackward0"}.get(c["fwd_op"], "MulBackward0")
            self.seq += 1
            self.cpu_op(f"autograd::engine::evaluate_function: {node}", t, t + 7_000,
                        self.bwd_tid, **{"Sequence number": self.seq, "Fwd thread id": 1})
            self.cpu_op(node, t + 500, t + 6_500, self.bwd_tid,
                        **{"Sequence number": self.seq, "Fwd thread id": 1})
            name, dims = _backward_op(c["fwd_op"], c["shape"])
            ext = self.cpu_op(name, t + 1_000, t + 6_000, self.bwd_tid, **dims)
            self.launch(op, t + 3_000, self.bwd_tid, ext)
        elif op.kind == "kernel" and c.get("recompute"):
            # a forward op re-run inside a backward node (checkpointing)
            node = ("CheckpointFunctionBackward" if self.cfg.recompute == "reentrant"
                    else "AddmmBackward0")
            self.seq += 1
            self.cpu_op(f"autograd::engine::evaluate_function: {node}", t, t + 7_000,
                        self.bwd_tid, **{"Sequence number": self.seq, "Fwd thread id": 1})
            self.cpu_op(node, t + 500, t + 6_500, self.bwd_tid,
                        **{"Sequence number": self.seq, "Fwd thread id": 1})
            self.seq += 1
            outer = self.cpu_op(c["op"], t + 1_000, t + 6_000, self.bwd_tid,
                                **{"Sequence number": self.seq, "Fwd thread id": 0,
                                   **_forward_dims(c["op"], c["shape"])})
            name, dims = _forward_primitive(c["op"], c["shape"])
            ext = (self.cpu_op(name, t + 1_500, t + 5_500, self.bwd_tid, **dims)
                   if name else outer)
            self.launch(op, t + 3_000, self.bwd_tid, ext)
        elif c.get("sync_host_ns"):
            self.write_sync(op, t)
        elif op.kind == "kernel":
            tid = self.tid
            self.seq += 1
            shape = c.get("shape", ())
            outer = self.cpu_op(c.get("op", "aten::add"), t, t + 7_000, tid,
                                **{"Sequence number": self.seq, "Fwd thread id": 0,
                                   **_forward_dims(c.get("op", ""), shape)})
            name, dims = _forward_primitive(c.get("op", ""), shape)
            ext = self.cpu_op(name, t + 1_000, t + 6_000, tid, **dims) if name else outer
            self.launch(op, t + 3_000, tid, ext)
        else:
            tid = self.bwd_tid if op.stream == DP_STREAM else self.tid
            name = "c10d::allreduce_" if op.kind == "coll" else (
                "c10d::send" if op.name == "send" else "c10d::recv_")
            self.cpu_op(name, t, t + 7_500, tid)
            args = self.comm_args(op)
            rpc = self.cpu_op("record_param_comms", t + 500, t + 7_000, tid, **args)
            if op.kind == "p2p" and self.cfg.p2p_meta == "2.3":
                title = f"nccl:{op.name}"
            elif op.kind == "p2p":
                me = op.group.index(self.rank) if self.rank in op.group else 0
                peer_local = 1 - me
                title = (f"nccl:send {me}->{peer_local}" if op.name == "send"
                         else f"nccl:recv {me}<-{peer_local}")
            else:
                title = "nccl:all_reduce"
            self.ext += 1
            self.x("user_annotation", title, t + 1_000, t + 6_500, tid, {"External id": self.ext})
            self.launch(op, t + 3_000, tid, rpc)

    def write_sync(self, op: Op, t: int) -> None:
        """`loss.item()`: a tiny DtoH copy, cudaStreamSynchronize until it is done, then
        CPU work (`aten::index`) before the host launches anything else."""
        assert op.end is not None
        done, host = op.end, op.cpu["sync_host_ns"]
        self.cpu_op("aten::item", t, done + 3_000, self.tid)
        ext = self.cpu_op("aten::_local_scalar_dense", t + 1_000, done + 2_000, self.tid)
        self.launch(op, t + 3_000, self.tid, ext)
        self.corr += 1  # a correlation no GPU op carries
        self.x("cuda_runtime", "cudaStreamSynchronize", t + 5_500, done + 1_000, self.tid,
               {"cbid": 131, "correlation": self.corr})
        self.cpu_op("aten::index", done + 4_000, done + 4_000 + host, self.tid)
    def step_sync(self, ops: list[Op]) -> None:
        """`loss.item()` after the step's last launch: the CPU blocks in
        cudaDeviceSynchronize until the step's GPU work ends (+5 us)."""
        t0 = max(op.launch_ns for op in ops) + 6_000
        t1 = max(op.end for op in ops if op.end is not None) + 5_000
        self.cpu_op("aten::item", t0, t1 + 1_000, self.tid)
        self.corr += 1
        self.x("cuda_runtime", "cudaDeviceSynchronize", t0 + 500, t1, self.tid,
               {"cbid": 165, "correlation": self.corr})

    def document(self) -> dict[str, Any]:
        cfg = self.cfg
        g = groups(cfg, self.rank)
        pg_config = [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl",
                      "pg_size": cfg.world, "ranks": list(range(cfg.world))}]
        for kind in ("tp", "dp", "pp"):
            if len(g[kind]) > 1:
                pg_config.append({"pg_name": pg_name(cfg, kind, g[kind]),
                                  "pg_desc": PG_NAMES[kind][1], "backend_config": "cuda:nccl",
                                  "pg_size": len(g[kind]), "ranks": list(g[kind])})
        doc: dict[str, Any] = {
            "schemaVersion": 1,
            "deviceProperties": [{"id": i, "name": cfg.device_name, "totalGlobalMem": 85520809984,
                                  "computeMajor": cfg.compute_major, "computeMinor": 0,
                                  "numSms": 132}
                                 for i in range(cfg.gpus_per_node)],
            "distributedInfo": {"backend": "nccl", "rank": self.rank, "world_size": cfg.world,
                                "pg_count": len(pg_config), "pg_config": pg_config,
                                "nccl_version": "2.17.1" if cfg.nccl_era == "2.17" else "2.21.5"},
            "record_shapes": 1,
            "host_name": self.host,
            "traceEvents": self.events,
            "traceName": f"rank{self.rank}.json",
        }
        if cfg.host_naming == "tensorboard":  # no host_name; the handler's file name
            del doc["host_name"]
            doc["traceName"] = f"/checkpoints/prof/{self.file_name}"
        if cfg.ts_style == "relative":
            doc["displayTimeUnit"] = "ms"
            doc["baseTimeNanoseconds"] = BASE_NS
        return doc


def writer_class(cfg: Config) -> type[TraceWriter]:
    if cfg.shape == "megatron":
        return TraceWriter
    module = shape_module(cfg)
    return module.RooflineWriter if hasattr(module, "RooflineWriter") else module.ShapesWriter


def write_set(cfg: Config, out_root: Path, truth: bool = True) -> Path:
    programs, spans = simulate(cfg)
    out = out_root / cfg.name
    out.mkdir(parents=True, exist_ok=True)
    quantum = 1000 if cfg.ts_style == "int_us" else 1
    logs: dict[int, Any] = {}  # what a shape's writer knows beyond the ops (its allocator)
    for r, ops in programs.items():
        w = writer_class(cfg)(cfg, r)
        w.events.append({"ph": "M", "name": "thread_name", "pid": w.pid, "tid": w.tid,
                         "args": {"name": f"thread {w.tid} (python)"}})
        for k, (s, e) in enumerate(spans[r], start=cfg.warmup_steps + 1):
            if cfg.step_marker != "none":
                w.ext += 1
                name = f"ProfilerStep#{k}" if cfg.step_marker == "ProfilerStep" else cfg.step_marker
                w.x("user_annotation", name, s, e, w.tid, {"External id": w.ext})
            if cfg.host_gap_ms:
                w.ext += 1
                w.x("user_annotation", DATALOADER,
                    s + 5_000, s + 5_000 + int(cfg.host_gap_ms * 1e6), w.tid,
                    {"External id": w.ext})
            if cfg.step_sync:
                w.step_sync([op for op in ops if op.step == k])
        for op in ops:
            w.write_op(op)
        if hasattr(w, "truth"):
            logs[r] = w.truth
        # mtime=0: a regenerated set is byte-identical (the header's time stamp made
        # every .json.gz differ on each run, the traces inside unchanged)
        with (gzip.GzipFile(out / w.file_name, "wb", compresslevel=9, mtime=0) as gz,
              io.TextIOWrapper(gz, encoding="utf-8") as fh):
            json.dump(w.document(), fh, separators=(",", ":"))
        del w
    (out / "model.json").write_text(json.dumps(model_spec(cfg), indent=1) + "\n")
    if truth:
        facts = ground_truth(cfg, programs, quantum, spans)
        facts["mfu"] = mfu_truth(cfg, programs, facts)
        if logs:
            facts.update(shape_module(cfg).truth(cfg, programs, facts, spans, logs))
        # the per-node clock fields only where set: the bundled sets' truth stays as it was
        facts["config"] = {k: v for k, v in vars(cfg).items()
                           if v or k not in ("clock_offsets_us", "clock_drift_ppm")}
        facts["world_size"] = cfg.world
        if cfg.clock_offsets_us or cfg.clock_drift_ppm:
            facts["clocks"] = clocks_truth(cfg)
        if cfg.step_sync:
            from sim_critical_path import critical_path_truth
            facts["critical_path"] = critical_path_truth(cfg, programs, facts, simulate,
                                                         BASE_NS)
        (out / "ground_truth.json").write_text(json.dumps(facts, indent=1) + "\n")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "simulated")
    parser.add_argument("--sets", default=",".join(SETS),
                        help="comma-separated, from "
                             f"{', '.join(dict.fromkeys([*SETS, *PLAN_SETS, *BENCH_SETS]))}")
    parser.add_argument("--no-truth", action="store_true", help="skip ground_truth.json")
    args = parser.parse_args(argv)
    names = [n for n in args.sets.split(",") if n]
    known = {**SETS, **PLAN_SETS, **BENCH_SETS}
    unknown = sorted(set(names) - set(known))
    if unknown:
        parser.error(f"unknown set(s) {', '.join(unknown)}; choose from {', '.join(known)}")
    for name in names:
        path = write_set(known[name], args.out, truth=not args.no_truth)
        print(f"{name}: {known[name].world} ranks -> {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
