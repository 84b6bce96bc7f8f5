"""`stepscope plan --params N --gpus G --gpu NAME --gpus-per-node K --seq S [...]`."""

from __future__ import annotations

import argparse

from stepscope.analyzers.peaks import resolve_device
from stepscope.analyzers.planner import (
    DEFAULT_EFFICIENCY,
    DEFAULT_NETWORK_GBS,
    MAX_PLAN_GPUS,
    TRAINING_DTYPES,
    make_job,
    plan_result,
)
from stepscope.dashboard.render.plan import plan_json, plan_markdown
from stepscope.ingest.exit_codes import EXIT_NOTHING, EXIT_OK
from stepscope.validate import integer, output_file, real, write_output

# Ranges of plan's inputs (README "Limits"): beyond them the planner's answer means
# nothing, and --gpus bounds its loops (divisors of the GPU count).
MAX_GPUS = MAX_PLAN_GPUS
PARAMS = real(0, 1e16)
GPUS = integer(1, MAX_GPUS)
GPUS_PER_NODE = integer(1, 1024)
SEQ = integer(1, 1 << 24)
TOKENS = real(0, 1e13)
LAYERS = integer(1, 10_000)
HIDDEN = integer(1, 1 << 20)
HEADS = integer(1, 1 << 16)
MICRO_BATCH = integer(1, 1 << 16)
NETWORK_GBS = real(0, 1e5)
EFFICIENCY = real(0, 1)
TOP = integer(1, 100_000)

HELP = "rank TP/PP/DP/ZeRO layouts for a model and cluster by predicted MFU"
RENDERERS = {"json": plan_json, "md": plan_markdown}


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("plan", help=HELP, description=HELP + ".")
    p.add_argument("--params", type=PARAMS, required=True, help="parameters, e.g. 70e9")
    p.add_argument("--gpus", type=GPUS, required=True, help=f"1 to {MAX_GPUS}")
    p.add_argument("--gpu", required=True, help="device, e.g. H100, 'NVIDIA H200', MI300X")
    p.add_argument("--gpus-per-node", type=GPUS_PER_NODE, default=8)
    p.add_argument("--seq", type=SEQ, required=True, help="sequence length")
    p.add_argument("--global-batch-tokens", type=TOKENS, default=4 * 2**20,
                   help="tokens per step across the job (default 4 Mi)")
    p.add_argument("--layers", type=LAYERS, help="default: derived from --params")
    p.add_argument("--hidden", type=HIDDEN, help="default: derived from --params")
    p.add_argument("--heads", type=HEADS, help="default: hidden / 128")
    p.add_argument("--micro-batch", type=MICRO_BATCH, default=1)
    p.add_argument("--network-gbs", type=NETWORK_GBS, default=DEFAULT_NETWORK_GBS,
                   help=f"per-GPU network bandwidth, GB/s (default {DEFAULT_NETWORK_GBS:g})")
    p.add_argument("--efficiency", type=EFFICIENCY, default=DEFAULT_EFFICIENCY,
                   help=f"kernel efficiency, share of peak in (0, 1] "
                        f"(default {DEFAULT_EFFICIENCY})")
    p.add_argument("--dtype", choices=TRAINING_DTYPES,
                   help="matmul dtype of the peak (default: bf16, else the device's fp16, fp32)")
    p.add_argument("--top", type=TOP, default=10, help="layouts to show (default 10)")
    p.add_argument("--format", choices=sorted(RENDERERS), default="md")
    p.add_argument("--out", type=output_file, help="write the plan here (its folder must exist)")


def run(args: argparse.Namespace) -> int:
    job = make_job(args.params, args.gpus, args.gpus_per_node, args.seq,
                   args.global_batch_tokens, args.layers, args.hidden, args.heads,
                   args.micro_batch, args.network_gbs, args.efficiency, args.dtype)
    model = plan_result(job, resolve_device(args.gpu), args.top)
    write_output(RENDERERS[args.format](model), args.out)
    return EXIT_OK if model.feasible else EXIT_NOTHING
