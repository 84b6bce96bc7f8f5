"""Shape `roofline` for the simulator (issue 22 §2-§4), with ground truth from the
simulator's own knowledge:

* an MoE layer per rank, expert parallelism over the ranks of a node: attention (QKV
  GEMM, FlashAttention, projection), an all_to_all dispatch of the tokens to their experts
  (`all_to_allv` through record_param_comms with uneven `In/Out split size`), the
  expert's fc1 GEMM, GELU, fc2 GEMM on the tokens it received, an all_to_all combine back;
  backward in reverse (GEMMs at 2x the FLOPs, FlashAttention backward, GELU backward),
  then the optimizer. Every GEMM kind runs at a known share of the bf16 peak
  (EFFICIENCY), FlashAttention at ATTENTION_EFFICIENCY of its model FLOPs, the GELUs at
  HBM_SHARE of HBM bandwidth, so each kernel's achieved FLOP/s and bytes/s are known.
* routing: rank s sends R[s][d] tokens to the expert on rank d; rank HOT of each group
  receives (1 + ep_imbalance * ep) times the others' share, so its expert GEMMs are larger
  and every all_to_all is as long as its heaviest member's traffic (all members end
  together: the slowest sets the end).
* profile_memory: `[memory]` events in the current format (Addr, Bytes, Total
  Allocated, Total Reserved, Device Type/Id): the training state allocated before the
  first step, each forward op's output kept until its backward, a transient gradient per
  backward op, a pinned host buffer per micro-batch (a CPU event); reserved memory grows in
  SEGMENT blocks and never shrinks. The peak per rank and step and the allocations live
  at it come from the writer's own allocator.
"""

from __future__ import annotations

from typing import Any

from simulate_gpu import COMPUTE_STREAM, Config, Op, TraceWriter

EFFICIENCY = {"qkv": 0.72, "proj": 0.65, "fc1": 0.41, "fc2": 0.41}
ATTENTION_EFFICIENCY = 0.35
HBM_SHARE = 0.60
HBM_GBS = 3350.0          # analyzers/data/peaks.json, H100 SXM5
A2A_GBS = 100.0           # all_to_all bandwidth per rank (bytes of the busiest member)
SEGMENT = 32 << 20        # reserved memory grows in blocks of this size
EP_GROUP = "EXPERT_MODEL_PARALLEL_GROUP"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_"
GELU = "vectorized_elementwise_kernel_gelu"
A2A_KERNEL = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"
BF16 = 2


def ep_group(cfg: Config, rank: int) -> tuple[int, ...]:
    """The expert-parallel group of a rank: the ranks of its node."""
    size = min(cfg.world, cfg.gpus_per_node)
    first = rank // size * size
    return tuple(range(first, first + size))


def routing(cfg: Config, group: tuple[int, ...]) -> list[list[int]]:
    """R[s][d]: tokens of one micro-batch that group member s sends to member d's expert.
    Member HOT (the middle one) is the popular expert; rows sum to the tokens per rank."""
    n, tokens = len(group), cfg.micro_batch * cfg.seq
    hot = n // 2
    weights = [1.0 + (cfg.ep_imbalance * n if d == hot else 0.0) for d in range(n)]
    out = []
    for s in range(n):
        row = [int(tokens * w / sum(weights)) + ((s + d) % 3 - 1) * 8
               for d, w in enumerate(weights)]
        row[-1] += tokens - sum(row)
        out.append(row)
    return out


def _gemm_bytes(m: int, k: int, n: int, bias: bool) -> float:
    """Minimal traffic of a GEMM: read both operands (and the bias), write the result."""
    return BF16 * (m * k + k * n + m * n + (n if bias else 0))


def build_roofline_program(cfg: Config, rank: int, step: int) -> list[Op]:
    """One training step of the MoE layer(s) on one rank (see the module docstring)."""
    group = ep_group(cfg, rank)
    me = group.index(rank)
    route = routing(cfg, group)
    b, s, h = cfg.micro_batch, cfg.seq, cfg.hidden
    tokens, recv = b * s, sum(route[x][me] for x in range(len(group)))
    heads = cfg.heads
    peak = cfg.truth_peak_tflops * 1e12
    ops: list[Op] = []

    def add(op: Op) -> Op:
        op.step = step
        ops.append(op)
        return op

    def gemm(tag: str, m: int, k: int, n: int, bwd: bool, key: str) -> None:
        flops = 2.0 * m * k * n * (2 if bwd else 1)
        cpu: dict[str, Any] = {"layer": 0, "shape": (m, k, n), "tag": tag, "act": key}
        if bwd:
            cpu.update(op="backward", fwd_op="aten::linear",
                       bytes=_gemm_bytes(m, 2 * k, n, False), out_bytes=BF16 * m * k)
            name = GEMM.replace("_tn_", "_nt_") + tag + "_bwd"
        else:
            cpu.update(op="aten::linear", recompute=False, bytes=_gemm_bytes(m, k, n, True),
                       out_bytes=BF16 * m * n)
            name = GEMM + tag
        add(Op("kernel", name, COMPUTE_STREAM, "compute",
               max(1000, int(flops / (peak * EFFICIENCY[tag]) * 1e9)), flops=flops, cpu=cpu))

    def attention(bwd: bool, key: str) -> None:
        shape = (b, s, heads, h // heads)
        fwd_flops = 4.0 * b * s * s * h
        numel = b * s * h
        cpu: dict[str, Any] = {"layer": 0, "shape": shape, "tag": "attention", "act": key}
        if bwd:  # FlashAttention backward re-computes QK^T: executes 2.5x the forward
            cpu.update(op="backward", fwd_op="aten::_flash_attention_forward",
                       bytes=BF16 * 7 * numel, out_bytes=BF16 * 3 * numel,
                       exec_flops=2.5 * fwd_flops)
            flops, name = 2 * fwd_flops, "flash_bwd_kernel"
        else:
            cpu.update(op="aten::_flash_attention_forward", recompute=False,
                       bytes=BF16 * 4 * numel, out_bytes=BF16 * numel, exec_flops=fwd_flops)
            flops, name = fwd_flops, "flash_fwd_kernel"
        add(Op("kernel", name, COMPUTE_STREAM, "compute",
               int(flops / (peak * ATTENTION_EFFICIENCY) * 1e9), flops=flops, cpu=cpu))

    def gelu(bwd: bool, key: str) -> None:
        shape = (recv, 4 * h)
        nbytes = BF16 * recv * 4 * h * (3 if bwd else 2)
        cpu: dict[str, Any] = {"layer": 0, "shape": shape, "tag": "gelu", "act": key,
                               "bytes": nbytes, "out_bytes": BF16 * recv * 4 * h}
        cpu.update({"op": "backward", "fwd_op": "aten::gelu"} if bwd
                   else {"op": "aten::gelu", "recompute": False})
        add(Op("kernel", GELU + ("_bwd" if bwd else ""), COMPUTE_STREAM, "compute",
               int(nbytes / (HBM_GBS * 1e9 * HBM_SHARE) * 1e9), cpu=cpu))

    def all_to_all(tag: str, to_experts: bool, mb: int, key: str) -> None:
        n = len(group)
        sent = [route[me][d] for d in range(n)] if to_experts else \
            [route[x][me] for x in range(n)]
        got = [route[x][me] for x in range(n)] if to_experts else \
            [route[me][d] for d in range(n)]
        loads = [BF16 * h * max(tokens, sum(route[x][d] for x in range(n))) for d in range(n)]
        dur = int(max(loads) / (A2A_GBS * 1e9) * 1e9)
        add(Op("coll", "all_to_all", COMPUTE_STREAM, "comm", dur, group,
               f"a2a{group}-s{step}-mb{mb}-{tag}",
               cpu={"pg": "ep", "in_split": sent, "out_split": got, "hidden": h,
                    "act": key, "out_bytes": BF16 * h * sum(got),
                    "mean_bytes": BF16 * h * tokens, "max_load": max(loads)}))

    for mb in range(cfg.microbatches):
        add(Op("kernel", "Memcpy HtoD (Pinned -> Device)", COMPUTE_STREAM, "memory",
               max(2000, int(tokens * 8 / 20e9 * 1e9)),
               cpu={"op": "aten::copy_", "host_bytes": tokens * 8}))
        fwd = [("qkv", tokens, h, 3 * h), ("attention",), ("proj", tokens, h, h),
               ("dispatch",), ("fc1", recv, h, 4 * h), ("gelu",), ("fc2", recv, 4 * h, h),
               ("combine",)]
        for j, item in enumerate(fwd):
            _pass(item, False, f"{mb}-{j}", mb, gemm, attention, gelu, all_to_all)
        for j, item in reversed(list(enumerate(fwd))):
            _pass(item, True, f"{mb}-{j}", mb, gemm, attention, gelu, all_to_all)
    add(Op("kernel", "multi_tensor_apply_kernel_adam", COMPUTE_STREAM, "compute", 300_000,
           cpu={"op": "aten::_fused_adam_"}))
    return ops


def _pass(item: tuple[Any, ...], bwd: bool, key: str, mb: int, gemm: Any, attention: Any,
          gelu: Any, all_to_all: Any) -> None:
    """One forward or backward op of the layer; backward exchanges run the other way."""
    kind = item[0]
    if kind == "attention":
        attention(bwd, key)
    elif kind == "gelu":
        gelu(bwd, key)
    elif kind in ("dispatch", "combine"):
        to_experts = (kind == "dispatch") != bwd
        all_to_all(f"{kind}{'-bwd' if bwd else ''}", to_experts, mb, key)
    else:
        gemm(kind, item[1], item[2], item[3], bwd, key)


BUILDERS = {"roofline": build_roofline_program}


class RooflineWriter(TraceWriter):
    """Kineto events of the roofline shape: all_to_allv collectives with split sizes and
    the allocator's `[memory]` events."""

    def __init__(self, cfg: Config, rank: int) -> None:
        super().__init__(cfg, rank)
        self.allocated = self.reserved = 0
        self.addr = 0x7F00_0000_0000 + rank * (1 << 36)
        self.live: dict[str, tuple[int, int, str]] = {}  # key -> (addr, bytes, op)
        self.mem_log: list[dict[str, Any]] = []            # GPU events, for the truth
        self.ev_idx = 0
        self.started = False

    # ---------------------------------------------------------------- memory
    def memory(self, t: int, nbytes: int, op: str, key: str, device: bool = True,
               tid: int | None = None) -> None:
        """One `[memory]` event on `tid` (default the main thread) inside `op`: allocate
        nbytes (> 0), kept under `key`, or (nbytes 0) free what `key` holds."""
        if nbytes > 0:
            self.addr += 1 << 22
            addr = self.addr
            self.live[key] = (addr, nbytes, op)
        else:
            addr, size, _ = self.live.pop(key)
            nbytes = -size
        if device:
            self.allocated += nbytes
            need = -(-self.allocated // SEGMENT) * SEGMENT
            self.reserved = max(self.reserved, need)
            self.mem_log.append({"t": t, "bytes": nbytes, "addr": addr, "op": op,
                                 "allocated": self.allocated, "reserved": self.reserved,
                                 "live": {k: v for k, v in self.live.items()
                                          if not k.startswith("host")}})
        self.ev_idx += 1
        gpu = self.rank % self.cfg.gpus_per_node
        self.events.append({
            "ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
            "pid": self.pid, "tid": self.tid if tid is None else tid,
            "ts": self.ts(t),
            "args": {"Ev Idx": self.ev_idx, "Device Type": 1 if device else 0,
                     "Device Id": gpu if device else -1, "Addr": addr, "Bytes": nbytes,
                     "Total Allocated": self.allocated if device else 0,
                     "Total Reserved": self.reserved if device else 0}})

    def training_state(self) -> None:
        """Weights, gradients and Adam state (16 bytes per parameter) before step 1."""
        params = 12 * self.cfg.hidden ** 2
        t = 5_000_000
        self.cpu_op("aten::zeros", t, t + 10_000, self.tid)
        self.memory(t + 5_000, 16 * params, "aten::zeros", "state")

    # ---------------------------------------------------------------- ops
    def write_op(self, op: Op) -> None:
        if not self.started:
            self.started = True
            self.training_state()
        c = op.cpu
        t = op.launch_ns - 3_000
        if op.name == "all_to_all":
            self._all_to_all(op, t)
            return
        super().write_op(op)
        if op.category == "memory":  # the pinned host buffer of the copy (a CPU event)
            self.memory(t + 2_000, c["host_bytes"], "aten::copy_", f"host{op.launch_ns}",
                        device=False)
            self.memory(t + 5_000, 0, "aten::copy_", f"host{op.launch_ns}", device=False)
        elif c.get("op") == "backward":
            name = {"aten::linear": "aten::mm", "aten::gelu": "aten::gelu_backward",
                    "aten::_flash_attention_forward": "aten::_flash_attention_backward"
                    }[c["fwd_op"]]
            grad, bwd = f"grad{op.launch_ns}", self.bwd_tid
            self.memory(t + 1_500, c["out_bytes"], name, grad, tid=bwd)
            self.memory(t + 2_500, 0, name, c["act"], tid=bwd)
            self.memory(t + 5_500, 0, name, grad, tid=bwd)
        elif "act" in c:
            name = {"aten::linear": "aten::addmm"}.get(c["op"], c["op"])
            self.memory(t + 2_000 if c["op"] == "aten::linear" else t + 1_000,
                        c["out_bytes"], name, c["act"])

    def _all_to_all(self, op: Op, t: int) -> None:
        """c10d::alltoall_base_ > record_param_comms > nccl:all_to_all, the SendRecv kernel;
        the receive buffer is allocated inside the c10d op."""
        self.cpu_op("c10d::alltoall_base_", t, t + 7_500, self.tid)
        name, forward = "c10d::alltoall_base_", op.key.endswith(("dispatch", "combine"))
        buffer = op.cpu["act"] if forward else f"bwd{op.launch_ns}"
        self.memory(t + 200, op.cpu["out_bytes"], name, buffer)
        if not forward:  # backward: the gradient buffer and the saved output are freed
            self.memory(t + 7_200, 0, name, buffer)
            self.memory(t + 7_300, 0, name, op.cpu["act"])
        rpc = self.cpu_op("record_param_comms", t + 500, t + 7_000, self.tid,
                          **self.comm_args(op))
        self.ext += 1
        self.x("user_annotation", "nccl:all_to_all", t + 1_000, t + 6_500, self.tid,
               {"External id": self.ext})
        self.launch(op, t + 3_000, self.tid, rpc)

    def kernel_name(self, op: Op) -> str:
        return A2A_KERNEL if op.name == "all_to_all" else super().kernel_name(op)

    def comm_args(self, op: Op) -> dict[str, Any]:
        if op.name != "all_to_all":
            return super().comm_args(op)
        c, group = op.cpu, op.group
        h = c["hidden"]
        return {"Collective name": "all_to_allv", "Group size": len(group),
                "Process Group Name": str(500 + min(group)),
                "Process Group Description": EP_GROUP,
                "Process Group Ranks": str(list(group)), "dtype": "BFloat16",
                "In msg nelems": sum(c["in_split"]) * h, "Out msg nelems": sum(c["out_split"]) * h,
                "In split size": str(c["in_split"]), "Out split size": str(c["out_split"])}

    def document(self) -> dict[str, Any]:
        doc = super().document()
        group = list(ep_group(self.cfg, self.rank))
        info = doc["distributedInfo"]
        info["pg_config"].append({"pg_name": str(500 + min(group)), "pg_desc": EP_GROUP,
                                  "backend_config": "cuda:nccl", "pg_size": len(group),
                                  "ranks": group})
        info["pg_count"] = len(info["pg_config"])
        doc["profile_memory"] = 1
        return doc

    @property
    def truth(self) -> dict[str, Any]:
        return {"memory": self.mem_log}


# ------------------------------------------------------------------ ground truth
KINDS = {"qkv": "gemm", "proj": "gemm", "fc1": "gemm", "fc2": "gemm",
         "attention": "attention", "gelu": "elementwise"}


def _complete(facts: dict[str, Any]) -> dict[int, set[int]]:
    return {int(r): {row["step"] for row in rows if row["has_successor"]}
            for r, rows in facts["per_rank"].items()}


def _gemm_shape(op: Op) -> tuple[int, int, int]:
    """(M, N, K) as the trace's shapes give them: backward runs [m, 2k] x [2k, n]."""
    m, k, n = op.cpu["shape"]
    return (m, n, 2 * k) if op.cpu.get("op") == "backward" else (m, n, k)


def roofline_truth(cfg: Config, programs: dict[int, list[Op]], facts: dict[str, Any]
                   ) -> dict[str, Any]:
    """Per op kind and per GEMM shape over complete steps: executed FLOPs, bytes, kernel
    time, achieved rates and the share of the roof; and the waterfall's kernel-efficiency
    stage split into parts (docs/roofline.md) from the ground-truth compute time."""
    peak, hbm = cfg.truth_peak_tflops * 1e12, HBM_GBS * 1e9
    complete = _complete(facts)
    kinds: dict[str, list[float]] = {}
    shapes: dict[str, list[float]] = {}
    total_ns = model = 0.0
    n_steps = sum(len(v) for v in complete.values()) / len(complete)
    for r, ops in programs.items():
        for op in ops:
            if op.kind != "kernel" or op.category != "compute" or op.step not in complete[r]:
                continue
            total_ns += op.dur_ns
            tag = op.cpu.get("tag")
            kind = KINDS.get(tag, "unshaped") if tag else "unshaped"
            flops = op.cpu.get("exec_flops", op.flops)
            for key, table in ((kind, kinds),) + (
                    ((",".join(map(str, _gemm_shape(op))), shapes),) if kind == "gemm" else ()):
                acc = table.setdefault(key, [0.0, 0.0, 0.0, 0.0])
                acc[0] += flops
                acc[1] += op.cpu.get("bytes", 0.0)
                acc[2] += op.dur_ns
                acc[3] += op.flops
            model += op.flops
    compute_ns = _mean_compute_ns(facts)

    def row(acc: list[float], memory_bound: bool) -> dict[str, float]:
        secs = acc[2] / 1e9
        share = acc[1] / secs / hbm if memory_bound else acc[0] / secs / peak
        lost = -100 * (compute_ns * acc[2] / total_ns - acc[3] / n_steps / cfg.world / peak
                       * 1e9) / compute_ns
        return {"flops": acc[0], "bytes": acc[1], "time_ns": acc[2],
                "tflops": acc[0] / secs / 1e12, "gbs": acc[1] / secs / 1e9,
                "roof_share": share, "points": lost}

    return {"kinds": {k: row(v, k == "elementwise") for k, v in kinds.items()
                      if k != "unshaped"},
            "gemm_shapes": {k: row(v, False) for k, v in shapes.items()},
            "unshaped_points": -100 * kinds["unshaped"][2] / total_ns,
            "stage_points": -100 * (1 - model / n_steps / cfg.world / peak
                                    / (compute_ns / 1e9)),
            "compute_ms": compute_ns / 1e6}


def _mean_compute_ns(facts: dict[str, Any]) -> float:
    """The report's compute time: mean over ranks of each rank's mean over complete steps."""
    per_rank = []
    for rows in facts["per_rank"].values():
        full = [r["compute_ns"] for r in rows if r["has_successor"]]
        per_rank.append(sum(full) / len(full))
    return sum(per_rank) / len(per_rank)


def memory_truth(spans: dict[int, list[tuple[int, int]]],
                 logs: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Per rank: the peak allocated and reserved bytes (GPU), the step of the peak, the
    bytes live at the peak by allocating op, and the peaks of every step."""
    out = {}
    for r, log in logs.items():
        events = log["memory"]
        peak = max(events, key=lambda e: e["allocated"])  # the first event at the max
        by_op: dict[str, int] = {}
        for _, size, op in peak["live"].values():
            by_op[op] = by_op.get(op, 0) + size
        steps = {}
        for k, (s, e) in enumerate(spans[r], start=1):
            inside = [x for x in events if s <= x["t"] < e]
            if inside:
                steps[str(k)] = {"peak_allocated": max(x["allocated"] for x in inside),
                                 "peak_reserved": max(x["reserved"] for x in inside)}
        step_of_peak = next((int(k) for k, (s, e) in enumerate(spans[r], start=1)
                             if s <= peak["t"] < e), None)
        out[str(r)] = {"peak_allocated": peak["allocated"],
                       "peak_reserved": max(x["reserved"] for x in events),
                       "peak_step": step_of_peak, "live_at_peak": by_op, "steps": steps}
    return out


def a2a_truth(cfg: Config, programs: dict[int, list[Op]], facts: dict[str, Any]
              ) -> dict[str, Any]:
    """all_to_all bytes sent and received per rank and step, tokens received, and per
    instance the imbalance (the busiest member's bytes, the larger of what it sends and
    receives, over the mean) and the transfer time it costs: the busiest member sets the
    end, a balanced exchange would move the mean."""
    per_rank: dict[str, dict[str, dict[str, float]]] = {}
    instances: dict[str, dict[str, float]] = {}
    for r, ops in programs.items():
        for op in ops:
            if op.name != "all_to_all":
                continue
            h = op.cpu["hidden"]
            row = per_rank.setdefault(str(r), {}).setdefault(
                str(op.step), {"sent_bytes": 0, "received_bytes": 0, "tokens_received": 0})
            row["sent_bytes"] += BF16 * h * sum(op.cpu["in_split"])
            row["received_bytes"] += BF16 * h * sum(op.cpu["out_split"])
            row["tokens_received"] += sum(op.cpu["out_split"])
            instances[op.key] = {
                "step": op.step, "imbalance": op.cpu["max_load"] / op.cpu["mean_bytes"],
                "cost_ns": op.dur_ns * (1 - op.cpu["mean_bytes"] / op.cpu["max_load"])}
    return {"per_rank": per_rank, "instances": instances}


def truth(cfg: Config, programs: dict[int, list[Op]], facts: dict[str, Any],
          spans: dict[int, list[tuple[int, int]]], logs: dict[int, dict[str, Any]]
          ) -> dict[str, Any]:
    """The ground truth of this shape beside the attribution (ground_truth.json)."""
    return {"roofline": roofline_truth(cfg, programs, facts),
            "memory": memory_truth(spans, logs), "all_to_all": a2a_truth(cfg, programs, facts)}
