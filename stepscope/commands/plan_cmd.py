"""`stepscope plan --params N --gpus G --gpu NAME --seq S [...]`, or
`stepscope plan --from RUN [--gpus G] [--tp T --pp P --dp D --zero Z --micro-batches M]`."""

from __future__ import annotations

import argparse
from pathlib import Path

from stepscope.analyzers.context import ReportOptions
from stepscope.analyzers.flops.model_spec import load_spec
from stepscope.analyzers.flops.peaks import resolve_device
from stepscope.analyzers.plan.from_run import Constraints
from stepscope.analyzers.plan.layouts import (
    DEFAULT_EFFICIENCY,
    DEFAULT_NETWORK_GBS,
    MAX_PLAN_GPUS,
    TRAINING_DTYPES,
    make_job,
    plan_result,
)
from stepscope.analyzers.results import PlanResult
from stepscope.cli import say
from stepscope.commands import COMMAND_HELP
from stepscope.commands._targets import print_remarks
from stepscope.dashboard.render import formats
from stepscope.ingest import DEFAULT_DB, UsageError
from stepscope.ingest.exit_codes import EXIT_NOTHING, EXIT_OK, EXIT_PARTIAL
from stepscope.outputs import add_format_options, check_output, command_inputs, emit
from stepscope.targets import plan
from stepscope.validate import PEAK_TFLOPS, integer, real

# Ranges of plan's inputs (README "Limits"): beyond them the planner's answer means
# nothing, and --gpus bounds its loops (divisors of the GPU count).
MAX_GPUS = MAX_PLAN_GPUS
PARAMS = real(0, 1e16)
GPUS = integer(1, MAX_GPUS)
GPUS_PER_NODE = integer(1, 1024)
SEQ = integer(1, 1 << 24)
TOKENS = integer(1, 10**13)  # tokens are whole: "1e6" refused as --seq "4096.0" is
LAYERS = integer(1, 10_000)
HIDDEN = integer(1, 1 << 20)
HEADS = integer(1, 1 << 16)
MICRO_BATCH = integer(1, 1 << 16)
NETWORK_GBS = real(0, 1e5)
EFFICIENCY = real(0, 1)
TOP = integer(1, 100_000)
DEGREE = integer(1, MAX_GPUS)
ZERO = integer(0, 3)

HELP = COMMAND_HELP["plan"]
# what the formula planner needs, and what --from takes from the run instead
FORMULA_ONLY = ("params", "gpu", "seq", "layers", "hidden", "heads", "micro_batch",
                "network_gbs", "efficiency")
FROM_ONLY = ("db", "model", "tp", "pp", "dp", "zero", "micro_batches", "peak_tflops")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("plan", help=HELP, description=HELP + "; with --from RUN, calibrated "
                       "on a measured run (docs/planner.md).")
    p.add_argument("--from", dest="source", metavar="RUN",
                   help="calibrate on this run (in --db, or a trace path) and predict its "
                        "model at other GPU counts and layouts")
    p.add_argument("--db", default=None, help=f"database file for --from (default: {DEFAULT_DB})")
    p.add_argument("--model", type=Path, default=None,
                   help="model spec for --from (default: model.json beside the run's traces)")
    p.add_argument("--params", type=PARAMS, help="parameters, e.g. 70e9 (without --from)")
    p.add_argument("--gpus", type=GPUS, help=f"1 to {MAX_GPUS} (--from: default the run's)")
    p.add_argument("--gpu", help="device, e.g. H100, 'NVIDIA H200', MI300X (without --from)")
    p.add_argument("--gpus-per-node", type=GPUS_PER_NODE, default=None,
                   help="default 8 (--from: the run's)")
    p.add_argument("--seq", type=SEQ, help="sequence length (without --from)")
    p.add_argument("--global-batch-tokens", type=TOKENS, default=None,
                   help="tokens per step across the job (default 4 Mi; --from: the spec's)")
    p.add_argument("--layers", type=LAYERS, help="default: derived from --params")
    p.add_argument("--hidden", type=HIDDEN, help="default: derived from --params")
    p.add_argument("--heads", type=HEADS, help="default: hidden / 128")
    p.add_argument("--micro-batch", type=MICRO_BATCH, default=None, help="default 1")
    p.add_argument("--network-gbs", type=NETWORK_GBS, default=None,
                   help=f"per-GPU network bandwidth, GB/s (default {DEFAULT_NETWORK_GBS:g})")
    p.add_argument("--efficiency", type=EFFICIENCY, default=None,
                   help=f"kernel efficiency, share of peak in (0, 1] "
                        f"(default {DEFAULT_EFFICIENCY})")
    p.add_argument("--dtype", choices=TRAINING_DTYPES,
                   help="matmul dtype of the peak (default: bf16, else the device's fp16, fp32;"
                        " --from: inferred from the run)")
    for flag, kind, what in (("--tp", DEGREE, "tensor-parallel degree"),
                             ("--pp", DEGREE, "pipeline stages"),
                             ("--dp", DEGREE, "data-parallel degree"),
                             ("--zero", ZERO, "ZeRO stage 0-3"),
                             ("--micro-batches", DEGREE, "microbatches per step")):
        p.add_argument(flag, type=kind, default=None, help=f"{what} (--from; default: every)")
    p.add_argument("--peak-tflops", type=PEAK_TFLOPS,
                   help="peak TFLOP/s per GPU for --from, in (0, 1e6] (overrides the table)")
    p.add_argument("--top", type=TOP, default=10, help="layouts to show (default 10)")
    add_format_options(p, formats.PLAN, out_help="write the plan here (its folder must exist)")


def _given(args: argparse.Namespace, names: tuple[str, ...]) -> list[str]:
    return ["--" + n.replace("_", "-") for n in names if getattr(args, n) is not None]


def run(args: argparse.Namespace) -> int:
    if args.out is not None:
        check_output(args.out, db=args.db or DEFAULT_DB, inputs=command_inputs(args))
    if args.source is not None:
        return _run_from(args)
    wrong = _given(args, FROM_ONLY)
    if wrong:
        raise UsageError(f"plan: {', '.join(wrong)} {'needs' if len(wrong) == 1 else 'need'} "
                         "--from RUN")
    missing = [f"--{n}" for n in ("params", "gpus", "gpu", "seq") if getattr(args, n) is None]
    if missing:
        raise UsageError(f"plan: {', '.join(missing)} required (or --from RUN)")
    job = make_job(args.params, args.gpus, args.gpus_per_node or 8, args.seq,
                   args.global_batch_tokens or 4 * 2**20, args.layers, args.hidden,
                   args.heads, args.micro_batch or 1,
                   DEFAULT_NETWORK_GBS if args.network_gbs is None else args.network_gbs,
                   DEFAULT_EFFICIENCY if args.efficiency is None else args.efficiency,
                   args.dtype)
    model = plan_result(job, resolve_device(args.gpu), args.top)
    emit(args, formats.PLAN, model)
    return _exit_code(model)


def _exit_code(model: PlanResult) -> int:
    """EXIT_OK, or EXIT_NOTHING with one line on stderr saying why no layout fits."""
    if model.feasible:
        return EXIT_OK
    why = model.none_reason or "the GPUs, layers and global batch allow none"
    say(f"error: plan: no layout fits on {model.job.gpus} {model.device}: {why}")
    return EXIT_NOTHING


def _run_from(args: argparse.Namespace) -> int:
    wrong = _given(args, FORMULA_ONLY + ("global_batch_tokens",))
    if wrong:
        raise UsageError(f"plan --from: {', '.join(wrong)} come from the run and its model "
                         "spec; drop them")
    spec = load_spec(args.model) if args.model else None  # fails before any ingest
    options = ReportOptions(spec=spec, peak_tflops=args.peak_tflops, dtype=args.dtype)
    constraints = Constraints(gpus=args.gpus, gpus_per_node=args.gpus_per_node, tp=args.tp,
                              pp=args.pp, dp=args.dp, zero=args.zero,
                              microbatches=args.micro_batches)
    built = plan(args.source, args.db or DEFAULT_DB, options, constraints, args.top)
    print_remarks(built)
    emit(args, formats.PLAN, built.plan)
    if built.failures:
        return EXIT_PARTIAL
    return _exit_code(built.plan)
