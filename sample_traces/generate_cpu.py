"""Generate the bundled CPU sample traces: a tiny GPT trained on 4 ranks with gloo.

Each variant is spawned fresh (one ``torch.multiprocessing.spawn`` per variant) so
every trace comes from its own profiler session, and writes one gzipped Kineto
trace per rank to ``sample_traces/cpu/<variant>/rank<R>.json.gz``.

Variants:
  ddp          DistributedDataParallel, small buckets (several all-reduces per step)
  pipeline     hand-written GPipe: 2 stages x 2 data-parallel replicas, 4 microbatches,
               blocking send/recv between stages, DP all-reduce in a subgroup
  ckpt         DDP + non-reentrant activation checkpointing of every block
  ckpt_reent   DDP + reentrant activation checkpointing of every block
  straggler    DDP where rank 2 sleeps STRAGGLER_MS at the start of every step
  fsdp2        FSDP2 (fully_shard) per block + root, on a CPU device mesh

Usage: python sample_traces/generate_cpu.py [--out DIR] [--variants a,b] [--steps N]
Needs torch (CPU build is enough): ``pip install torch==2.13.0``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

VARIANTS = ("ddp", "pipeline", "ckpt", "ckpt_reent", "straggler", "fsdp2")
WORLD_SIZE = 4
STRAGGLER_RANK = 2
STRAGGLER_MS = 150
MICROBATCHES = 4
VOCAB, D_MODEL, HEADS, BLOCKS, SEQ, BATCH = 256, 64, 4, 2, 32, 8


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _build_model(torch, checkpoint_mode: str | None):
    nn = torch.nn
    from torch.utils.checkpoint import checkpoint

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1 = nn.LayerNorm(D_MODEL)
            self.qkv = nn.Linear(D_MODEL, 3 * D_MODEL)
            self.proj = nn.Linear(D_MODEL, D_MODEL)
            self.ln2 = nn.LayerNorm(D_MODEL)
            self.fc1 = nn.Linear(D_MODEL, 4 * D_MODEL)
            self.fc2 = nn.Linear(4 * D_MODEL, D_MODEL)

        def attention(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(x).split(D_MODEL, dim=-1)
            q = q.view(b, s, HEADS, -1).transpose(1, 2).reshape(b * HEADS, s, -1)
            k = k.view(b, s, HEADS, -1).transpose(1, 2).reshape(b * HEADS, s, -1)
            v = v.view(b, s, HEADS, -1).transpose(1, 2).reshape(b * HEADS, s, -1)
            att = torch.bmm(q, k.transpose(1, 2)) / (q.shape[-1] ** 0.5)
            att = att.softmax(dim=-1)
            out = torch.bmm(att, v).view(b, HEADS, s, -1).transpose(1, 2).reshape(b, s, -1)
            return self.proj(out)

        def inner(self, x):
            x = x + self.attention(self.ln1(x))
            return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))

        def forward(self, x):
            if checkpoint_mode is None:
                return self.inner(x)
            return checkpoint(self.inner, x, use_reentrant=(checkpoint_mode == "reentrant"))

    class Embed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok = nn.Embedding(VOCAB, D_MODEL)

        def forward(self, idx):
            return self.tok(idx)

    class Head(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln = nn.LayerNorm(D_MODEL)
            self.out = nn.Linear(D_MODEL, VOCAB)

        def forward(self, x):
            return self.out(self.ln(x))

    return Embed, Block, Head


def _profiler(torch, steps: int):
    from torch.profiler import ProfilerActivity, profile, schedule

    return profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=steps, repeat=1),
        record_shapes=True,
    )


def _export(prof, out_dir: Path, rank: int) -> None:
    tmp = out_dir / f".rank{rank}.json"
    prof.export_chrome_trace(str(tmp))
    data = tmp.read_bytes()
    with open(out_dir / f"rank{rank}.json.gz", "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=9) as gz:
            gz.write(data)
    tmp.unlink()


def _batch(torch, gen):
    idx = torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen)
    return idx, torch.roll(idx, -1, dims=1)


def _run_data_parallel(torch, dist, rank: int, variant: str, steps: int, out_dir: Path) -> None:
    nn = torch.nn
    ckpt = {"ckpt": "non_reentrant", "ckpt_reent": "reentrant"}.get(variant)
    Embed, Block, Head = _build_model(torch, ckpt)
    torch.manual_seed(0)
    model = nn.Sequential(Embed(), *[Block() for _ in range(BLOCKS)], Head())
    if variant == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh("cpu", (WORLD_SIZE,))
        for block in list(model)[1:-1]:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
    else:
        model = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.25)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    gen = torch.Generator().manual_seed(rank)
    with _profiler(torch, steps) as prof:
        for _ in range(steps + 2):
            if variant == "straggler" and rank == STRAGGLER_RANK:
                time.sleep(STRAGGLER_MS / 1000)
            idx, tgt = _batch(torch, gen)
            logits = model(idx)
            loss = nn.functional.cross_entropy(logits.view(-1, VOCAB), tgt.view(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            prof.step()
    _export(prof, out_dir, rank)


def _run_pipeline(torch, dist, rank: int, steps: int, out_dir: Path) -> None:
    """GPipe with 2 stages (stage = rank // 2, peer rank +-2) and DP=2 within a stage."""
    nn = torch.nn
    Embed, Block, Head = _build_model(torch, None)
    stage, replica = divmod(rank, 2)
    peer = rank + 2 if stage == 0 else rank - 2
    dp_groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    dp_group = dp_groups[stage]
    torch.manual_seed(stage)
    if stage == 0:
        model = nn.Sequential(Embed(), Block())
    else:
        model = nn.Sequential(Block(), Head())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    gen = torch.Generator().manual_seed(replica)
    mb = BATCH // MICROBATCHES
    profiler = torch.profiler.record_function
    with _profiler(torch, steps) as prof:
        for _ in range(steps + 2):
            idx, tgt = _batch(torch, gen)
            outputs, inputs = [], []
            for i in range(MICROBATCHES):
                with profiler(f"pp_fwd_mb{i}"):
                    if stage == 0:
                        out = model(idx[i * mb : (i + 1) * mb])
                        dist.send(out.detach(), peer)
                    else:
                        act = torch.empty(mb, SEQ, D_MODEL)
                        dist.recv(act, peer)
                        act.requires_grad_(True)
                        logits = model(act)
                        out = nn.functional.cross_entropy(
                            logits.view(-1, VOCAB), tgt[i * mb : (i + 1) * mb].reshape(-1)
                        )
                        inputs.append(act)
                    outputs.append(out)
            for i in range(MICROBATCHES):
                with profiler(f"pp_bwd_mb{i}"):
                    if stage == 1:
                        outputs[i].backward()
                        dist.send(inputs[i].grad, peer)
                    else:
                        grad = torch.empty_like(outputs[i])
                        dist.recv(grad, peer)
                        outputs[i].backward(grad)
            with profiler("dp_grad_allreduce"):
                flat = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
                dist.all_reduce(flat, group=dp_group)
                flat /= 2
                offset = 0
                for p in model.parameters():
                    n = p.numel()
                    p.grad.copy_(flat[offset : offset + n].view_as(p))
                    offset += n
            opt.step()
            opt.zero_grad(set_to_none=True)
            prof.step()
    _export(prof, out_dir, rank)


def _worker(rank: int, variant: str, port: int, steps: int, out_dir: str) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD_SIZE
    )
    try:
        if variant == "pipeline":
            _run_pipeline(torch, dist, rank, steps, Path(out_dir))
        else:
            _run_data_parallel(torch, dist, rank, variant, steps, Path(out_dir))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def generate(out_root: Path, variants: list[str], steps: int) -> None:
    import torch.multiprocessing as mp

    for variant in variants:
        started = time.time()
        final = out_root / variant
        staging = Path(tempfile.mkdtemp(prefix=f".{variant}-", dir=out_root))
        try:
            mp.spawn(_worker, args=(variant, _free_port(), steps, str(staging)), nprocs=WORLD_SIZE)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        staging.chmod(0o755)
        if final.exists():
            shutil.rmtree(final)
        staging.rename(final)
        (final / "variant.json").write_text(
            json.dumps(_variant_facts(variant, steps), indent=2) + "\n"
        )
        print(f"{variant}: {time.time() - started:.1f}s -> {final}", file=sys.stderr)


def _variant_facts(variant: str, steps: int) -> dict:
    """What the generator did, for tests to check the analysis against."""
    facts: dict = {"variant": variant, "world_size": WORLD_SIZE, "profiled_steps": steps}
    if variant == "straggler":
        facts.update(straggler_rank=STRAGGLER_RANK, straggler_sleep_ms=STRAGGLER_MS)
    if variant == "pipeline":
        facts.update(pipeline_stages=2, data_parallel=2, microbatches=MICROBATCHES)
    if variant.startswith("ckpt"):
        facts.update(checkpoint="reentrant" if variant == "ckpt_reent" else "non_reentrant")
    return facts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "cpu")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    generate(args.out, variants, args.steps)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
