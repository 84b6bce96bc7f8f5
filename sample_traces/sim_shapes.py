"""Shapes of 2025-2026 jobs for the simulator (issue 20), with ground truth from
simulate_gpu.py's own intervals:

* `moe_ep`: expert parallelism with DeepEP-style kernels. Each layer pass runs two
  micro-batches: while one micro-batch's dispatch (or combine) runs on the communication
  stream, the other's attention (or experts) runs on the compute stream, as two-batch
  overlap schedules do; what compute cannot cover is exposed. The kernels are launched
  from C++ (no aten op, no record_param_comms, no NCCL name): only their names say they
  are communication. All-to-all semantics: an instance ends when the last rank of the EP
  group has arrived plus its transfer time; expert load differs per rank (`rank_skew`),
  so the early ranks wait at every exchange.
* `graph`: an inference decode step captured as a CUDA (or HIP) graph: eager input
  preparation, one cudaGraphLaunch / hipGraphLaunch that replays every layer (GEMMs,
  attention, a custom all-reduce across TP ranks), eager sampling and a copy back. Graph
  kernels carry the launch's correlation id and `graph id` / `graph node id` as Kineto
  writes them (CUPTI gives every kernel of a replay the launch's correlation id), or, with
  `graph_link = "none"`, correlation ids no runtime call in the trace has (the link is
  lost, as seen in ROCm traces of graph replays). ROCm flavour: hip* API names,
  roctracer metadata, GPU events on the HSA agent id (local GPU + CPU agents).
"""

from __future__ import annotations

from typing import Any

from simulate_gpu import COMPUTE_STREAM, Config, Op, TraceWriter, groups

EP_STREAM = 31  # DeepEP's own communication stream
EP_GROUP = "EXPERT_MODEL_PARALLEL_GROUP"

# DeepEP intranode kernels as Kineto writes their demangled names (EP 4).
DEEPEP = {
    "layout": "void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, "
              "int*, bool*, int, int, int, int, int)",
    "notify_dispatch": "void deep_ep::intranode::notify_dispatch<4>(int const*, int*, int, "
                       "int const*, int*, int, int, bool const*, int*, int*, int, int, void**, "
                       "int**, int)",
    "dispatch": "void deep_ep::intranode::dispatch<4, 768, 8192>(int4*, float*, long*, float*, "
                "int*, int*, int*, int4 const*, float const*, long const*, float const*, "
                "bool const*, int const*, int, int, int, int, int, int, int, void**, int, int, "
                "int)",
    "notify_combine": "void deep_ep::intranode::cached_notify_combine<4>(void**, int*, int, int, "
                      "int, int**, int)",
    "combine": "void deep_ep::intranode::combine<__nv_bfloat16, 4, 768, 4096>(__nv_bfloat16*, "
               "float*, __nv_bfloat16 const*, float const*, int const*, int const*, int const*, "
               "int const*, void**, int, int, int, int, int, int, int, int)",
}
MOE_ATTN = "flash_fwd_kernel"
MOE_ROUTER = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_router"
MOE_EXPERTS = "sm90_xmma_gemm_grouped_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_experts"
# per micro-batch and layer pass (ns); backward compute is 2x
MOE_NS = {"attn": 700_000, "router": 30_000, "experts": 900_000, "layout": 20_000,
          "notify": 40_000, "dispatch": 1_100_000, "combine": 1_100_000}


def _skew(cfg: Config, rank: int) -> float:
    return 1.0 + cfg.ep_imbalance * rank


def build_moe_program(cfg: Config, rank: int, step: int) -> list[Op]:
    """One training step of an EP group: forward and backward layer passes, each over two
    micro-batches overlapped across the compute and EP streams, then the optimizer."""
    ep = tuple(range(cfg.world))
    ops: list[Op] = []
    done: dict[int, int] = {}  # micro-batch -> index of its last combine

    def add(op: Op) -> int:
        op.step = step
        ops.append(op)
        return len(ops) - 1

    def kernel(name: str, ns: float, deps: list[int], op: str, kind: str = "compute") -> int:
        return add(Op("kernel", name, COMPUTE_STREAM, kind, int(ns), deps=deps,
                      cpu={"op": op}))

    def exchange(what: str, mb: int, tag: str, deps: list[int]) -> int:
        return add(Op("libcoll", DEEPEP[what], EP_STREAM, "comm",
                      MOE_NS["notify" if what.startswith("notify") else what], ep,
                      f"ep-s{step}-{tag}-mb{mb}-{what}", deps=deps))

    passes = [("fwd", layer) for layer in range(cfg.layers_per_stage)]
    passes += [("bwd", layer) for layer in reversed(range(cfg.layers_per_stage))]
    for direction, layer in passes:
        mult = 1 if direction == "fwd" else 2
        tag = f"{direction}{layer}"
        attn: dict[int, int] = {}
        for mb in (0, 1):
            prev = [done[mb]] if mb in done else []
            # the dispatch's first phase: the token exchange's time, not compute (issue 41 §11)
            kernel(DEEPEP["layout"], MOE_NS["layout"], prev, "deep_ep::get_dispatch_layout",
                   "comm")
            kernel(MOE_ROUTER, MOE_NS["router"] * mult, [], "aten::mm")
            attn[mb] = kernel(MOE_ATTN, MOE_NS["attn"] * mult, [], "aten::_flash_attention_forward")
            exchange("notify_dispatch", mb, tag, [attn[mb]])
            exchange("dispatch", mb, tag, [])
        for mb in (0, 1):
            dispatched = max(i for i, o in enumerate(ops)
                             if o.key == f"ep-s{step}-{tag}-mb{mb}-dispatch")
            experts = kernel(MOE_EXPERTS, MOE_NS["experts"] * mult * _skew(cfg, rank),
                             [dispatched], "aten::_grouped_mm")
            exchange("notify_combine", mb, tag, [experts])
            done[mb] = exchange("combine", mb, tag, [])
    kernel("multi_tensor_apply_kernel_adam", 400_000, list(done.values()), "aten::_fused_adam_")
    return ops


# Decode step of one transformer layer in a CUDA graph, per TP rank (ns).
CUDA_LAYER = (
    ("kernel", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_qkv", 40_000),
    ("kernel", "flash_fwd_splitkv_kernel", 60_000),
    ("kernel", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_proj", 25_000),
    ("libcoll", "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 2>(vllm::RankData*, "
                "vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)", 15_000),
    ("kernel", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x128x64_fc1", 60_000),
    ("kernel", "void vllm::act_and_mul_kernel<c10::BFloat16>(c10::BFloat16*, "
               "c10::BFloat16 const*, int)", 10_000),
    ("kernel", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_fc2", 50_000),
    ("libcoll", "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 2>(vllm::RankData*, "
                "vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)", 15_000),
)
HIP_LAYER = (
    ("kernel", "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT64x64x64_MI16x16x1_qkv", 45_000),
    ("kernel", "void paged_attention_ll4mi_QKV_mfma16_kernel<__hip_bfloat16, 16, 128>"
               "(__hip_bfloat16 const*)", 70_000),
    ("kernel", "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT64x64x64_MI16x16x1_proj", 30_000),
    ("kernel", "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT64x128x64_MI16x16x1_fc1", 70_000),
    ("kernel", "void vllm::act_and_mul_kernel<__hip_bfloat16>(__hip_bfloat16*, "
               "__hip_bfloat16 const*, int)", 12_000),
    ("kernel", "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT64x64x64_MI16x16x1_fc2", 60_000),
)


def build_graph_program(cfg: Config, rank: int, step: int) -> list[Op]:
    """One decode step: eager input preparation, one graph replay of every layer, eager
    sampling and the copy of the next tokens back to the host."""
    tp = groups(cfg, rank)["tp"]
    ops: list[Op] = []

    def add(op: Op) -> None:
        op.step = step
        ops.append(op)

    add(Op("kernel", "Memcpy HtoD (Pinned -> Device)", COMPUTE_STREAM, "memory", 3_000,
           cpu={"op": "aten::copy_"}))
    add(Op("kernel", "void at::native::index_elementwise_kernel<128, 4>(long, "
           "at::native::gpu_index_kernel)", COMPUTE_STREAM, "compute", 6_000,
           cpu={"op": "aten::index"}))
    layer_ops = HIP_LAYER if cfg.runtime == "hip" else CUDA_LAYER
    node = 0
    for layer in range(cfg.layers_per_stage):
        for j, (kind, name, ns) in enumerate(layer_ops):
            graph = {"graph": True, "graph_first": node == 0, "graph_node": node}
            node += 1
            if kind == "libcoll" and len(tp) > 1:
                add(Op("libcoll", name, COMPUTE_STREAM, "comm", ns, tp,
                       f"ar-s{step}-l{layer}-{j}-{tp}", cpu=graph))
            elif kind == "kernel":
                add(Op("kernel", name, COMPUTE_STREAM, "compute",
                       int(ns * (1.0 + cfg.ep_imbalance * rank)), cpu=graph))
    add(Op("kernel", "void at::native::(anonymous namespace)::sampling_kernel<float>(float*)",
           COMPUTE_STREAM, "compute", 20_000, cpu={"op": "aten::argmax"}))
    add(Op("kernel", "Memcpy DtoH (Device -> Pinned)", COMPUTE_STREAM, "memory", 4_000,
           cpu={"op": "aten::copy_"}))
    return ops


BUILDERS = {"moe_ep": build_moe_program, "graph": build_graph_program}


class ShapesWriter(TraceWriter):
    """Kineto events of the shapes above: kernels of other communication libraries,
    graph launches and replays, ROCm names and device numbering."""

    def __init__(self, cfg: Config, rank: int) -> None:
        super().__init__(cfg, rank)
        self.graph_corr = 0
        self.lost_corr = 900_000_000 + rank * 1_000_000  # ids no runtime call in the trace has

    @property
    def gpu(self) -> int:
        """The GPU events' device and pid: the local GPU, after ROCm's CPU agents."""
        return self.rank % self.cfg.gpus_per_node + self.cfg.device_offset

    def api(self, op: Op) -> str:
        prefix = "hip" if self.cfg.runtime == "hip" else "cuda"
        if op.cpu.get("graph"):
            return f"{prefix}GraphLaunch"
        return f"{prefix}MemcpyAsync" if op.category == "memory" else f"{prefix}LaunchKernel"

    def kernel_name(self, op: Op) -> str:
        return op.name if op.kind == "libcoll" else super().kernel_name(op)

    def launch(self, op: Op, t: int, tid: int, ext: int) -> None:
        """A runtime call (one per graph replay) and the GPU event it ran."""
        graph = bool(op.cpu.get("graph"))
        if not graph or op.cpu.get("graph_first"):
            self.corr += 1
            self.x("cuda_runtime", self.api(op), t, t + 2_000, tid,
                   {"External id": ext, "cbid": 311 if graph else 211, "correlation": self.corr})
            self.graph_corr = self.corr
        corr = self.corr
        if graph and self.cfg.graph_link == "none":
            self.lost_corr += 1
            corr = self.lost_corr
        args: dict[str, Any] = {"External id": ext, "device": self.gpu, "stream": op.stream,
                                "correlation": corr}
        if graph and self.cfg.runtime == "cuda":
            args.update({"graph id": 1, "graph node id": op.cpu["graph_node"]})
        if op.kind in ("coll", "p2p"):
            args.update(self.comm_args(op))
        cat = "gpu_memcpy" if op.category == "memory" else "kernel"
        assert op.start is not None and op.end is not None
        self.x(cat, self.kernel_name(op), op.start, op.end, op.stream, args, pid=self.gpu)

    def write_op(self, op: Op) -> None:
        if op.cpu.get("graph"):  # replayed: no aten op, one runtime call for the replay
            self.launch(op, op.launch_ns, self.tid, 0)
        elif op.kind == "libcoll":  # launched from C++: no aten op, no collective args
            self.launch(op, op.launch_ns, self.tid, 0)
        else:
            super().write_op(op)

    def document(self) -> dict[str, Any]:
        doc = super().document()
        cfg = self.cfg
        doc["deviceProperties"] = doc["deviceProperties"][:cfg.device_props or cfg.gpus_per_node]
        if cfg.shape == "moe_ep":
            ep = list(range(cfg.world))
            doc["distributedInfo"]["pg_config"].append(
                {"pg_name": "400", "pg_desc": EP_GROUP, "backend_config": "cuda:nccl",
                 "pg_size": len(ep), "ranks": ep})
            doc["distributedInfo"]["pg_count"] = len(doc["distributedInfo"]["pg_config"])
        if cfg.runtime == "hip":
            doc.update({"roctracer_version": 4.1, "hip_runtime_version": 60443483,
                        "hip_driver_version": 60443483})
        return doc
