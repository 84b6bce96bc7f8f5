"""An independent re-simulation of the shape of DeepSeek-V3's rank 0 (issue 42 §2): two
streams, compute overlapped with the expert exchange, the CPU running ahead of the GPU,
waiting for it only by spinning on memory the GPU writes (no runtime call recorded) and in
cudaDeviceSynchronize at each step's end. Its own discrete-event model and its own
backward walk give the ground truth; it shares no code with stepscope or with
sample_traces/ (different semantics: times in whole microseconds, causes kept per op as
the simulator decided them).

One step, per MoE layer l (DeepEP's order, as in deepseek-ai/profile-data's train.json):
the CPU launches attention (compute stream), notify_dispatch (communication stream, after
the attention through a stream wait), then spins until the notify kernel has written the
receive counts (its end) and launches dispatch; then the experts (compute stream, after
the dispatch through a stream wait) and combine (communication stream, after the
experts). The next layer's attention overlaps the combine. At the step's end the CPU
waits in cudaDeviceSynchronize; the next step starts once it returns.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

COMPUTE, COMM = 7, 27
BASE_US = 1_740_000_000_000_000  # an absolute microsecond clock, like Kineto's
CALL_US = 5       # a runtime call's duration
LATENCY_US = 5    # from a launch call's return to the earliest start of its kernel
PY_US = 15        # CPU work before each launch
NAMES = {
    "attn": "void flash::compute_attn_ws<Flash_fwd_kernel_traits<192, 128, 128>>(Params)",
    "experts": "void cutlass::device_kernel<dpsk::grouped_gemm::cuda::m_grouped_fp8_experts>"
               "(Params)",
    "notify": "void dpsk::ep::internode::notify_dispatch<false, 8>(int const*, int*, int)",
    "dispatch": "void dpsk::ep::internode::dispatch<false, 8, false, 8>(int4*, float*, int)",
    "combine": "void dpsk::ep::internode::combine<false, 8, __nv_bfloat16, 8>(int4*, int)",
}
CATEGORY = {"attn": "compute", "experts": "compute", "notify": "collective",
            "dispatch": "collective", "combine": "collective"}


@dataclass(frozen=True)
class Shape:
    layers: int = 4
    steps: int = 3
    us: dict[str, int] = field(default_factory=lambda: {
        "attn": 3_100, "experts": 2_300, "notify": 1_400, "dispatch": 4_200,
        "combine": 6_300})
    speedup: dict[str, float] = field(default_factory=dict)  # what-if: kind -> k

    def dur(self, kind: str) -> int:
        return max(1, round(self.us[kind] / self.speedup.get(kind, 1.0)))


@dataclass(eq=False, repr=False)  # ops point at each other: the default repr explodes
class Op:
    kind: str
    stream: int
    step: int
    dur: int
    after: Op | None = None       # the op it waits for through a stream wait
    call: int = 0                 # its launch call's start
    start: int = 0
    end: int = 0
    why: Any = None               # "launch" or the Op whose end set its start
    host_from: Op | None = None   # the GPU op the CPU last waited for before its launch

    def __repr__(self) -> str:
        return f"Op({self.kind}, step {self.step}, {self.start}-{self.end} us)"


@dataclass(repr=False)
class Run:
    ops: list[Op]
    cpu: list[tuple[str, int, int, int]]  # (name, start, end, correlation or 0)
    steps: list[tuple[int, int]]           # the CPU's step spans

    def __repr__(self) -> str:
        return f"Run({len(self.ops)} ops, {len(self.steps)} steps)"


def simulate(shape: Shape) -> Run:
    """Run the steps: the CPU issues in program order, the GPU starts each op at the
    latest of its launch, its stream's previous op and the op it waits for."""
    ops: list[Op] = []
    cpu: list[tuple[str, int, int, int]] = []
    spans: list[tuple[int, int]] = []
    last: dict[int, Op] = {}
    t = 0
    waited: Op | None = None

    def launch(kind: str, stream: int, step: int, after: Op | None) -> Op:
        nonlocal t
        t += PY_US
        op = Op(kind, stream, step, shape.dur(kind), after=after, call=t, host_from=waited)
        if after is not None and after.stream != stream:
            cpu.append(("cudaStreamWaitEvent", t, t + 1, 0))
            t += 2
            op.call = t
        cpu.append(("cudaLaunchKernel", op.call, op.call + CALL_US, 0))
        t = op.call + CALL_US
        causes = [(op.call + CALL_US + LATENCY_US, 2, "launch")]
        prev = last.get(stream)
        if prev is not None:
            causes.append((prev.end, 0, prev))
        if after is not None:
            causes.append((after.end, 1, after))
        op.start, _, op.why = max(causes, key=lambda c: (c[0], -c[1]))
        op.end = op.start + op.dur
        last[stream] = op
        ops.append(op)
        return op

    for step in range(1, shape.steps + 1):
        begin = t
        t += 200  # the step's own Python before its first launch
        combine: Op | None = None
        for _ in range(shape.layers):
            attn = launch("attn", COMPUTE, step, None)
            notify = launch("notify", COMM, step, attn)
            # the host spins on the receive counts the notify kernel writes: nothing
            # recorded until it comes back, just after the kernel ended
            t = max(t, notify.end + 20)
            waited = notify
            dispatch = launch("dispatch", COMM, step, None)
            experts = launch("experts", COMPUTE, step, dispatch)
            combine = launch("combine", COMM, step, experts)
        assert combine is not None
        t += 30
        gpu_end = max(o.end for o in ops)
        sync_end = max(t + CALL_US, gpu_end + 10)
        cpu.append(("cudaDeviceSynchronize", t, sync_end, 0))
        waited = max(ops, key=lambda o: o.end)
        t = sync_end + 20
        spans.append((begin, t))
    return Run(ops=ops, cpu=cpu, steps=spans)


# ------------------------------------------------------------------ ground truth
def windows(run: Run) -> dict[int, tuple[int, int]]:
    """Per step with a successor: (first GPU start, the next step's first GPU start)."""
    first: dict[int, int] = {}
    for op in run.ops:
        first[op.step] = min(first.get(op.step, op.start), op.start)
    return {k: (first[k], first[k + 1]) for k in sorted(first) if k + 1 in first}


def step_time_us(run: Run) -> float:
    w = windows(run)
    return sum(e - s for s, e in w.values()) / len(w)


def path_truth(run: Run, step: int) -> dict[str, int]:
    """The path of `step` by category (µs), walked back from the window's end: an op's
    start from what the simulator said set it (the GPU op it waited for: idle between;
    its launch: the call up to the start, then the host from the GPU op the CPU last
    waited for), an op's end from its own interval."""
    ws, we = windows(run)[step]
    probe = min((o for o in run.ops if o.step == step + 1), key=lambda o: o.start)
    out = dict.fromkeys(("compute", "collective", "launch", "cpu", "idle"), 0)

    def add(cat: str, s: int, e: int) -> bool:
        out[cat] += max(0, e - max(s, ws))
        return s > ws

    op = probe
    while True:
        if op.why == "launch":
            if not add("launch", op.call, op.start):
                break
            src = op.host_from
            if not add("cpu", src.end if src is not None else ws, op.call) or src is None:
                break
            op = src
        else:
            if not add("idle", op.why.end, op.start):
                break
            op = op.why
        if not add(CATEGORY[op.kind], op.start, op.end):
            break
    return out


# ------------------------------------------------------------------ the trace
def write_trace(run: Run, path: Path) -> Path:
    """One Kineto trace of rank 0 (DeepSeek's train.json's fields)."""
    pid, tid = 1166, 1166
    ev: list[dict[str, Any]] = []
    launches = [c for c in run.cpu if c[0] == "cudaLaunchKernel"]
    assert len(launches) == len(run.ops)
    corr = 1000
    for (name, s, e, _), k in zip(sorted(run.cpu, key=lambda c: c[1]), range(len(run.cpu)),
                                  strict=True):
        corr += 1
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": pid, "tid": tid,
                   "ts": BASE_US + s, "dur": e - s,
                   "args": {"External id": corr, "cbid": k, "correlation": corr}})
        if name != "cudaLaunchKernel":
            continue
        op = next(o for o in run.ops if o.call == s)
        ev.append({"ph": "X", "cat": "kernel", "name": NAMES[op.kind], "pid": 0,
                   "tid": op.stream, "ts": BASE_US + op.start, "dur": op.end - op.start,
                   "args": {"External id": corr, "device": 0, "context": 1,
                            "stream": op.stream, "correlation": corr}})
    for k, (s, e) in enumerate(run.steps, start=1):
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}",
                   "pid": pid, "tid": tid, "ts": BASE_US + s, "dur": e - s, "args": {}})
    doc = {"schemaVersion": 1,
           "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1},
           "deviceProperties": [{"id": 0, "name": "NVIDIA H800", "totalGlobalMem": 84943110144,
                                 "computeMajor": 9, "computeMinor": 0, "numSms": 132}],
           "traceEvents": ev}
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)
    return path


def faster(shape: Shape, kind: str, k: float) -> Shape:
    return replace(shape, speedup={kind: k})
