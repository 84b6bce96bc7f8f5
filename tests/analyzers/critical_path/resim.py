"""An independent re-simulator of a TP x PP x DP training job, for checking the what-if.

It shares no code and few assumptions with sample_traces/simulate_gpu.py: it is a small
discrete-event model of what a PyTorch job does, written to test the what-if against
semantics the project's own simulator does not have.

* Each rank has one CPU thread that runs its program: host work, kernel and collective
  launches, and synchronizations. A launch costs CPU time and puts the op into the
  device's launch queue, which holds at most `queue_depth` ops not yet started: a launch
  into a full queue blocks the CPU until the op `queue_depth` launches earlier has
  started (the CPU is then paced by the GPU). A `cudaDeviceSynchronize` blocks the CPU
  until every op it launched has ended; a `.item()` after a microbatch blocks it until
  that microbatch's last op has ended. With neither, the CPU runs as far ahead as the
  queue lets it.
* The GPU has several streams per rank (compute, TP, DP, send, recv). An op starts when
  it is in the queue (its launch call's end plus `gpu_latency_ns`), when the previous op
  of its stream has ended, and when every op it waits for (cudaStreamWaitEvent: the
  NCCL stream waits for the compute stream's last op; the compute stream waits for a
  collective's or a receive's end before using its result) has ended.
* A collective's kernel starts on every member when that member's stream reaches it,
  and ends on all of them at the same instant: its transfer time after the last member
  started (so an early member's kernel includes its wait). A send and its receive are a
  pair of the same kind. The DP all-reduce of each layer's gradients runs on its own
  stream, overlapped with the backward of the layers before it; the optimizer waits for
  the last one.
* Every node's clock has its own offset (hundreds of microseconds apart), applied only
  to the trace timestamps.
* CUDA graphs (`graphs`): each layer's forward and backward (`layer`, as
  make_graphed_callables captures them) or the whole decode step's layers (`step`, an
  inference decode) are captured once and replayed by one `cudaGraphLaunch`: one CPU
  call (`graph_launch_us`) and one entry of the launch queue put every op of the graph
  on the GPU at once, and each op starts when its graph predecessors have ended. Every
  graph forks a side-stream branch after its first kernel (`side_us`, as a captured
  `torch.cuda.stream` block does) that its last kernel joins, so the work after the
  replay waits for both streams. A collective captured in a graph is a custom
  all-reduce kernel (vLLM's, named by the kernel alone: a replay re-runs no
  record_param_comms). The trace gives a replayed kernel the launch's correlation id and
  its own stream, or (`graph_trace_stream="launch"`) the stream the graph was launched
  into, so the side branch overlaps the main one on one trace stream, as some CUPTI
  versions write it.

`simulate(job)` returns every op's times; `step_time_ms(job)` the step time as the
report defines it (mean over ranks of each rank's mean complete-step window: the first
GPU op launched in step k to the first launched in step k+1), from the simulator's own
times; `write_traces(job, folder)` writes one Kineto JSON trace per rank. A what-if
truth is the same job simulated again with a change (`dataclasses.replace`).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BASE_NS = 1_780_000_000_000_000_000
COMPUTE, TP, DP, SEND, RECV = 7, 13, 17, 21, 22
SIDE = 9  # a graph's side-stream branch
CUSTOM_AR = ("void vllm::cross_device_reduce_1stage<__nv_bfloat16, {n}>(vllm::RankData*, "
             "vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)")
PG_DESC = {"tp": "TENSOR_MODEL_PARALLEL_GROUP", "dp": "DATA_PARALLEL_GROUP",
           "pp": "PIPELINE_MODEL_PARALLEL_GROUP"}


@dataclass(frozen=True)
class Job:
    """One simulated job; every duration in microseconds."""
    name: str = "job"
    tp: int = 4
    pp: int = 2
    dp: int = 2
    microbatches: int = 4
    layers: int = 2               # per stage
    gpus_per_node: int = 8
    steps: int = 4                # profiled (written); the last has no successor
    warmup: int = 1               # run before the profiled steps, not written
    gemm_us: float = 120.0        # the QKV GEMM of one layer and microbatch, forward
    attn_us: float = 90.0         # flash attention forward
    tp_us: float = 25.0           # one TP all-reduce's transfer
    dp_us: float = 300.0          # one layer's DP gradient all-reduce
    p2p_us: float = 30.0          # one activation or gradient send/recv
    slow_rank: int | None = None
    slow_factor: float = 1.0      # its GEMMs and attention take this much longer
    host_op_us: float = 8.0       # CPU time per op before its launch call
    launch_us: float = 4.0        # the launch call itself
    gpu_latency_ns: int = 3_000   # from the launch call's end to the earliest start
    queue_depth: int = 1024
    sync: str = "step"            # step: cudaDeviceSynchronize at the step's end; item:
                                  # also .item() after each forward; none: never waits
    step_host_us: float = 300.0   # CPU work at the start of each step (data, logging)
    dp_overlap: bool = True       # DP all-reduce per layer during the backward
    node_offsets_us: tuple[float, ...] = (0.0, 350.0, -420.0, 700.0)
    # what-if changes: (pattern, k): kernels whose name contains pattern run k x faster;
    # collectives: (kind 'tp' | 'dp' | 'pp', k): their transfer k x faster
    kernel_speedups: tuple[tuple[str, float], ...] = ()
    comm_speedups: tuple[tuple[str, float], ...] = ()
    # (rank, k): every kernel of that rank k x faster but collectives (a pipeline stage)
    rank_speedups: tuple[tuple[int, float], ...] = ()
    # per stage, its GEMMs and attention take this much longer (wider layers, the same
    # kernel names: a pipeline whose stages differ)
    stage_scale: tuple[float, ...] = ()
    # CUDA graphs: none | layer (each layer's forward and backward one graph) | step (a
    # decode step: embedding, every layer's forward in one graph, sampling, no backward)
    graphs: str = "none"
    graph_launch_us: float = 10.0  # the cudaGraphLaunch call
    side_us: float = 0.0           # each graph's side-stream branch
    graph_trace_stream: str = "own"  # own | launch: the stream a replayed kernel shows

    @property
    def world(self) -> int:
        return self.tp * self.pp * self.dp

    def coords(self, rank: int) -> tuple[int, int, int]:
        """(tp index, stage, dp index): TP fastest, then DP, then PP."""
        return rank % self.tp, rank // (self.tp * self.dp), (rank // self.tp) % self.dp

    def rank_of(self, t: int, s: int, d: int) -> int:
        return s * self.tp * self.dp + d * self.tp + t

    def group(self, rank: int, kind: str) -> tuple[int, ...]:
        t, s, d = self.coords(rank)
        if kind == "tp":
            return tuple(self.rank_of(i, s, d) for i in range(self.tp))
        if kind == "dp":
            return tuple(self.rank_of(t, s, i) for i in range(self.dp))
        return tuple(self.rank_of(t, i, d) for i in range(self.pp))


@dataclass
class GpuOp:
    rank: int
    idx: int                     # launch order on its rank
    step: int
    name: str
    stream: int
    kind: str                    # kernel | coll | p2p
    dur: int                     # a kernel's duration, a collective's transfer (ns)
    waits: list[int] = field(default_factory=list)  # ops of the rank it waits for
    key: tuple[Any, ...] | None = None  # matches the members of a collective
    pg: str = ""
    peer: int | None = None
    nelems: int = 0
    graph: int | None = None     # the graph replay (its launch's first op) it ran in
    call_s: int | None = None    # the launch call
    call_e: int | None = None
    start: int | None = None
    end: int | None = None


@dataclass
class Action:
    what: str                    # launch | host | sync | item | step
    op: GpuOp | None = None
    ns: int = 0
    step: int = 0
    t0: int | None = None        # when the CPU did it (filled by the simulation)
    t1: int | None = None
    graph: list[GpuOp] | None = None  # a graph launch: every op it replays


# ------------------------------------------------------------------ programs
def _one_f_one_b(job: Job, stage: int) -> list[tuple[str, int]]:
    warm = min(job.pp - stage - 1, job.microbatches)
    order = [("f", m) for m in range(warm)]
    b = 0
    f = warm
    while f < job.microbatches:
        order += [("f", f), ("b", b)]
        f, b = f + 1, b + 1
    return order + [("b", m) for m in range(b, job.microbatches)]


class _Program:
    """Builds one rank's actions for one step."""

    def __init__(self, job: Job, rank: int, step: int, ops: list[GpuOp],
                 counters: dict[tuple[Any, ...], int]) -> None:
        self.job, self.rank, self.step = job, rank, step
        self.ops, self.counters = ops, counters
        self.actions: list[Action] = []
        self.last_compute: int | None = None
        self.slow = job.slow_factor if rank == job.slow_rank else 1.0
        self.captured: list[GpuOp] | None = None  # the graph being captured
        stage = job.coords(rank)[1]
        if stage < len(job.stage_scale):
            self.slow *= job.stage_scale[stage]

    def _k(self, name: str) -> float:
        mine = next((1.0 / k for r, k in self.job.rank_speedups if r == self.rank), 1.0)
        return mine * next((1.0 / k for p, k in self.job.kernel_speedups if p in name), 1.0)

    def _add(self, op: GpuOp) -> GpuOp:
        self.ops.append(op)
        if self.captured is not None:  # replayed later by the graph's one launch
            self.captured.append(op)
            return op
        self.actions.append(Action("host", ns=int(self.job.host_op_us * 1000)))
        self.actions.append(Action("launch", op=op))
        return op

    def begin_graph(self) -> None:
        self.captured = []

    def end_graph(self) -> None:
        """Fork the side branch after the graph's first kernel, join it at the last, and
        launch the whole graph with one call."""
        ops = self.captured
        assert ops
        first = ops[0]
        if self.job.side_us > 0:
            side = self._add(GpuOp(self.rank, len(self.ops), self.step,
                                   "rotary_kv_cache_side_kernel", SIDE, "kernel",
                                   int(self.job.side_us * 1000), waits=[first.idx]))
            self.kernel("graph_join_elementwise_kernel", 3.0, waits=(side.idx,))
        self.captured = None
        for op in ops:
            op.graph = first.idx
        self.actions.append(Action("host", ns=int(self.job.host_op_us * 1000)))
        self.actions.append(Action("launch", op=first, graph=ops))

    def kernel(self, name: str, us: float, heavy: bool = False,
               waits: tuple[int | None, ...] = ()) -> None:
        dur = us * (self.slow if heavy else 1.0) * self._k(name)
        op = self._add(GpuOp(self.rank, len(self.ops), self.step, name, COMPUTE, "kernel",
                             max(1000, int(dur * 1000)),
                             waits=[w for w in waits if w is not None]))
        self.last_compute = op.idx

    def collective(self, kind: str, stream: int, us: float, nelems: int) -> int:
        """A collective of group `kind` on `stream`, after the compute stream's last op."""
        members = self.job.group(self.rank, kind)
        n = self.counters.get(("c", kind, members, self.rank), 0)
        self.counters[("c", kind, members, self.rank)] = n + 1
        k = next((k for p, k in self.job.comm_speedups if p == kind), 1.0)
        if self.captured is not None:  # a custom all-reduce inside the graph
            stream = COMPUTE
        op = self._add(GpuOp(self.rank, len(self.ops), self.step, "all_reduce", stream, "coll",
                             int(us * 1000 / k), key=("c", kind, members, n), pg=kind,
                             waits=[self.last_compute] if self.last_compute is not None
                             else [], nelems=nelems))
        return op.idx

    def p2p(self, name: str, peer: int, nelems: int) -> int:
        src, dst = (self.rank, peer) if name == "send" else (peer, self.rank)
        n = self.counters.get(("p", src, dst, name), 0)
        self.counters[("p", src, dst, name)] = n + 1
        k = next((k for p, k in self.job.comm_speedups if p == "pp"), 1.0)
        waits = [self.last_compute] if name == "send" and self.last_compute is not None else []
        op = self._add(GpuOp(self.rank, len(self.ops), self.step, name,
                             SEND if name == "send" else RECV, "p2p",
                             int(self.job.p2p_us * 1000 / k), key=("p", src, dst, n), pg="pp",
                             peer=peer, waits=waits, nelems=nelems))
        return op.idx

    def layer_forward(self, layer: int) -> None:
        j = self.job
        self.kernel(f"sm90_gemm_qkv_fprop_l{layer}", j.gemm_us, True)
        self.kernel("flash_fwd_kernel", j.attn_us, True)
        self.kernel("sm90_gemm_proj_fprop", j.gemm_us / 3, True)
        self.tp_all_reduce()
        self.kernel("sm90_gemm_fc1_fprop", 4 * j.gemm_us / 3, True)
        self.kernel("gelu_kernel", 12.0)
        self.kernel("sm90_gemm_fc2_fprop", 4 * j.gemm_us / 3, True)
        self.tp_all_reduce()

    def layer_backward(self, layer: int) -> None:
        j = self.job
        self.kernel("sm90_gemm_fc2_dgrad", 4 * j.gemm_us / 3, True)
        self.kernel("sm90_gemm_fc2_wgrad", 4 * j.gemm_us / 3, True)
        self.kernel("gelu_backward_kernel", 14.0)
        self.kernel("sm90_gemm_fc1_dgrad", 4 * j.gemm_us / 3, True)
        self.kernel("sm90_gemm_fc1_wgrad", 4 * j.gemm_us / 3, True)
        self.tp_all_reduce()
        self.kernel("sm90_gemm_proj_dgrad", 2 * j.gemm_us / 3, True)
        self.kernel("flash_bwd_kernel", 2.5 * j.attn_us, True)
        self.kernel(f"sm90_gemm_qkv_dgrad_l{layer}", j.gemm_us, True)
        self.kernel(f"sm90_gemm_qkv_wgrad_l{layer}", j.gemm_us, True)
        self.tp_all_reduce()

    def tp_all_reduce(self) -> None:
        if self.job.tp > 1:
            done = self.collective("tp", TP, self.job.tp_us, 4 << 20)
            self.kernel("vectorized_elementwise_kernel_add_residual", 6.0, waits=(done,))

    def _graphed(self, layer_pass: Any, layer: int) -> None:
        """One layer pass, replayed as a graph of its own when the job graphs layers."""
        if self.job.graphs == "layer":
            self.begin_graph()
        layer_pass(layer)
        if self.job.graphs == "layer":
            self.end_graph()

    def decode(self) -> list[Action]:
        """A decode step: input copy, one graph of every layer's forward, sampling (the
        CPU reads the tokens back at the step's end)."""
        j = self.job
        self.actions.append(Action("step", step=self.step))
        self.actions.append(Action("host", ns=int(j.step_host_us * 1000)))
        self.kernel("copy_input_ids_kernel", 4.0)
        self.kernel("embedding_forward_kernel", 8.0)
        self.begin_graph()
        for layer in range(j.layers):
            self.layer_forward(layer)
        self.end_graph()
        self.kernel("sampling_argmax_kernel", 20.0)
        if j.sync in ("step", "item"):
            self.actions.append(Action("sync"))
        return self.actions

    def build(self) -> list[Action]:
        j = self.job
        if j.graphs == "step":
            return self.decode()
        t, stage, d = j.coords(self.rank)
        self.actions.append(Action("step", step=self.step))
        self.actions.append(Action("host", ns=int(j.step_host_us * 1000)))
        if stage == 0:
            self.kernel("embedding_forward_kernel", 20.0)
        prev = j.rank_of(t, stage - 1, d) if stage > 0 else None
        nxt = j.rank_of(t, stage + 1, d) if stage < j.pp - 1 else None
        last_mb_bwd = {m for k, m in _one_f_one_b(j, stage) if k == "b"}
        for kind, m in _one_f_one_b(j, stage):
            if kind == "f":
                got = self.p2p("recv", prev, 1 << 22) if prev is not None else None
                self.kernel("copy_activation_kernel", 5.0, waits=(got,))
                for layer in range(j.layers):
                    self._graphed(self.layer_forward, layer)
                if nxt is not None:
                    self.p2p("send", nxt, 1 << 22)
                else:
                    self.kernel("cross_entropy_forward_kernel", 40.0)
                if j.sync == "item":
                    self.actions.append(Action("item", op=self.ops[self.last_compute or 0]))
            else:
                if nxt is not None:
                    got = self.p2p("recv", nxt, 1 << 22)
                    self.kernel("copy_gradient_kernel", 5.0, waits=(got,))
                else:
                    self.kernel("cross_entropy_backward_kernel", 40.0)
                for layer in reversed(range(j.layers)):
                    self._graphed(self.layer_backward, layer)
                    if j.dp > 1 and j.dp_overlap and m == max(last_mb_bwd):
                        self.collective("dp", DP, j.dp_us, 1 << 24)
                if prev is not None:
                    self.p2p("send", prev, 1 << 22)
        if j.dp > 1 and not j.dp_overlap:
            for _layer in range(j.layers):
                self.collective("dp", DP, j.dp_us, 1 << 24)
        last_dp = max((o.idx for o in self.ops if o.step == self.step and o.pg == "dp"),
                      default=None)
        self.kernel("multi_tensor_apply_kernel_adam", 150.0, waits=(last_dp,))
        if j.sync in ("step", "item"):
            self.actions.append(Action("sync"))
        return self.actions


# ------------------------------------------------------------------ the simulation
@dataclass
class Run:
    job: Job
    ops: dict[int, list[GpuOp]]
    actions: dict[int, list[Action]]


def simulate(job: Job) -> Run:
    """Every op's launch call, start and end; every CPU action's times."""
    ops: dict[int, list[GpuOp]] = {r: [] for r in range(job.world)}
    actions: dict[int, list[Action]] = {r: [] for r in range(job.world)}
    counters: dict[tuple[Any, ...], int] = {}
    for step in range(1, job.warmup + job.steps + 1):
        for r in range(job.world):
            actions[r] += _Program(job, r, step, ops[r], counters).build()
    _Engine(job, ops, actions).run()
    return Run(job, ops, actions)


class _Engine:
    """Advances every CPU thread and GPU stream as far as what it waits for is known,
    round after round, until everything has happened."""

    def __init__(self, job: Job, ops: dict[int, list[GpuOp]],
                 actions: dict[int, list[Action]]) -> None:
        self.job, self.ops, self.actions = job, ops, actions
        self.pc = dict.fromkeys(ops, 0)
        self.cpu_t = dict.fromkeys(ops, 1_000_000)
        self.launched = dict.fromkeys(ops, 0)
        # per rank, the first op of each launch in order (a graph is one launch): a
        # launch into a full queue waits for the launch queue_depth before it to start
        self.firsts = {r: [a.op for a in acts if a.what == "launch" and a.op is not None]
                       for r, acts in actions.items()}
        self.n_launch = dict.fromkeys(ops, 0)
        self.queues: dict[tuple[int, int], list[GpuOp]] = {}
        self.head: dict[tuple[int, int], int] = {}
        self.arrived: dict[tuple[Any, ...], dict[int, tuple[int, GpuOp]]] = {}
        self.size: dict[tuple[Any, ...], int] = {}
        for r, rops in ops.items():
            for op in rops:
                self.queues.setdefault((r, op.stream), []).append(op)
                if op.key is not None:
                    self.size[op.key] = 2 if op.kind == "p2p" else len(job.group(r, op.pg))

    def run(self) -> None:
        while True:
            moved = False
            for r in self.ops:
                moved |= self._cpu(r)
            for q in self.queues:
                moved |= self._stream(q)
            if all(self.pc[r] == len(self.actions[r]) for r in self.ops) and all(
                    self.head.get(q, 0) == len(v) for q, v in self.queues.items()):
                return
            if not moved:
                raise RuntimeError("resim: deadlock")

    def _cpu(self, r: int) -> bool:
        acts, moved = self.actions[r], False
        while self.pc[r] < len(acts):
            a, t = acts[self.pc[r]], self.cpu_t[r]
            if a.what in ("host", "step"):
                a.t0, a.t1 = t, t + a.ns
            elif a.what == "launch":
                assert a.op is not None
                i = self.n_launch[r] - self.job.queue_depth
                earlier = self.firsts[r][i] if i >= 0 else None
                if earlier is not None and earlier.start is None:
                    return moved  # the queue is full until launch i starts
                free = earlier.start if earlier is not None else None
                cost = self.job.graph_launch_us if a.graph else self.job.launch_us
                call_e = max(t, (free or 0) + 1_000) + int(cost * 1000)
                for op in a.graph or [a.op]:
                    op.call_s, op.call_e = t, call_e
                a.t0, a.t1 = t, call_e + 500  # the call returns
                self.launched[r] = max(o.idx for o in a.graph or [a.op]) + 1
                self.n_launch[r] += 1
            else:  # sync: every launched op; item: that op
                waited = (self.ops[r][:self.launched[r]] if a.what == "sync"
                          else [a.op] if a.op is not None else [])
                if any(o.end is None for o in waited):
                    return moved
                a.t0 = t
                a.t1 = max([t] + [o.end + 4_000 for o in waited if o.end is not None])
            self.cpu_t[r] = a.t1
            self.pc[r] += 1
            moved = True
        return moved

    def _stream(self, q: tuple[int, int]) -> bool:
        r, ops, moved = q[0], self.queues[q], False
        while self.head.get(q, 0) < len(ops):
            i = self.head[q] = self.head.get(q, 0)
            op = ops[i]
            prev = ops[i - 1].end if i else 0
            deps = [self.ops[r][w].end for w in op.waits]
            if op.call_e is None or prev is None or any(d is None for d in deps):
                return moved
            ready = max([op.call_e + self.job.gpu_latency_ns, prev]
                        + [d for d in deps if d is not None])
            if op.kind == "kernel":
                op.start, op.end = ready, ready + op.dur
            else:
                assert op.key is not None
                members = self.arrived.setdefault(op.key, {})
                if r not in members:
                    op.start = ready
                    members[r] = (ready, op)
                    moved = True
                if len(members) < self.size[op.key]:
                    return moved
                last = max(s for s, _ in members.values())
                dur = min(o.dur for _, o in members.values())
                for _s, o in members.values():
                    o.end = last + dur
            self.head[q] = i + 1
            moved = True
        return moved


# ------------------------------------------------------------------ step time
def windows(run: Run) -> dict[int, dict[int, int]]:
    """Per rank, per complete profiled step: the window (ns), from the simulation."""
    job, out = run.job, {}
    first = job.warmup + 1
    for r, ops in run.ops.items():
        starts: dict[int, int] = {}
        for op in ops:
            if op.step >= first and op.start is not None:
                starts[op.step] = min(starts.get(op.step, op.start), op.start)
        out[r] = {k: starts[k + 1] - starts[k] for k in starts if k + 1 in starts}
    return out


def step_time_ms(job: Job) -> float:
    """The report's step time of the simulated job: mean over ranks of each rank's mean
    complete window."""
    per_rank = [sum(w.values()) / len(w) for w in windows(simulate(job)).values()]
    return sum(per_rank) / len(per_rank) / 1e6


# ------------------------------------------------------------------ Kineto traces
class _Writer:
    def __init__(self, job: Job, rank: int) -> None:
        self.job, self.rank = job, rank
        node = rank // job.gpus_per_node
        offsets = job.node_offsets_us
        self.offset = int(offsets[node % len(offsets)] * 1000) if offsets else 0
        self.pid, self.tid = 4000 + rank, 4000 + rank
        self.events: list[dict[str, Any]] = []
        self.ext = self.corr = rank * 1_000_000
        self.graph_ids: dict[tuple[str, int], int] = {}

    def ts(self, t: int) -> float:
        return round((t + self.offset) / 1000, 3)

    def x(self, cat: str, name: str, s: int, e: int, tid: int, args: dict[str, Any],
          pid: int | None = None) -> int:
        self.ext += 1
        self.events.append({"ph": "X", "cat": cat, "name": name,
                            "pid": self.pid if pid is None else pid, "tid": tid,
                            "ts": self.ts(s), "dur": round((e - s) / 1000, 3),
                            "args": {"External id": self.ext, **args}})
        return self.ext

    def comm_args(self, op: GpuOp) -> dict[str, Any]:
        members = self.job.group(self.rank, op.pg)
        args: dict[str, Any] = {
            "Collective name": op.name if op.kind == "p2p" else "allreduce",
            "Group size": len(members), "Process Group Name": _pg_name(op.pg, members),
            "Process Group Description": PG_DESC[op.pg],
            "Process Group Ranks": str(list(members)), "dtype": "BFloat16",
            "In msg nelems": op.nelems, "Out msg nelems": op.nelems,
            "In split size": "[]", "Out split size": "[]"}
        if op.kind == "p2p":
            args["Dst Rank" if op.name == "send" else "Src Rank"] = op.peer
        return args

    def launch(self, op: GpuOp, host_s: int) -> None:
        assert op.call_s is not None and op.call_e is not None
        assert op.start is not None and op.end is not None
        s, e = host_s, op.call_e + 400
        comm = op.kind != "kernel"
        if comm:
            self.x("cpu_op", "c10d::allreduce_" if op.kind == "coll" else f"c10d::{op.name}",
                   s, e, self.tid, {})
            outer = self.x("cpu_op", "record_param_comms", s + 200, e - 100, self.tid,
                           self.comm_args(op))
        else:
            outer = self.x("cpu_op", _aten(op.name), s, e, self.tid, {})
        self.corr += 1
        self.x("cuda_runtime", "cudaLaunchKernel", op.call_s, op.call_e, self.tid,
               {"External id": outer, "cbid": 211, "correlation": self.corr})
        gpu_args: dict[str, Any] = {"External id": outer, "stream": op.stream,
                                    "device": self.rank % self.job.gpus_per_node,
                                    "correlation": self.corr}
        if comm:
            gpu_args.update(self.comm_args(op))
        self.events.append({"ph": "X", "cat": "kernel", "name": _kernel_name(op),
                            "pid": self.rank % self.job.gpus_per_node, "tid": op.stream,
                            "ts": self.ts(op.start), "dur": round((op.end - op.start) / 1000, 3),
                            "args": gpu_args})

    def graph_id(self, first: GpuOp, size: int) -> int:
        """One id per captured graph (its first kernel and size name it)."""
        return self.graph_ids.setdefault((first.name, size), len(self.graph_ids) + 1)

    def graph_launch(self, ops: list[GpuOp]) -> None:
        """One cudaGraphLaunch and every kernel it replayed, each with the launch's
        correlation id and its graph node; no CPU op (a replay runs none)."""
        first = ops[0]
        assert first.call_s is not None and first.call_e is not None
        self.corr += 1
        self.x("cuda_runtime", "cudaGraphLaunch", first.call_s, first.call_e, self.tid,
               {"cbid": 311, "correlation": self.corr})
        for node, op in enumerate(ops):
            assert op.start is not None and op.end is not None
            stream = COMPUTE if self.job.graph_trace_stream == "launch" else op.stream
            name = (CUSTOM_AR.format(n=self.job.tp) if op.kind == "coll" else op.name)
            self.events.append({
                "ph": "X", "cat": "kernel", "name": name,
                "pid": self.rank % self.job.gpus_per_node, "tid": stream,
                "ts": self.ts(op.start), "dur": round((op.end - op.start) / 1000, 3),
                "args": {"stream": stream, "device": self.rank % self.job.gpus_per_node,
                         "correlation": self.corr, "graph id": self.graph_id(first, len(ops)),
                         "graph node id": node}})

    def document(self) -> dict[str, Any]:
        job = self.job
        pgs = [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl",
                "pg_size": job.world, "ranks": list(range(job.world))}]
        for kind in ("tp", "dp", "pp"):
            members = job.group(self.rank, kind)
            if len(members) > 1:
                pgs.append({"pg_name": _pg_name(kind, members), "pg_desc": PG_DESC[kind],
                            "backend_config": "cuda:nccl", "pg_size": len(members),
                            "ranks": list(members)})
        return {
            "schemaVersion": 1,
            "deviceProperties": [{"id": i, "name": "NVIDIA H100 80GB HBM3",
                                  "totalGlobalMem": 85520809984, "computeMajor": 9,
                                  "computeMinor": 0, "numSms": 132}
                                 for i in range(job.gpus_per_node)],
            "distributedInfo": {"backend": "nccl", "rank": self.rank, "world_size": job.world,
                                "pg_count": len(pgs), "pg_config": pgs,
                                "nccl_version": "2.21.5"},
            "host_name": f"resim-node{self.rank // job.gpus_per_node}",
            "displayTimeUnit": "ms", "baseTimeNanoseconds": BASE_NS,
            "traceEvents": self.events, "traceName": f"rank{self.rank}.json"}


def _pg_name(kind: str, members: tuple[int, ...]) -> str:
    return str({"tp": 1000, "dp": 2000, "pp": 3000}[kind] + min(members))


def _aten(kernel: str) -> str:
    if "gemm" in kernel:
        return "aten::mm"
    if "flash" in kernel:
        return "aten::_flash_attention_forward" if "fwd" in kernel else \
            "aten::_flash_attention_backward"
    return "aten::add"


def _kernel_name(op: GpuOp) -> str:
    if op.kind == "kernel":
        return op.name
    if op.kind == "p2p":
        return "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"
    return "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def write_traces(run: Run, folder: Path) -> Path:
    """One Kineto trace per rank of the profiled steps (warmup steps are not written)."""
    job = run.job
    folder.mkdir(parents=True, exist_ok=True)
    first = job.warmup + 1
    for r, acts in run.actions.items():
        w = _Writer(job, r)
        w.events.append({"ph": "M", "name": "thread_name", "pid": w.pid, "tid": w.tid,
                         "args": {"name": "python main"}})
        steps: dict[int, list[int]] = {}
        step, host_s = 0, 0
        for a in acts:
            assert a.t0 is not None and a.t1 is not None
            if a.what == "step":
                step = a.step
            if step < first:
                continue
            span = steps.setdefault(step, [a.t0, a.t1])
            span[1] = max(span[1], a.t1)
            if a.what == "host":
                host_s = a.t0
            elif a.what == "launch" and a.graph:
                w.graph_launch(a.graph)
            elif a.what == "launch" and a.op is not None:
                w.launch(a.op, host_s)
            elif a.what == "sync":
                w.corr += 1
                w.x("cuda_runtime", "cudaDeviceSynchronize", a.t0, a.t1, w.tid,
                    {"cbid": 165, "correlation": w.corr})
            elif a.what == "item" and a.op is not None:
                w.x("cpu_op", "aten::item", a.t0, a.t1 + 500, w.tid, {})
                w.corr += 1
                w.x("cuda_runtime", "cudaStreamSynchronize", a.t0 + 200, a.t1, w.tid,
                    {"cbid": 131, "correlation": w.corr})
        for k, (s, e) in sorted(steps.items()):
            w.x("user_annotation", f"ProfilerStep#{k}", s, e, w.tid, {})
        with gzip.open(folder / f"rank{r}.json.gz", "wt", compresslevel=1) as fh:
            json.dump(w.document(), fh, separators=(",", ":"))
    return folder


def changed(job: Job, **kw: Any) -> Job:
    return dataclasses.replace(job, **kw)
